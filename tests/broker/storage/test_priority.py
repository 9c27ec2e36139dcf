"""Thread priorities for background work: lowered per thread, never raised."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from spindle.broker.storage.priority import (
    IOPRIO_CLASS_BE,
    IOPRIO_CLASS_IDLE,
    IoPriority,
    get_io_priority,
    lower_current_thread,
    set_io_priority,
)

Seen = tuple[int, IoPriority]


def _in_thread(body: Callable[[], None]) -> Seen:
    """Run ``body`` on a new thread; that thread's (nice, I/O priority) afterwards."""
    out: list[Seen] = []

    def run() -> None:
        body()
        tid = threading.get_native_id()
        out.append((os.getpriority(os.PRIO_PROCESS, tid), get_io_priority(tid)))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out[0]


def test_lowering_changes_only_the_calling_thread() -> None:
    me = threading.get_native_id()
    mine = (os.getpriority(os.PRIO_PROCESS, me), get_io_priority(me))
    seen = _in_thread(lambda: lower_current_thread(nice=12, io=IoPriority(IOPRIO_CLASS_BE, 6)))
    assert seen == (12, IoPriority(IOPRIO_CLASS_BE, 6))
    assert (os.getpriority(os.PRIO_PROCESS, me), get_io_priority(me)) == mine


def test_a_thread_already_lower_than_asked_stays_where_it_is() -> None:
    def already_low() -> None:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, 17)
        set_io_priority(tid, IoPriority(IOPRIO_CLASS_IDLE, 0))
        lower_current_thread(nice=10, io=IoPriority(IOPRIO_CLASS_BE, 7))

    assert _in_thread(already_low) == (17, IoPriority(IOPRIO_CLASS_IDLE, 0))
