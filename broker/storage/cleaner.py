"""Log compaction (``cleanup.policy=compact``): keep the latest record per key.

Kafka's ``LogCleaner`` in a smaller shape. One pass over a partition:

1. Pick the cleanable segments: every segment before the active one (never the active
   segment), entirely below the high watermark, stopping at the first whose newest record is
   younger than ``min.compaction.lag.ms``. Clean only if the dirty part (bytes appended since
   the last pass) is at least ``min.cleanable.dirty.ratio`` of them, or when the oldest
   tombstone kept by the last pass has outlived ``delete.retention.ms`` (as Kafka does since
   KIP-534, so deletes disappear even from a topic nobody writes to any more).
2. Build the offset map: key → offset of its latest record in those segments.
3. For each segment holding something to drop, write a cleaned copy next to it
   (``<base>.log.cleaned``): a record survives if it is the latest for its key; a tombstone
   (null value) survives until its batch is older than ``delete.retention.ms`` (Kafka's
   pre-KIP-534 rule: measured from the record timestamps, so consumers that were reading get
   that long to see the delete). Batches keep their offsets, producer ids, sequences and
   compression; a batch whose records all survive is copied byte for byte, one that loses some
   is rebuilt (kafka-python's record codec; its last offset delta is kept so the batch spans the
   same offsets), one that loses all is dropped. Control batches are kept.
4. Swap it in under the partition lock, crash-safe without any new recovery code: fsync the
   cleaned file; remove the segment's ``.index``/``.timeindex`` (a segment without an index is
   rebuilt from its batches when loaded); ``rename`` the cleaned file over ``<base>.log``
   (atomic: a crash leaves either the old or the new segment, both valid, and the loader deletes
   a left-over ``.cleaned``); fsync the directory; load the new segment (writes its indexes).

Offsets never change, so readers, followers and consumer positions are unaffected (compacted
logs have gaps). Every disk operation runs in the partition directory's failure guard: an
``OSError`` takes the directory offline like any other. ``hook(step, tp)`` is called between
the steps (crash-point tests). Runs on a storage thread; takes the partition lock only to
snapshot and to swap, so appends and reads go on meanwhile.
"""

from __future__ import annotations

import logging
import os
import struct
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import crc32c
from spindle.broker.common.clock import Clock
from spindle.broker.common.ids import TopicPartition
from spindle.broker.storage.log import Log
from spindle.broker.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    Segment,
    segment_name,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
_CONTROL = 0x20
_TRANSACTIONAL = 0x10
_LOG_APPEND_TIME = 0x08
_COMPRESSION = 0x07

StepHook = Callable[[str, TopicPartition], None]


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """A topic's compaction settings (Kafka's topic config names and defaults)."""

    delete_retention_ms: int = 86_400_000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0


@dataclass(frozen=True, slots=True)
class CleanResult:
    segments_rewritten: int
    records_removed: int
    bytes_before: int
    bytes_after: int


class LogCleaner:
    """Compacts partition logs (see module docstring). One pass at a time per instance."""

    def __init__(self, *, clock: Clock, hook: StepHook | None = None) -> None:
        self._clock = clock
        self._hook = hook
        self._clean_upto: dict[int, tuple[str, int]] = {}
        """id(Log) → (its directory, first offset not yet cleaned)."""
        self._tombstones_due: dict[int, int] = {}
        """id(Log) → wall time at which its oldest kept tombstone may go (KIP-534: a log is
        cleaned then even if nothing new was written)."""

    def _step(self, name: str, tp: TopicPartition) -> None:
        if self._hook is not None:
            self._hook(name, tp)

    def dirty_ratio(self, lg: Log, segments: list[Segment]) -> float:
        total = sum(s.size for s in segments)
        if total == 0:
            return 0.0
        dir_path, upto = self._clean_upto.get(id(lg), ("", 0))
        if dir_path != lg.dir_path:
            upto = 0
        dirty = sum(s.size for s in segments if s.next_offset > upto)
        return dirty / total

    def _cleanable(self, lg: Log, config: CompactionConfig) -> tuple[int, list[Segment]]:
        """(generation, cleanable segments) under the partition lock."""
        with lg.lock:
            lg._check_usable()
            now = self._clock.wall_ms()
            out: list[Segment] = []
            for seg in lg._segments[:-1]:
                if seg.next_offset > lg.high_watermark:
                    break
                with lg._guard("cleaner scan"):
                    newest = seg.max_timestamp
                if newest > now - config.min_compaction_lag_ms:
                    break
                out.append(seg)
            return lg.generation, out

    def clean(
        self, lg: Log, config: CompactionConfig, *, force: bool = False
    ) -> CleanResult | None:
        """One compaction pass over ``lg``; None when nothing was due (dirty ratio too low)."""
        generation, segments = self._cleanable(lg, config)
        now = self._clock.wall_ms()
        due = self._tombstones_due.get(id(lg))
        if not segments or (
            not force
            and (due is None or now < due)
            and self.dirty_ratio(lg, segments) < config.min_cleanable_dirty_ratio
        ):
            return None
        latest = self._offset_map(lg, segments)
        horizon = now - config.delete_retention_ms
        rewritten = removed = before = after = 0
        oldest_tombstone: int | None = None
        for seg in segments:
            kept, dropped, tombstone_ts = self._filter(lg, seg, latest, horizon)
            if tombstone_ts is not None:
                oldest_tombstone = min(tombstone_ts, oldest_tombstone or tombstone_ts)
            if dropped == 0:
                continue
            size = seg.size
            swapped = self._swap(lg, seg, generation, kept)
            if swapped is None:
                log.info("cleaning %s stopped: the log changed under it", lg.tp)
                break
            generation = swapped
            rewritten += 1
            removed += dropped
            before += size
            after += len(kept)
        self._clean_upto[id(lg)] = (lg.dir_path, segments[-1].next_offset)
        if oldest_tombstone is None:
            self._tombstones_due.pop(id(lg), None)
        else:
            self._tombstones_due[id(lg)] = oldest_tombstone + config.delete_retention_ms + 1
        if rewritten:
            log.info(
                "compacted %s: %d segments, %d records removed, %d -> %d bytes",
                lg.tp,
                rewritten,
                removed,
                before,
                after,
            )
        return CleanResult(rewritten, removed, before, after)

    # --- reading ----------------------------------------------------------------------------

    def _batches(self, lg: Log, seg: Segment) -> Iterator[tuple[bytes, DefaultRecordBatch]]:
        """Every batch of a (non-active, so immutable) segment, read through a private fd."""
        with lg.lock, lg._guard("cleaner read"):
            fd = seg.dup_fd()
            size = seg.size
        try:
            with lg._guard("cleaner read"):
                data = os.pread(fd, size, 0)
        finally:
            os.close(fd)
        pos = 0
        while pos + 12 <= len(data):
            length = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
            raw = data[pos : pos + length]
            pos += length
            yield raw, DefaultRecordBatch(raw)

    def _offset_map(self, lg: Log, segments: list[Segment]) -> dict[bytes, int]:
        latest: dict[bytes, int] = {}
        for seg in segments:
            for _, batch in self._batches(lg, seg):
                if batch.is_control_batch:
                    continue
                for record in batch:
                    if record.key is not None:
                        latest[bytes(record.key)] = record.offset
        return latest

    def _filter(
        self, lg: Log, seg: Segment, latest: dict[bytes, int], horizon: int
    ) -> tuple[bytes, int, int | None]:
        """(cleaned segment bytes, records dropped, timestamp of the oldest kept tombstone)."""
        out = bytearray()
        dropped = 0
        tombstone_ts: int | None = None
        for raw, batch in self._batches(lg, seg):
            if batch.is_control_batch:
                out += raw
                continue
            records = list(batch)
            old = batch.max_timestamp < horizon
            keep = [
                r
                for r in records
                if r.key is None
                or (latest.get(bytes(r.key)) == r.offset and not (r.value is None and old))
            ]
            dropped += len(records) - len(keep)
            if any(r.value is None for r in keep):
                tombstone_ts = min(batch.max_timestamp, tombstone_ts or batch.max_timestamp)
            if len(keep) == len(records):
                out += raw
            elif keep:
                out += _rebuild(raw, batch, keep)
        return bytes(out), dropped, tombstone_ts

    # --- swapping ---------------------------------------------------------------------------

    def _swap(self, lg: Log, seg: Segment, generation: int, data: bytes) -> int | None:
        """Replace ``seg`` by ``data``; the log's new generation, or None if the log changed
        since ``generation`` (truncated, moved, closed) and nothing was replaced."""
        base = seg.base_offset
        cleaned = os.path.join(lg.dir_path, segment_name(base) + LOG_SUFFIX + CLEANED_SUFFIX)
        with lg._guard("writing a cleaned segment"):
            fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        self._step("clean-written", lg.tp)
        with lg.lock:
            if lg.generation != generation or seg not in lg._segments or lg.closed:
                with lg._guard("dropping a cleaned segment"):
                    os.unlink(cleaned)
                return None
            with lg._guard("swapping a cleaned segment"):
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    path = os.path.join(lg.dir_path, segment_name(base) + suffix)
                    if os.path.exists(path):
                        os.unlink(path)
                self._step("clean-index-removed", lg.tp)
                os.replace(cleaned, seg.log_path)
                self._step("clean-swapped", lg.tp)
                dir_fd = os.open(lg.dir_path, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
                new, _ = Segment.load(
                    lg.dir_path,
                    base,
                    index_interval_bytes=seg.index_interval_bytes,
                    recover=False,
                    now_ms=self._clock.wall_ms(),
                )
                new.flush()
                i = lg._segments.index(seg)
                segments = list(lg._segments)
                segments[i] = new
                lg._segments = segments  # one assignment: lock-free readers see old or new
                seg.close()
                lg.generation += 1
            return lg.generation


def _rebuild(raw: bytes, batch: DefaultRecordBatch, keep: list[object]) -> bytes:
    """A batch with only ``keep`` records, at the same offsets (see module docstring)."""
    attributes = int.from_bytes(raw[21:23], "big")
    compression = attributes & _COMPRESSION
    out = b""
    for codec in (compression, 0):
        builder = DefaultRecordBatchBuilder(
            2,
            codec,
            bool(attributes & _TRANSACTIONAL),
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            1 << 62,
        )
        for r in keep:
            rec: Any = r
            builder.append(
                rec.offset - batch.base_offset,
                rec.timestamp,
                None if rec.key is None else bytes(rec.key),
                None if rec.value is None else bytes(rec.value),
                list(rec.headers),
            )
        try:
            out = bytes(builder.build())
            break
        except Exception:  # no codec for it here: store the survivors uncompressed
            if codec == 0:
                raise
    buf = bytearray(out)
    struct.pack_into(">q", buf, 0, batch.base_offset)
    buf[12:16] = raw[12:16]  # partition leader epoch
    new_attrs = int.from_bytes(buf[21:23], "big") | (attributes & _LOG_APPEND_TIME)
    struct.pack_into(">h", buf, 21, new_attrs)
    buf[23:27] = raw[23:27]  # last offset delta: the batch still spans the same offsets
    if attributes & _LOG_APPEND_TIME:
        buf[35:43] = raw[35:43]  # max timestamp = the append time
    struct.pack_into(">I", buf, 17, crc32c.crc32c(memoryview(buf)[21:]))
    return bytes(buf)
