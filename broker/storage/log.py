"""One partition's log: its segments, offsets, appends, reads, roll, retention and truncation.

A ``Log`` is a stable handle for a partition on this broker: when the replica mover swaps in a
future replica from another directory, the same object adopts the new directory and segments,
so the protocol and replication layers may keep references.

Thread-safe: every method takes the partition lock (a ``threading.RLock``) except
:meth:`append`'s validation, which runs before it. The mover copies without the lock and takes
it only to snapshot and to swap, so appends keep flowing during a move. Every disk operation
runs inside the failure guard of the log's directory: an ``OSError`` takes that directory
offline and surfaces as ``KafkaStorageError``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from spindle.broker.common.clock import Clock
from spindle.broker.common.errors import ErrorCode, KafkaError, KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records import batch as record_batch
from spindle.broker.storage.checkpoint import write_atomically
from spindle.broker.storage.failure import LogDirFailureChannel
from spindle.broker.storage.file_range import FileRange, ReadSlice
from spindle.broker.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from spindle.broker.storage.log_moves import MoverSupport
from spindle.broker.storage.names import TOPIC_FILE, name_is_cut
from spindle.broker.storage.retention import apply_retention
from spindle.broker.storage.segment import Segment
from spindle.broker.storage.settings import StorageSettings


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Offsets given to an appended record set."""

    base_offset: int
    last_offset: int
    log_start_offset: int


class Log(MoverSupport):
    """One partition replica (live or future) in one log directory. See module docstring."""

    def __init__(
        self,
        tp: TopicPartition,
        dir_path: str,
        logdir_path: str,
        *,
        settings: StorageSettings,
        clock: Clock,
        failures: LogDirFailureChannel,
        is_future: bool = False,
    ) -> None:
        self.tp = tp
        self.dir_path = dir_path
        self.logdir_path = logdir_path
        self.is_future = is_future
        self.lock = threading.RLock()
        self._settings = settings
        self._clock = clock
        self._failures = failures
        self._segments: list[Segment] = []
        self._log_start_offset = 0
        self._high_watermark = 0
        self.recovery_point = 0
        self.compact_only = False
        """Set by the broker from the topic's ``cleanup.policy``: a compact-only log is cleaned
        (``cleaner``), never trimmed by time or size retention, as in Kafka."""
        self.generation = 0
        """Bumped by truncation and by the swap; the mover restarts a copy when it changes."""
        self.closed = False
        self.epochs = LeaderEpochCache()
        """Where each leader epoch began; changed under the lock, each change written to disk."""
        self._epochs_written = False
        """Future logs: :meth:`set_offsets_from` has written the epochs at least once."""

    def __repr__(self) -> str:
        return f"Log({self.tp}, {self.dir_path!r}, leo={self.log_end_offset})"

    # --- opening ---------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        tp: TopicPartition,
        dir_path: str,
        logdir_path: str,
        *,
        settings: StorageSettings,
        clock: Clock,
        failures: LogDirFailureChannel,
        is_future: bool = False,
        initial_offset: int = 0,
    ) -> Log:
        """Make the directory and an empty first segment."""
        with failures.guard(logdir_path, f"creating log {dir_path}"):
            os.makedirs(dir_path, exist_ok=False)
            if name_is_cut(tp, os.path.basename(dir_path)) and is_future:
                with open(os.path.join(dir_path, TOPIC_FILE), "w", encoding="utf-8") as f:
                    f.write(tp.topic)
            first = Segment.create(
                dir_path,
                initial_offset,
                index_interval_bytes=settings.log_index_interval_bytes,
                created_ms=clock.wall_ms(),
            )
        return cls.from_segments(
            tp,
            dir_path,
            logdir_path,
            [first],
            settings=settings,
            clock=clock,
            failures=failures,
            is_future=is_future,
            log_start_offset=initial_offset,
            high_watermark=initial_offset,
        )

    @classmethod
    def from_segments(
        cls,
        tp: TopicPartition,
        dir_path: str,
        logdir_path: str,
        segments: list[Segment],
        *,
        settings: StorageSettings,
        clock: Clock,
        failures: LogDirFailureChannel,
        is_future: bool,
        log_start_offset: int | None,
        high_watermark: int | None,
        epochs: LeaderEpochCache | None = None,
    ) -> Log:
        """A replica over ``segments`` (new, or recovered by ``loader.load_log``): offsets and
        leader epochs from the checkpoints, clamped to what the segments hold; the recovery
        point is the end."""
        log = cls(
            tp,
            dir_path,
            logdir_path,
            settings=settings,
            clock=clock,
            failures=failures,
            is_future=is_future,
        )
        log._segments = segments
        leo = log.log_end_offset
        first_base = segments[0].base_offset
        log._log_start_offset = min(max(log_start_offset or first_base, first_base), leo)
        log._high_watermark = min(max(high_watermark or 0, log._log_start_offset), leo)
        if epochs is not None:
            log.epochs = epochs
            epochs.truncate_from_end(leo)
            epochs.truncate_from_start(log._log_start_offset)
        # Clean: everything was flushed at shutdown. Unclean: everything past the old recovery
        # point was just re-validated.
        log.recovery_point = leo
        return log

    # --- offsets ---------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        """Set by replication; clamped to [log start, log end] as Kafka does."""
        with self.lock:
            self._high_watermark = min(max(value, self._log_start_offset), self.log_end_offset)

    @property
    def size(self) -> int:
        """Bytes of all segments (DescribeLogDirs' PartitionSize)."""
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def _guard(self, what: str) -> AbstractContextManager[None]:
        return self._failures.guard(self.logdir_path, f"{what} of {self.tp} in {self.dir_path}")

    def _check_usable(self) -> None:
        if self.closed:
            raise KafkaStorageError(f"log {self.tp} in {self.dir_path} is closed")
        self._failures.check(self.logdir_path)

    # --- appending -------------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
    ) -> AppendResult:
        """Append one or more v2 batches; validate all first so bad input writes nothing.

        With ``assign_offsets`` (leader) offsets continue from the log end by rewriting each
        batch's base offset, and ``leader_epoch`` (if given) is stamped as each batch's
        ``partitionLeaderEpoch``; without it (follower) the batches keep theirs, which must
        start at the log end. Either way a batch of a new epoch starts it in :attr:`epochs`.
        """
        headers = record_batch.validate(records)
        max_batch = self._settings.message_max_bytes
        for h in headers:
            if h.size > max_batch:
                raise KafkaError(
                    f"record batch of {h.size} bytes exceeds message.max.bytes={max_batch}",
                    ErrorCode.MESSAGE_TOO_LARGE,
                )
        if len(records) > self._settings.log_segment_bytes:
            raise KafkaError(
                f"record set of {len(records)} bytes exceeds log.segment.bytes="
                f"{self._settings.log_segment_bytes}",
                ErrorCode.RECORD_LIST_TOO_LARGE,
            )
        with self.lock:
            self._check_usable()
            leo = self.log_end_offset
            data: list[bytes | bytearray | memoryview]
            if assign_offsets:
                data, next_offset = record_batch.offset_parts(records, headers, leo, leader_epoch)
                base = leo
            else:
                data = [records]
                base = headers[0].base_offset
                expected = leo
                for h in headers:
                    if h.base_offset < expected:
                        raise KafkaError(
                            f"follower append to {self.tp} at offset {h.base_offset} is below "
                            f"the log end offset {expected}",
                            ErrorCode.OFFSET_OUT_OF_RANGE,
                        )
                    expected = h.next_offset
                next_offset = expected
            batches = []
            starts: list[tuple[int, int]] = []  # (epoch, first offset) of each batch
            offset = base
            for h in headers:
                if not assign_offsets:
                    offset = h.base_offset
                last = offset + h.last_offset_delta
                batches.append((h.position, h.size, last, h.max_timestamp))
                stamp = h.partition_leader_epoch if leader_epoch is None else leader_epoch
                starts.append((stamp, offset))
                offset = last + 1
            with self._guard("append"):
                segment = self._maybe_roll(len(records), base)
                segment.append(data, batches)
                if self.epochs.start_epochs(starts):
                    self._write_epochs()
            return AppendResult(base, next_offset - 1, self._log_start_offset)

    def _write_epochs(self) -> None:
        """Write :attr:`epochs` to ``leader-epoch-checkpoint`` (caller holds lock and guard)."""
        write_atomically(os.path.join(self.dir_path, LEADER_EPOCH_CHECKPOINT), self.epochs.format())

    def assign_leader_epoch(self, epoch: int) -> None:
        """This replica becomes leader at ``epoch``: the epoch starts at the log end (Kafka's
        ``makeLeader``), so a follower asking for an older epoch learns where it ended."""
        with self.lock:
            self._check_usable()
            with self._guard("leader epoch checkpoint"):
                if self.epochs.start_epochs([(epoch, self.log_end_offset)]):
                    self._write_epochs()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetsForLeaderEpoch answers ``epoch`` from this replica
        (:meth:`LeaderEpochCache.end_offset_for`); (-1, -1) if unknown."""
        with self.lock:
            return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def _new_segment(self, base_offset: int) -> Segment:
        return Segment.create(
            self.dir_path,
            base_offset,
            index_interval_bytes=self._settings.log_index_interval_bytes,
            created_ms=self._clock.wall_ms(),
        )

    def _maybe_roll(self, incoming: int, next_offset: int) -> Segment:
        active = self._segments[-1]
        if active.size == 0:
            return active
        too_big = active.size + incoming > self._settings.log_segment_bytes
        too_old = self._clock.wall_ms() - active.created_ms >= self._settings.log_roll_ms
        offset_overflow = next_offset - active.base_offset > 0x7FFF_FFFF - 1
        if not (too_big or too_old or offset_overflow):
            return active
        return self._roll(next_offset)

    def _roll(self, base_offset: int) -> Segment:
        """Start a new active segment. The rolled one is flushed later, off the append path
        (:meth:`flush_rolled`, from housekeeping), as Kafka schedules that flush instead of
        running it in the append: appends run on the broker's event loop, and an fsync of a
        whole segment's dirty pages (up to ``log.segment.bytes``) there stalled every client
        for as long as the disk took. Until then the recovery point stays below it."""
        new = self._new_segment(base_offset)
        self._segments.append(new)
        return new

    def roll(self) -> None:
        """Start a new segment now (tests, admin); no-op if the active one is empty."""
        with self.lock:
            self._check_usable()
            if self._segments[-1].size:
                with self._guard("roll"):
                    self._roll(self.log_end_offset)

    def flush(self) -> None:
        """fsync what is not yet durable and move the recovery point to the log end.

        The bulk of the data is synced first without the partition lock, through duplicated
        descriptors (safe if a segment is deleted meanwhile): a long fsync under the lock would
        stall every read and append of the partition, and the protocol layer reads on its
        event loop. What the second, locked pass still has to write back is little.
        """
        self._flush(active=True)

    def flush_rolled(self) -> bool:
        """Flush the segments rolled since the last flush, not the active one, and move the
        recovery point to the active segment's base (housekeeping calls this for every log,
        see :meth:`_roll`); False if there was nothing to flush."""
        if self.closed or self.recovery_point >= self._segments[-1].base_offset:
            return False  # read without the lock: a hint, rechecked under it
        self._flush(active=False)
        return True

    def _unflushed(self, *, active: bool) -> list[Segment]:
        last = self._segments[-1]
        if not active:
            return [s for s in self._segments[:-1] if s.next_offset > self.recovery_point]
        return [s for s in self._segments if s.next_offset > self.recovery_point or s is last]

    def _flush(self, *, active: bool) -> None:
        with self.lock:
            self._check_usable()
            with self._guard("flush"):
                segments = self._unflushed(active=active)
                fds = [seg.dup_fd() for seg in segments]
        for seg in segments:
            seg.pack_indexes()  # the bulk of the Python work, also without the lock
        try:
            with self._guard("flush"):
                for fd in fds:
                    os.fsync(fd)
        finally:
            for fd in fds:
                os.close(fd)
        with self.lock:
            self._check_usable()
            with self._guard("flush"):
                for seg in self._unflushed(active=active):
                    seg.flush()
            if active:
                self.recovery_point = self.log_end_offset
            else:
                self.recovery_point = max(self.recovery_point, self._segments[-1].base_offset)

    # --- reading ---------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        file_range_min_bytes: int | None = None,
    ) -> ReadSlice:
        """Whole batches from the one holding ``offset``: up to ``max_bytes`` but at least one
        batch, none starting at or beyond ``max_offset`` (pass the high watermark for consumers).

        With ``file_range_min_bytes``, batches adding up to at least that many bytes are not
        copied: the slice carries a :class:`FileRange` the caller must close. Smaller ones are
        copied (a copy is cheaper than a descriptor and a ``sendfile`` there).

        OFFSET_OUT_OF_RANGE below the log start or beyond the log end; at the log end an empty
        slice.
        """
        with self.lock:
            self._check_usable()
            leo = self.log_end_offset
            if offset < self._log_start_offset or offset > leo:
                raise KafkaError(
                    f"offset {offset} of {self.tp} is out of range "
                    f"[{self._log_start_offset}, {leo}]",
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                )
            empty = ReadSlice(b"", None, self._log_start_offset, leo, self._high_watermark)
            if offset == leo or max_bytes <= 0:
                return empty
            with self._guard("read"):
                for seg in self._segments_from(offset):
                    start, base = seg.find_position(offset)
                    if start is None:
                        continue
                    if max_offset is not None and base >= max_offset:
                        return empty
                    data = b""
                    file = None
                    if file_range_min_bytes is None:
                        data = seg.read_batches(start, max_bytes, max_offset)
                    else:
                        length = seg.batch_span(start, max_bytes, max_offset)
                        if length >= file_range_min_bytes:
                            file = FileRange(seg.dup_fd(), start, length)
                        else:
                            data = seg.pread(start, length)
                    return ReadSlice(data, file, self._log_start_offset, leo, self._high_watermark)
            return empty

    def _segments_from(self, offset: int) -> list[Segment]:
        idx = 0
        for i, seg in enumerate(self._segments):
            if seg.base_offset <= offset:
                idx = i
        return self._segments[idx:]

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start whose timestamp is
        ≥ ``timestamp_ms`` (Kafka's ListOffsets by timestamp), via each segment's time index;
        None if there is none."""
        with self.lock:
            self._check_usable()
            with self._guard("timestamp lookup"):
                for seg in self._segments:
                    found = seg.find_timestamp(timestamp_ms, self._log_start_offset)
                    if found is not None:
                        return found
        return None

    def max_timestamp_batch(self) -> tuple[int, int] | None:
        """(largest record timestamp, last offset of the batch holding it), from the segments'
        time indexes (ListOffsets MAX_TIMESTAMP); None for a log without timestamps."""
        with self.lock:
            self._check_usable()
            best: tuple[int, int] | None = None
            with self._guard("timestamp lookup"):
                for seg in self._segments:
                    ts = seg.max_timestamp
                    if ts >= 0 and (best is None or ts > best[0]):
                        best = (ts, seg.state().max_timestamp_offset)
            return best

    # --- truncation and retention ----------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset is ≥ ``offset`` (follower divergence); with
        nothing to cut, still drop epochs starting at the log end (Kafka's ``truncateTo``):
        one led here without an append, which the next leader never had."""
        with self.lock:
            self._check_usable()
            if offset >= self.log_end_offset:
                if self.epochs.truncate_from_end(self.log_end_offset):
                    with self._guard("leader epoch checkpoint"):
                        self._write_epochs()
                return
            with self._guard("truncate"):
                while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                    self._segments.pop().delete()
                seg = self._segments[-1]
                if seg.base_offset >= offset:
                    seg.truncate_to_offset(seg.base_offset)
                else:
                    seg.truncate_to_offset(offset)
                leo = self.log_end_offset
                if self.epochs.truncate_from_end(leo):
                    self._write_epochs()
            self._log_start_offset = min(self._log_start_offset, leo)
            self._high_watermark = min(self._high_watermark, leo)
            self.recovery_point = min(self.recovery_point, leo)
            self.generation += 1

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Follower whose log end is below the leader's log start (retention or DeleteRecords
        there while it was away): drop everything and start empty at ``offset`` (Kafka's
        ``truncateFullyAndStartAt``), epochs included -- the next fetch brings them again."""
        with self.lock:
            self._check_usable()
            with self._guard("truncate fully"):
                old = self._segments
                for seg in [s for s in old if s.base_offset == offset]:
                    seg.delete()  # the fresh segment reuses its file name
                # One assignment: lock-free readers never see an empty segment list.
                self._segments = [self._new_segment(offset)]
                for seg in old:
                    if seg.base_offset != offset:
                        seg.delete()
                self.epochs = LeaderEpochCache()
                self._write_epochs()
            self._log_start_offset = offset
            self._high_watermark = offset
            self.recovery_point = offset
            self.generation += 1

    def advance_log_start_offset(self, offset: int) -> None:
        """DeleteRecords: raise the log start offset (never beyond the high watermark)."""
        with self.lock:
            self._check_usable()
            if offset > self._high_watermark:
                raise KafkaError(
                    f"cannot move the log start offset of {self.tp} to {offset}, beyond the "
                    f"high watermark {self._high_watermark}",
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                )
            self._log_start_offset = max(self._log_start_offset, offset)
            self.delete_segments(lambda seg, nxt: nxt.base_offset <= offset)
            with self._guard("leader epoch checkpoint"):
                if self.epochs.truncate_from_start(self._log_start_offset):
                    self._write_epochs()

    def apply_retention(self) -> int:
        """Delete old segments by ``log.retention.ms`` and ``log.retention.bytes``
        (:func:`.retention.apply_retention`); returns the number deleted."""
        return apply_retention(self, self._settings, self._clock.wall_ms())

    def delete_segments(self, predicate: Callable[[Segment, Segment], bool]) -> int:
        """Delete leading segments while ``predicate(seg, next)`` holds and the whole segment
        is below the high watermark; the active segment is never deleted."""
        count = 0
        with self.lock, self._guard("delete segments"):
            self._check_usable()
            while len(self._segments) > 1:
                seg, nxt = self._segments[0], self._segments[1]
                if seg.next_offset > self._high_watermark or not predicate(seg, nxt):
                    break
                self._segments.pop(0)
                seg.delete()
                count += 1
                self._log_start_offset = max(self._log_start_offset, nxt.base_offset)
            if count and self.epochs.truncate_from_start(self._log_start_offset):
                self._write_epochs()
        return count

    def rename_dir(self, new_dir: str) -> None:
        """The directory was renamed (caller did it under the failure guard)."""
        self.dir_path = new_dir
        for seg in self._segments:
            seg.rename_dir(new_dir)

    def close(self) -> None:
        """Close the segments' files; once only (a future adopted by its live log shares its
        segments with it, see ``adopt``)."""
        with self.lock:
            if self.closed:
                return
            for seg in self._segments:
                seg.close()
            self.closed = True
