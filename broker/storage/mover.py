"""The replica mover (KIP-113): copy a live replica into a ``-future`` replica on another log
directory while it keeps taking appends, then swap them under the partition lock.

A pool of ``num.replica.alter.log.dirs.threads`` threads; each takes the lexicographically
smallest waiting partition and moves it to completion before taking the next (Kafka's
``ReplicaAlterLogDirsThread`` order). Segments are copied byte for byte with
``os.copy_file_range`` (``sendfile`` as fallback) under the shared :class:`Throttle`, without
the partition lock; the lock is held only to snapshot segment sizes and for the swap. The copy
threads run at a lower CPU and I/O priority (:data:`MOVER_NICE`, :data:`MOVER_IO_PRIORITY`),
so that appends and fetches on the event loop come first when the cores are busy, and each copied
chunk's write-back is started at once from the copying thread (``writeback``); the swap runs on
one thread at the broker's own priority, since appends wait for the lock it holds:

1. future caught up (same segments, same sizes) → its log start, high watermark and leader
   epochs set from the live log (``caught_up``)
2. rename live → ``topic-partition.<uuid>-delete`` (``after_live_renamed``)
3. rename future → ``topic-partition`` (``after_future_renamed``)
4. the live ``Log`` object adopts the future's directory and segments; ``-delete`` is deleted
   asynchronously.

The lock is held from the final catch-up copy to step 4; appends wait meanwhile, and on a busy
disk every fsync is a journal commit that can take tens to hundreds of milliseconds. So the swap
makes durable before the lock what it can, and under it only what ordering needs. The fsyncs of
a move, where they happen and why each is needed:

- *Copy rounds, no lock:* the copied bytes (``Log.flush`` of the future: its segments and index
  files) once, when a round first leaves little behind, so that the future's recovery point
  covers the bulk of the copy; what arrives during that fsync is copied by further rounds and
  not fsynced again (below). Then the destination's checkpoints (the future's recovery point,
  log start and high watermark, which a crash after the renames promotes with it), written
  atomically.
- *Under the lock, one:* the source directory after renaming live → ``-delete``. The two
  renames are in two directories, usually two file systems, and nothing orders them on disk
  but this fsync: without it a power loss could keep the second and lose the first, leaving
  two live replicas of one partition.
- *After the lock:* the destination directory after renaming future → live (a crash before
  it is durable leaves ``-delete`` + future, which start-up promotes, so it need not hold
  appends); then both directories' checkpoints. The ``-delete`` directory is scheduled for
  deletion only after that.

The bytes copied after that one flush (what arrived during it and the catch-up under the lock,
at most :data:`SWAP_UNDER_LOCK_BYTES` plus what arrived meanwhile) are not fsynced: the log
keeps the future's recovery point, which does not cover them, so after a crash start-up
re-validates them as it does any unflushed tail of a live log (appends are never fsynced
either: Kafka's durability is replication). Flushing again until a flush left little behind
(as this mover once did) never ends where a partition's appends fill more than
:data:`SWAP_UNDER_LOCK_BYTES` during one fsync -- 1 MiB in 100 ms at 10 MB/s, on a busy disk --
and cost a journal commit per round besides. Kafka's own
swap (``LogManager.replaceCurrentWithFutureLog``) likewise fsyncs only the two directories.

A crash between any two steps is repaired at start-up by the LogManager (seed 000, "Handle
failure…"): live + future → resume; only future → promote; ``-delete`` → delete. ``hook`` is
called with each step's name (and ``copy_progress`` after every chunk) so crash tests can stop a
child process exactly there.

Thread-safe; all state changes go through the LogManager's lock or the partition lock.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spindle.broker.common.clock import Clock
from spindle.broker.common.errors import KafkaError, KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.storage.checkpoint import fsync_dir
from spindle.broker.storage.log import Log
from spindle.broker.storage.names import suffixed_dir_name
from spindle.broker.storage.priority import IOPRIO_CLASS_BE, IoPriority, lower_current_thread
from spindle.broker.storage.segment import SegmentState, SourceShrunk
from spindle.broker.storage.throttle import STEP_MIN, Throttle, unthrottled_step

if TYPE_CHECKING:
    from spindle.broker.storage.manager import LogManager

log = logging.getLogger(__name__)

StepHook = Callable[[str, TopicPartition], None]

SWAP_UNDER_LOCK_BYTES = 1 << 20
"""Once a copy round leaves at most this much behind, finish it under the partition lock: with
appends running flat out, an unlocked copy could otherwise chase the log end forever."""


MOVER_NICE = 10
"""CPU nice value of the mover threads: the event loop's appends and fetches come first when
the cores are busy (see :mod:`spindle.broker.storage.priority`)."""

MOVER_IO_PRIORITY = IoPriority(IOPRIO_CLASS_BE, 7)
"""I/O priority of the mover threads: best effort, last level (the idle class could starve a
move for good on a disk that is never idle)."""


class _Restart(Exception):
    """The source was truncated or swapped while copying: start the copy again."""


@dataclass(eq=False)
class MoveJob:
    """One partition being moved to ``future``'s directory."""

    tp: TopicPartition
    future: Log
    resumed: bool = False
    """Found on disk at start-up: its bytes are checked against the source before reuse."""
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    active: bool = False
    swapping: bool = False
    swapped: bool = False
    swap_locked_s: float = 0.0
    """How long the swap held the source partition's lock (appends and reads waited)."""
    swap_locked_flush_s: float = 0.0
    """Of that, the one fsync under the lock (the source directory, after the first rename)."""
    bytes_copied: int = 0
    """Bytes of the source now in the future's files: adopted segments plus what has arrived
    of the one being copied (whose size the future adopts only when it is whole). Written by
    the copying thread only; read as DescribeLogDirs' size of the future replica, so that a
    move's progress grows while it copies (Kafka reports the future log's size)."""


class ReplicaMover:
    """Thread pool running :class:`MoveJob`s (see module docstring)."""

    def __init__(
        self,
        manager: LogManager,
        *,
        threads: int,
        throttle: Throttle,
        clock: Clock,
        hook: StepHook | None = None,
    ) -> None:
        self._manager = manager
        self._throttle = throttle
        self._clock = clock
        self._hook = hook
        self._cond = threading.Condition()
        self._waiting: dict[TopicPartition, MoveJob] = {}
        self._jobs: dict[TopicPartition, MoveJob] = {}
        self._stopped = False
        self._running = 0
        # The swap holds the partition lock that appends wait for, so it runs on a thread at
        # the broker's own priority, never at the copy threads' lowered one (a preempted
        # low-priority lock holder would stall appends far longer than the swap takes). The
        # thread is started here, by the caller's thread, whose priority it inherits.
        self._swapper = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="replica-alter-log-dirs-swap"
        )
        self._swapper.submit(threading.get_native_id).result()
        self._threads = [
            threading.Thread(target=self._work, name=f"replica-alter-log-dirs-{i}", daemon=True)
            for i in range(threads)
        ]
        for t in self._threads:
            t.start()

    # --- control ---------------------------------------------------------------------------

    def job(self, tp: TopicPartition) -> MoveJob | None:
        with self._cond:
            return self._jobs.get(tp)

    def jobs(self) -> list[MoveJob]:
        with self._cond:
            return list(self._jobs.values())

    def submit(self, job: MoveJob) -> None:
        with self._cond:
            if self._stopped:
                raise KafkaStorageError("the replica mover is shut down")
            self._jobs[job.tp] = job
            self._waiting[job.tp] = job
            self._cond.notify_all()

    def detach(self, job: MoveJob) -> None:
        """Stop ``job`` and wait until no thread works on it (its files are left alone)."""
        job.cancel.set()
        with self._cond:
            self._waiting.pop(job.tp, None)
            was_active = job.active
            if not was_active:
                job.done.set()
            if self._jobs.get(job.tp) is job:
                del self._jobs[job.tp]
        if was_active:
            job.done.wait()

    def signal_stop(self, job: MoveJob) -> None:
        """Ask ``job`` to stop without waiting (the failure handler may run on its thread)."""
        job.cancel.set()
        with self._cond:
            self._waiting.pop(job.tp, None)
            if self._jobs.get(job.tp) is job:
                del self._jobs[job.tp]
            if not job.active:
                job.done.set()

    def idle(self) -> bool:
        """No job waiting or registered, and no thread still inside one (a stopped job may
        still be unwinding, e.g. restoring a renamed directory)."""
        with self._cond:
            return not self._jobs and self._running == 0

    def shutdown(self) -> None:
        """Stop every job (futures stay on disk, resumed at the next start) and the threads."""
        with self._cond:
            self._stopped = True
            jobs = list(self._jobs.values())
            self._cond.notify_all()
        for job in jobs:
            self.detach(job)
        for t in self._threads:
            t.join()
        self._swapper.shutdown()

    # --- threads ---------------------------------------------------------------------------

    def _work(self) -> None:
        lower_current_thread(nice=MOVER_NICE, io=MOVER_IO_PRIORITY)
        while True:
            with self._cond:
                while not self._waiting and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                tp = min(self._waiting)
                job = self._waiting.pop(tp)
                job.active = True
                self._running += 1
            try:
                self._run(job)
            except KafkaError as exc:
                log.warning("move of %s stopped: %s", job.tp, exc)
            except Exception:
                log.exception("move of %s failed", job.tp)
            finally:
                with self._cond:
                    job.active = False
                    self._running -= 1
                    if self._jobs.get(job.tp) is job:
                        del self._jobs[job.tp]
                    job.done.set()

    def _step(self, name: str, tp: TopicPartition) -> None:
        if self._hook is not None:
            self._hook(name, tp)

    def _run(self, job: MoveJob) -> None:
        src = self._manager.get_log(job.tp)
        if src is None:
            return
        fut = job.future
        if job.resumed:
            self._trim_resumed(src, fut)
        seen_generation: int | None = None
        flushed = False
        while not job.cancel.is_set():
            generation, states = src.snapshot()
            if seen_generation is not None and generation != seen_generation:
                fut.drop_segments_except(set())
                flushed = False
            seen_generation = generation
            try:
                copied = self._copy_round(job, src, fut, states, throttled=True)
            except _Restart:
                fut.drop_segments_except(set())
                seen_generation = None
                flushed = False
                continue
            if copied is None:
                return
            if copied > SWAP_UNDER_LOCK_BYTES:
                continue
            if not flushed:
                # The one flush of the move (module docstring), without the partition lock;
                # then copy what arrived during it, without another.
                fut.flush()
                flushed = True
                continue
            if self._swapper.submit(self._try_swap, job, src, fut, seen_generation).result():
                return

    def _copy_round(
        self, job: MoveJob, src: Log, fut: Log, states: list[SegmentState], *, throttled: bool
    ) -> int | None:
        """Copy what the future lacks of ``states``; bytes copied, or None if cancelled."""
        have = {s.base_offset: s for s in fut.segment_states()}
        bases = {s.base_offset for s in states}
        if any(b not in bases for b in have if have[b].size or len(have) > 1):
            fut.drop_segments_except(bases)
            have = {s.base_offset: s for s in fut.segment_states()}
        job.bytes_copied = sum(s.size for s in have.values())
        copied = 0
        for state in states:
            mine = have.get(state.base_offset)
            done = mine.size if mine is not None else 0
            if done > state.size:
                raise _Restart()
            if mine is not None and done == state.size and mine.next_offset == state.next_offset:
                continue
            src_fd = self._open_source(src, state)
            if src_fd is None:
                continue
            try:
                n = self._copy_segment(job, src, fut, state, src_fd, done, throttled=throttled)
                if n is None:
                    return None
                copied += n
                fut.adopt_segment_state(state)
                self._step("segment_copied", job.tp)
            finally:
                os.close(src_fd)
        return copied

    def _copy_segment(
        self,
        job: MoveJob,
        src: Log,
        fut: Log,
        state: SegmentState,
        src_fd: int,
        pos: int,
        *,
        throttled: bool,
    ) -> int | None:
        """Copy one segment's bytes from ``pos`` to ``state.size`` in throttled chunks (in
        steps sized by time when unthrottled); the bytes copied, or None if the move was
        cancelled meanwhile."""
        copied = 0
        step = STEP_MIN
        while pos < state.size:
            if job.cancel.is_set():
                return None
            n = min(self._throttle.chunk_size(step), state.size - pos)
            if throttled:
                if not self._throttle.acquire(n, job.cancel):
                    return None
            else:
                self._throttle.reserve(n)
            began = self._clock.monotonic()
            try:
                fut.copy_segment_bytes(state, src_fd, pos, n, source_logdir=src.logdir_path)
            except SourceShrunk:
                raise _Restart() from None
            step = unthrottled_step(n, self._clock.monotonic() - began)
            pos += n
            copied += n
            job.bytes_copied += n
            self._step("copy_progress", job.tp)
        return copied

    def _trim_resumed(self, src: Log, fut: Log) -> None:
        """Keep only the future's segments that still match the source: same base offset, not
        longer, and the same bytes in their last 64 KiB (the source may have been truncated
        and appended to before the crash). Everything from the first mismatch is dropped."""
        _, states = src.snapshot()
        source = {s.base_offset: s for s in states}
        keep: set[int] = set()
        for mine in fut.segment_states():
            theirs = source.get(mine.base_offset)
            if theirs is None or mine.size > theirs.size:
                break
            length = min(mine.size, 64 << 10)
            start = mine.size - length
            with (
                self._manager.failures.guard(fut.logdir_path, "checking a resumed future"),
                open(mine.log_path, "rb") as f,
            ):
                f.seek(start)
                ours = f.read(length)
            src_fd = self._open_source(src, theirs)
            if src_fd is None:
                break
            try:
                with self._manager.failures.guard(src.logdir_path, "checking a resumed move"):
                    same = os.pread(src_fd, length, start) == ours
            finally:
                os.close(src_fd)
            if not same:
                break
            keep.add(mine.base_offset)
        if len(keep) < len(fut.segment_states()):
            log.info("resumed move of %s: re-copying from segment %d on", src.tp, len(keep))
            fut.drop_segments_except(keep)

    def _open_source(self, src: Log, state: SegmentState) -> int | None:
        """A read descriptor of a source segment; None if retention deleted it since the
        snapshot (not a disk failure: the next round drops it from the future)."""
        with self._manager.failures.guard(src.logdir_path, f"opening {state.log_path}"):
            try:
                return os.open(state.log_path, os.O_RDONLY)
            except FileNotFoundError:
                return None

    def _try_swap(self, job: MoveJob, src: Log, fut: Log, generation: int) -> bool:
        """Finish the copy and swap under the partition lock; False to keep copying."""
        manager = self._manager
        # Before taking the lock (appends keep flowing): checkpoint the destination with the
        # live log's offsets, which a crash after the renames promotes with the future. Values
        # a moment stale are safe: the high watermark only moves forward by replication and
        # the log start is clamped to the first segment.
        fut.set_offsets_from(src)
        manager.checkpoint_dir(fut.logdir_path)
        with src.lock:
            locked_at = time.perf_counter()
            try:
                swapped = self._swap_locked(job, src, fut, generation)
            finally:
                job.swap_locked_s = time.perf_counter() - locked_at
        if isinstance(swapped, bool):
            return swapped
        delete_path, old_logdir = swapped
        # The future's new name made durable, outside the lock (module docstring); before
        # the old replica may go.
        with manager.failures.guard(src.logdir_path, f"renaming future log of {job.tp}"):
            fsync_dir(src.logdir_path)
        manager.schedule_delete(delete_path, old_logdir)
        manager.checkpoint_dir(old_logdir, missing_ok=True)
        manager.checkpoint_dir(src.logdir_path, missing_ok=True)
        log.info("moved %s from %s to %s", job.tp, old_logdir, src.logdir_path)
        manager.moved(job.tp, src.logdir_path)
        return True

    def _swap_locked(
        self, job: MoveJob, src: Log, fut: Log, generation: int
    ) -> bool | tuple[str, str]:
        """The part of :meth:`_try_swap` under the partition lock: False to keep copying, True
        if the move stopped, else (the old replica's ``-delete`` path, its log dir)."""
        manager = self._manager
        failures = manager.failures
        current, states = src.snapshot()
        if current != generation:
            return False
        if self._copy_round(job, src, fut, states, throttled=False) is None:
            return True
        if not manager.begin_swap(job):
            return True
        try:
            fut.set_offsets_from(src)  # rewrites the epochs only if they changed meanwhile
            self._step("caught_up", job.tp)
            live_path = src.dir_path
            delete_path = os.path.join(
                os.path.dirname(live_path), suffixed_dir_name(job.tp, "-delete")
            )
            with failures.guard(src.logdir_path, f"renaming {live_path} for deletion"):
                os.rename(live_path, delete_path)
                # Orders the two renames on disk (module docstring): the only fsync here.
                fsync_at = time.perf_counter()
                fsync_dir(src.logdir_path)
                job.swap_locked_flush_s = time.perf_counter() - fsync_at
            src.rename_dir(delete_path)
            self._step("after_live_renamed", job.tp)
            new_live = os.path.join(fut.logdir_path, os.path.basename(live_path))
            try:
                with failures.guard(fut.logdir_path, f"renaming future log of {job.tp}"):
                    os.rename(fut.dir_path, new_live)
            except KafkaStorageError:
                # The destination failed: the live replica must not stay named -delete.
                with failures.guard(src.logdir_path, f"restoring {live_path}"):
                    os.rename(delete_path, live_path)
                    fsync_dir(src.logdir_path)
                src.rename_dir(live_path)
                raise
            fut.rename_dir(new_live)
            self._step("after_future_renamed", job.tp)
            old_logdir = src.logdir_path
            src.adopt(fut)
            fut.is_future = False
            job.swapped = True
        finally:
            manager.end_swap(job)
        return delete_path, old_logdir
