"""Lower the CPU and I/O priority of the calling thread (the replica movers' threads).

Why: a replica move is background work, like Kafka's ``ReplicaAlterLogDirsThread``, but in
this broker it shares a process, and on small machines the cores, with the event loop that
serves produce and fetch. An unthrottled copy keeps a core busy in the kernel (plus the
flusher threads writing its bytes back), and the scheduler would give it the same share as the
event loop; measured with ``bench/move.py``, appends then ran at 0.4-0.7x their idle rate.
At a higher nice value the copy only takes the CPU the event loop leaves over; on an idle
machine it still gets a whole core (a nice value is a weight, not a cap).

Linux keeps both priorities per thread: ``setpriority(PRIO_PROCESS, tid)`` and
``ioprio_set(IOPRIO_WHO_PROCESS, tid)`` change only that thread. ``ioprio_set`` has no Python
binding in the standard library; it is one system call, made here through ``ctypes`` rather
than adding a runtime dependency (psutil) to the broker image for it. The I/O class matters
for schedulers that honour it (mq-deadline, bfq); the fsyncs and ``sync_file_range`` write-back
the mover starts are submitted at the mover thread's I/O priority.

Failure to change a priority (a sandbox refusing the call, another architecture) is logged
and ignored: moving at normal priority is better than not moving.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import threading
from dataclasses import dataclass

log = logging.getLogger(__name__)

IOPRIO_CLASS_BE = 2
"""Best effort, the default class; levels 0 (first) to 7 (last)."""
IOPRIO_CLASS_IDLE = 3
IOPRIO_WHO_PROCESS = 1
_IOPRIO_CLASS_SHIFT = 13

# ioprio_set / ioprio_get system call numbers (include/uapi/asm-generic/unistd.h and the
# x86_64 table, arch/x86/entry/syscalls/syscall_64.tbl).
_SYSCALLS = {"x86_64": (251, 252), "aarch64": (30, 31)}


@dataclass(frozen=True, slots=True)
class IoPriority:
    """An I/O scheduling class and level, as ``ionice`` shows them."""

    io_class: int
    level: int

    def encode(self) -> int:
        return (self.io_class << _IOPRIO_CLASS_SHIFT) | self.level


def _syscalls() -> tuple[int, int] | None:
    return _SYSCALLS.get(platform.machine())


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def set_io_priority(tid: int, prio: IoPriority) -> None:
    """``ioprio_set`` for one thread; ``OSError`` if the kernel refuses."""
    calls = _syscalls()
    if calls is None:
        raise OSError(f"ioprio_set: unknown system call number on {platform.machine()}")
    if _libc().syscall(calls[0], IOPRIO_WHO_PROCESS, tid, prio.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"ioprio_set({tid}): {os.strerror(err)}")


def get_io_priority(tid: int) -> IoPriority:
    """``ioprio_get`` for one thread (what the kernel holds, for tests and diagnostics)."""
    calls = _syscalls()
    if calls is None:
        raise OSError(f"ioprio_get: unknown system call number on {platform.machine()}")
    value = _libc().syscall(calls[1], IOPRIO_WHO_PROCESS, tid)
    if value < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"ioprio_get({tid}): {os.strerror(err)}")
    return IoPriority(value >> _IOPRIO_CLASS_SHIFT, value & ((1 << _IOPRIO_CLASS_SHIFT) - 1))


def lower_current_thread(*, nice: int, io: IoPriority) -> None:
    """Run the calling thread at ``nice`` (or lower still, if it already is) and at ``io``.

    Only ever lowers the priority: raising it back needs privileges a broker should not have.
    """
    tid = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        if current < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError as exc:
        log.warning("could not lower the CPU priority of thread %d: %s", tid, exc)
    try:
        if get_io_priority(tid).io_class != IOPRIO_CLASS_IDLE:
            set_io_priority(tid, io)
    except OSError as exc:
        log.warning("could not lower the I/O priority of thread %d: %s", tid, exc)
