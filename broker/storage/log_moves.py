"""The part of :class:`~.log.Log` only the replica mover (:mod:`.mover`) calls: snapshots of the
live log, copying into its future log, and the swap's adoption. Kept apart from the log's own
appends, reads and truncation, which is all the rest of the broker uses; :class:`MoverSupport`
is a base class of ``Log`` and names what it needs from it.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from spindle.broker.common.errors import KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.storage.failure import LogDirFailureChannel, copy_failure_dir
from spindle.broker.storage.leader_epoch import LeaderEpochCache
from spindle.broker.storage.segment import Segment, SegmentState

if TYPE_CHECKING:
    from spindle.broker.storage.log import Log


class MoverSupport:
    """The mover's side of a :class:`~.log.Log` (module docstring)."""

    tp: TopicPartition
    dir_path: str
    logdir_path: str
    lock: threading.RLock
    generation: int
    recovery_point: int
    closed: bool
    epochs: LeaderEpochCache
    _segments: list[Segment]
    _failures: LogDirFailureChannel
    _log_start_offset: int
    _high_watermark: int
    _epochs_written: bool

    @property
    def log_end_offset(self) -> int:
        raise NotImplementedError

    def _check_usable(self) -> None:
        raise NotImplementedError

    def _guard(self, what: str) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _new_segment(self, base_offset: int) -> Segment:
        raise NotImplementedError

    def _write_epochs(self) -> None:
        raise NotImplementedError

    def snapshot(self) -> tuple[int, list[SegmentState]]:
        """(generation, segment states) under the lock, for copying without it."""
        with self.lock:
            self._check_usable()
            return self.generation, [s.state() for s in self._segments]

    def copy_segment_bytes(
        self, state: SegmentState, src_fd: int, src_pos: int, length: int, *, source_logdir: str
    ) -> None:
        """Future log only: append ``length`` bytes of the source segment ``state`` describes.

        A failed copy takes the directory that failed offline (``copy_failure_dir``)."""
        with self.lock:
            self._check_usable()
            self._failures.check(source_logdir)
            try:
                seg = self._segment_for_copy(state.base_offset)
                seg.copy_from(src_fd, src_pos, length)
            except OSError as exc:
                blamed = copy_failure_dir(exc, self.logdir_path, source_logdir, src_fd, src_pos)
                self._failures.mark_offline(blamed, exc)
                raise KafkaStorageError(
                    f"copying {self.tp} into {self.dir_path} failed: {exc}; "
                    f"log directory {blamed} is now offline"
                ) from exc

    def adopt_segment_state(self, state: SegmentState) -> None:
        with self.lock, self._guard("adopt copied segment"):
            seg = self._segment_for_copy(state.base_offset)
            seg.adopt_copied(state)

    def _segment_for_copy(self, base_offset: int) -> Segment:
        for seg in self._segments:
            if seg.base_offset == base_offset:
                return seg
        seg = self._new_segment(base_offset)
        if len(self._segments) == 1 and self._segments[0].size == 0:
            # Replace the placeholder in one assignment: lock-free readers (describe_dirs)
            # must never see an empty segment list.
            placeholder, self._segments = self._segments[0], [seg]
            placeholder.delete()
        else:
            self._segments.append(seg)
        return seg

    def segment_states(self) -> list[SegmentState]:
        with self.lock:
            return [s.state() for s in self._segments]

    def drop_segments_except(self, keep: set[int]) -> None:
        """Future log only: delete segments the source no longer has (retention meanwhile)."""
        with self.lock, self._guard("drop segments"):
            dropped = [s for s in self._segments if s.base_offset not in keep]
            kept = [s for s in self._segments if s.base_offset in keep]
            if not kept:
                # Delete first: the fresh segment may reuse a dropped one's file name.
                for seg in dropped:
                    seg.delete()
                dropped = []
                kept = [self._new_segment(min(keep, default=0))]
            self._segments = kept  # one assignment: never empty for lock-free readers
            for seg in dropped:
                seg.delete()

    def adopt(self, future: Log) -> None:
        """Become ``future`` (already renamed to the live name): its directory and segments.

        Called by the mover under this log's lock; offsets that are not in the files (log
        start, high watermark) stay this log's. The recovery point is the future's: the bytes
        the mover copied after its last flush are not durable yet (the swap does not fsync
        them under the lock), so a crash must re-validate them.
        """
        for seg in self._segments:
            seg.close()
        # The future keeps its list: DescribeLogDirs takes the replicas under the manager's
        # lock and reads them after it, and the future stays listed until the swap ends, so a
        # reader may still hold it; like every log it must never show an empty segment list.
        # Closed, it touches the segments no more (``close`` of a closed log does nothing).
        self._segments = future._segments
        future.closed = True
        self.dir_path = future.dir_path
        self.logdir_path = future.logdir_path
        self.recovery_point = min(future.recovery_point, self.log_end_offset)
        self.generation += 1

    def set_offsets_from(self, other: Log) -> None:
        """A future log takes the live log's log start offset, high watermark and leader-epoch
        cache (written to its own directory, so it moves with the replica) at the swap."""
        with self.lock:
            self._log_start_offset = other.log_start_offset
            self._high_watermark = other.high_watermark
            if self.epochs == other.epochs and self._epochs_written:
                return  # the swap calls this under the partition lock: no fsync if unchanged
            self.epochs = other.epochs.copy()
            with self._guard("leader epoch checkpoint"):
                self._write_epochs()
            self._epochs_written = True
