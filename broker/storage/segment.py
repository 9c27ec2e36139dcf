"""One log segment: ``<base>.log`` (record batches as stored), ``<base>.index`` and
``<base>.timeindex``.

File names are the segment's base offset, 20 digits zero-padded, as in Kafka
(``LogFileUtils.java``). The offset index is Kafka's format: 8-byte entries, each a 4-byte
offset relative to the base offset (the *last* offset of a batch) and the 4-byte file position
of that batch, one entry every ``log.index.interval.bytes``. Lookup finds the greatest entry at or
below the wanted offset and scans batch headers forward from its position. The time index is
Kafka's too: 12-byte entries of the largest timestamp so far (8 bytes) and the relative offset
of the batch holding it, added at the same points when the largest timestamp grew; retention by
time reads only it, ListOffsets by timestamp it and one batch.

The indexes live in memory and are written whole when the segment is flushed (roll,
checkpoint, shutdown). After a clean shutdown they are loaded; after an unclean one, segments
past the recovery point are re-validated and their indexes rebuilt.

Write descriptors are opened per write and closed at once: a file open for writing pins its
mount as busy, which would stop anyone remounting a failing disk read-only. Reads use a kept one.

Not thread-safe: the owning :class:`Log` serializes access. Raises ``OSError`` only; the Log
runs every call inside the failure guard.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from spindle.broker.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    first_record_at_or_after,
    read_prefix,
    valid_prefix,
)
from spindle.broker.storage.file_io import copy_fallback, write_all, write_file, writev_all
from spindle.broker.storage.packed_index import PackedIndex, adopt_entries
from spindle.broker.storage.writeback import start_writeback

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_SCAN_CHUNK = 8 << 20
_LAST_DELTA = struct.Struct(">i")
_MAX_TS = struct.Struct(">q")
WRITEBACK_WHILE_COPYING = True
"""The mover starts each copied chunk's write-back at once (see ``writeback``)."""


class SourceShrunk(Exception):
    """The file being copied is shorter than its snapshot said: it was truncated meanwhile
    (not a disk failure; the mover starts the copy again)."""


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """Where one stored batch is and which offsets it holds."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class SegmentState:
    """A consistent snapshot of a segment (for the mover, which copies without the lock).

    The indexes are not copied: ``index`` and ``time_index`` are the segment's own lists,
    which only ever grow while they are the segment's (a rebuild or load replaces them with
    new lists), so their first ``index_len`` and ``time_index_len`` entries stay this
    snapshot's. A snapshot is taken under the partition lock, which appends wait for, once
    per copy round; copying a 1 GiB segment's ~260K entries there cost milliseconds each
    time, and so did copying them again into the future (:meth:`Segment.adopt_copied` now
    takes only the entries it lacks)."""

    base_offset: int
    size: int
    next_offset: int
    index: list[tuple[int, int]]
    index_len: int
    log_path: str
    time_index: list[tuple[int, int]]
    time_index_len: int
    max_timestamp: int | None = None
    max_timestamp_offset: int = -1


class Segment:
    """One ``.log``/``.index`` pair of a partition log (see module docstring)."""

    def __init__(
        self, dir_path: str, base_offset: int, *, index_interval_bytes: int, created_ms: int
    ) -> None:
        self.dir_path = dir_path
        self.base_offset = base_offset
        self.log_path = os.path.join(dir_path, segment_name(base_offset) + LOG_SUFFIX)
        self.index_path = os.path.join(dir_path, segment_name(base_offset) + INDEX_SUFFIX)
        self.time_index_path = os.path.join(dir_path, segment_name(base_offset) + TIME_INDEX_SUFFIX)
        self.size = 0
        self.next_offset = base_offset
        self.created_ms = created_ms
        self.index_interval_bytes = index_interval_bytes
        self._index: list[tuple[int, int]] = []
        self._bytes_since_index = 0
        self._max_timestamp: int | None = -1
        """Largest record timestamp so far; None = unknown until a scan (time index lost)."""
        self._max_timestamp_offset = -1
        self._time_index: list[tuple[int, int]] = []
        self._packed_index = PackedIndex(lambda e: _ENTRY.pack(e[0] - base_offset, e[1]))
        self._packed_times = PackedIndex(lambda e: _TIME_ENTRY.pack(e[0], e[1] - base_offset))
        self._read_fd: int | None = None
        self._index_dirty = False
        self._index_source: list[tuple[int, int]] | None = None
        self._times_source: list[tuple[int, int]] | None = None
        """The source lists :meth:`adopt_copied` last took the two indexes from (mover)."""

    def __repr__(self) -> str:
        return f"Segment({self.log_path!r}, size={self.size}, next={self.next_offset})"

    # --- life cycle ------------------------------------------------------------------------

    @classmethod
    def create(
        cls, dir_path: str, base_offset: int, *, index_interval_bytes: int, created_ms: int
    ) -> Segment:
        seg = cls(
            dir_path, base_offset, index_interval_bytes=index_interval_bytes, created_ms=created_ms
        )
        fd = os.open(seg.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.close(fd)
        seg._index_dirty = True
        return seg

    @classmethod
    def load(
        cls,
        dir_path: str,
        base_offset: int,
        *,
        index_interval_bytes: int,
        recover: bool,
        now_ms: int,
    ) -> tuple[Segment, int]:
        """Open an existing segment; with ``recover`` re-validate every batch (CRC included)
        and cut a torn or corrupt tail. Returns the segment and the bytes truncated."""
        seg = cls(
            dir_path, base_offset, index_interval_bytes=index_interval_bytes, created_ms=now_ms
        )
        file_size = os.stat(seg.log_path).st_size
        seg.size = file_size
        truncated = 0
        if recover or not seg._load_index(file_size):
            truncated = seg._revalidate(check_crc=recover)
        else:
            start = seg._index[-1][1] if seg._index else 0
            end, batches = seg.scan(start, check_crc=False)
            if end != file_size:
                # The trusted part does not end on a batch boundary: re-validate all of it.
                truncated = seg._revalidate(check_crc=True)
            else:
                if batches:
                    seg.next_offset = batches[-1].last_offset + 1
                seg._load_time_index(batches)
        first = seg.read_first_batch()
        if first is not None:
            seg.created_ms = first.max_timestamp
        return seg, truncated

    def _revalidate(self, *, check_crc: bool) -> int:
        """Rebuild offsets and indexes from every batch, cut whatever follows the last valid
        one and make the result durable; returns the bytes cut."""
        valid_end = self._rebuild(0, check_crc=check_crc)
        truncated = self.size - valid_end
        if truncated > 0:
            os.truncate(self.log_path, valid_end)
            self.size = valid_end
        self._index_dirty = True
        self.flush()
        return max(truncated, 0)

    def _load_index(self, file_size: int) -> bool:
        """Load ``.index``; False if missing or inconsistent (the caller rebuilds it)."""
        try:
            with open(self.index_path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return file_size == 0
        if len(raw) % _ENTRY.size:
            return False
        entries: list[tuple[int, int]] = []
        last_offset, last_pos = -1, -1
        for rel, pos in _ENTRY.iter_unpack(raw):
            offset = self.base_offset + rel
            if offset <= last_offset or pos <= last_pos or pos >= file_size:
                return False
            entries.append((offset, pos))
            last_offset, last_pos = offset, pos
        self._index = entries
        self._index_source = None
        self._packed_index.reset()
        self.next_offset = (entries[-1][0] + 1) if entries else self.base_offset
        return True

    def _load_time_index(self, tail: list[BatchInfo]) -> None:
        """Load ``.timeindex`` (Kafka's format: 12-byte entries of the largest timestamp so far
        and its offset, relative to the base) and finish the maximum with the ``tail`` batches
        after the last offset-index entry. Missing or inconsistent → unknown (rebuilt by a scan
        when first needed)."""
        self._max_timestamp = None
        try:
            with open(self.time_index_path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            if self.size:
                return
            raw = b""
        if len(raw) % _TIME_ENTRY.size:
            return
        entries: list[tuple[int, int]] = []
        for ts, rel in _TIME_ENTRY.iter_unpack(raw):
            offset = self.base_offset + rel
            if (
                entries and ts <= entries[-1][0]
            ) or not self.base_offset <= offset < self.next_offset:
                return
            entries.append((ts, offset))
        self._time_index = entries
        self._times_source = None
        self._packed_times.reset()
        self._max_timestamp, self._max_timestamp_offset = entries[-1] if entries else (-1, -1)
        for b in tail:
            if b.max_timestamp > self._max_timestamp:
                self._max_timestamp, self._max_timestamp_offset = b.max_timestamp, b.last_offset

    def _ensure_times(self) -> int:
        """The largest timestamp, rebuilding the time index by a scan if it was lost."""
        if self._max_timestamp is None:
            _, batches = self.scan(0, check_crc=False)
            self._max_timestamp, self._max_timestamp_offset = -1, -1
            self._time_index = []
            self._times_source = None
            self._packed_times.reset()
            since = self.index_interval_bytes
            for b in batches:
                if b.max_timestamp > self._max_timestamp:
                    self._max_timestamp, self._max_timestamp_offset = b.max_timestamp, b.last_offset
                if since >= self.index_interval_bytes:
                    self._maybe_time_entry()
                    since = 0
                since += b.size
            self._maybe_time_entry()
            self._index_dirty = True
        return self._max_timestamp

    def _maybe_time_entry(self) -> None:
        """Kafka's ``TimeIndex.maybeAppend``: only a larger timestamp gets a new entry."""
        assert self._max_timestamp is not None
        if self._max_timestamp >= 0 and (
            not self._time_index or self._max_timestamp > self._time_index[-1][0]
        ):
            self._time_index.append((self._max_timestamp, self._max_timestamp_offset))
            self._index_dirty = True

    def _rebuild(self, start: int, *, check_crc: bool) -> int:
        """Rebuild index, next offset and max timestamp from the batches; returns valid end."""
        end, batches = self.scan(start, check_crc=check_crc)
        # New lists, never cleared in place: snapshots (SegmentState) share the old ones.
        self._index = []
        self._time_index = []
        self._index_source = self._times_source = None
        self._packed_index.reset()
        self._packed_times.reset()
        self._bytes_since_index = 0
        self._max_timestamp = -1
        self._max_timestamp_offset = -1
        self.next_offset = self.base_offset
        for b in batches:
            self._note_batch(b.position, b.size, b.last_offset, b.max_timestamp)
        return end

    def close(self) -> None:
        if self._read_fd is not None:
            fd, self._read_fd = self._read_fd, None
            with contextlib.suppress(OSError):
                os.close(fd)

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.index_path, self.time_index_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def rename_dir(self, new_dir: str) -> None:
        """Follow a rename of the partition directory (descriptors stay valid)."""
        self.dir_path = new_dir
        self.log_path = os.path.join(new_dir, os.path.basename(self.log_path))
        self.index_path = os.path.join(new_dir, os.path.basename(self.index_path))
        self.time_index_path = os.path.join(new_dir, os.path.basename(self.time_index_path))

    # --- writing ---------------------------------------------------------------------------

    def _note_batch(self, position: int, size: int, last_offset: int, max_ts: int) -> None:
        if self._max_timestamp is None:
            self._ensure_times()
        assert self._max_timestamp is not None
        if max_ts > self._max_timestamp:
            self._max_timestamp, self._max_timestamp_offset = max_ts, last_offset
        if not self._index or self._bytes_since_index >= self.index_interval_bytes:
            self._index.append((last_offset, position))
            self._bytes_since_index = 0
            self._index_dirty = True
            self._maybe_time_entry()
        self._bytes_since_index += size
        self.next_offset = last_offset + 1

    def append(
        self,
        data: bytes | bytearray | Sequence[bytes | bytearray | memoryview],
        batches: list[tuple[int, int, int, int]],
    ) -> None:
        """Append whole batches; ``batches`` = (position in data, size, last offset, max ts).
        ``data`` is the bytes, or pieces written in order as one (``batch.offset_parts``)."""
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND)
        try:
            if isinstance(data, bytes | bytearray):
                write_all(fd, data)
                length = len(data)
            else:
                writev_all(fd, data)
                length = sum(len(p) for p in data)
        finally:
            os.close(fd)
        start = self.size
        self.size += length
        for pos, size, last, ts in batches:
            self._note_batch(start + pos, size, last, ts)

    def copy_from(self, src_fd: int, src_pos: int, length: int) -> None:
        """Copy bytes [src_pos, src_pos + length) of the source segment to the same position
        here, with zero-copy calls (mover). Same position, not "the end": a copy that stopped
        part-way can never leave bytes twice.

        Does not update offsets or the index: :meth:`adopt_copied` does, once whole batches
        have arrived.
        """
        fd = os.open(self.log_path, os.O_WRONLY)
        try:
            dst_pos = src_pos
            remaining = length
            while remaining > 0:
                try:
                    n = os.copy_file_range(src_fd, fd, remaining, src_pos, dst_pos)
                except OSError as exc:
                    if exc.errno not in (18, 38, 95, 22):  # EXDEV, ENOSYS, EOPNOTSUPP, EINVAL
                        raise
                    n = copy_fallback(src_fd, fd, src_pos, dst_pos, remaining)
                if n == 0:
                    raise SourceShrunk(
                        f"source ended {remaining} bytes early copying into {self.log_path}"
                    )
                src_pos += n
                dst_pos += n
                remaining -= n
            if WRITEBACK_WHILE_COPYING:
                start_writeback(fd, dst_pos - length, length)
        finally:
            os.close(fd)

    def adopt_copied(self, state: SegmentState) -> None:
        """After copying up to ``state.size``, take the source's offsets and index entries
        (cutting anything a stopped copy left beyond that size). The packed index bytes stay
        where they are still a prefix: the mover adopts ever longer snapshots of one source
        segment (a new generation starts a new future segment); where not (a flush here added
        a final time-index entry the source lacks), :class:`PackedIndex` repacks."""
        if os.stat(self.log_path).st_size > state.size:
            os.truncate(self.log_path, state.size)
        self.size = state.size
        self.next_offset = state.next_offset
        self._index, self._index_source = adopt_entries(
            self._index, self._index_source, state.index, state.index_len
        )
        self._time_index, self._times_source = adopt_entries(
            self._time_index, self._times_source, state.time_index, state.time_index_len
        )
        self._max_timestamp = state.max_timestamp
        self._max_timestamp_offset = state.max_timestamp_offset
        self._index_dirty = True

    def truncate_to_offset(self, offset: int) -> int:
        """Drop batches whose last offset is ≥ ``offset``; returns the new next offset."""
        position, _ = self.find_position(offset)
        if position is None or position >= self.size:
            return self.next_offset
        os.truncate(self.log_path, position)
        self.size = position
        self._rebuild(0, check_crc=False)
        self._index_dirty = True
        return self.next_offset

    def pack_indexes(self) -> None:
        """Pack the index entries added since the last flush, so that :meth:`flush` finds
        little left to pack. Safe without the partition lock (``Log`` calls it before taking
        the lock for a flush): the lists only grow or are replaced whole, and each packer has
        its own lock; packing a rolled 1 GiB segment's ~260K entries under the partition lock
        stalled its appends (on the event loop) for ~0.1 s."""
        self._packed_index.pack(self._index)
        self._packed_times.pack(self._time_index)

    def flush(self) -> None:
        """Make the data and both indexes durable (the time index gets a final entry for the
        largest timestamp, as Kafka writes one when a segment is rolled)."""
        if self._max_timestamp is not None:
            self._maybe_time_entry()
        if self._index_dirty:
            write_file(self.index_path, self._packed_index.raw(self._index))
            if self._max_timestamp is not None:
                write_file(self.time_index_path, self._packed_times.raw(self._time_index))
            self._index_dirty = False
        os.fsync(self._fd())

    # --- reading ---------------------------------------------------------------------------

    def _fd(self) -> int:
        if self._read_fd is None:
            self._read_fd = os.open(self.log_path, os.O_RDONLY)
        return self._read_fd

    def pread(self, position: int, length: int) -> bytes:
        return os.pread(self._fd(), length, position)

    def scan(self, start: int, *, check_crc: bool) -> tuple[int, list[BatchInfo]]:
        """Whole valid batches from ``start``: (end of the last valid one, their infos)."""
        fd = self._fd()
        end = os.fstat(fd).st_size
        pos = start
        out: list[BatchInfo] = []
        while pos < end:
            buf = os.pread(fd, min(_SCAN_CHUNK, end - pos), pos)
            n, headers = valid_prefix(buf, check_crc=check_crc)
            if n == 0 and len(buf) >= LOG_OVERHEAD:
                _, size = read_prefix(buf)
                if len(buf) < size <= end - pos:
                    buf = os.pread(fd, size, pos)
                    n, headers = valid_prefix(buf, check_crc=check_crc)
            if n == 0:
                break
            out += [
                BatchInfo(pos + h.position, h.size, h.base_offset, h.last_offset, h.max_timestamp)
                for h in headers
            ]
            pos += n
        return pos, out

    def read_first_batch(self) -> BatchInfo | None:
        if self.size < HEADER_SIZE:
            return None
        _, batches = self._headers_from(0, limit=1)
        return batches[0] if batches else None

    def _headers_from(self, position: int, *, limit: int) -> tuple[int, list[BatchInfo]]:
        """Up to ``limit`` batch infos from ``position`` reading only their headers."""
        out: list[BatchInfo] = []
        while position < self.size and len(out) < limit:
            head = self.pread(position, HEADER_SIZE)
            if len(head) < HEADER_SIZE:
                break
            base, size = read_prefix(head)
            (delta,) = _LAST_DELTA.unpack_from(head, 23)
            (max_ts,) = _MAX_TS.unpack_from(head, 35)
            out.append(BatchInfo(position, size, base, base + delta, max_ts))
            position += size
        return position, out

    @property
    def max_timestamp(self) -> int:
        """Largest record timestamp in the segment (-1 if empty)."""
        return self._ensure_times()

    def find_timestamp(self, timestamp_ms: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record from ``start_offset`` on whose timestamp is
        ≥ ``timestamp_ms``: the time index gives the last point known to be below it, batch
        headers are scanned from there, the first qualifying batch's records are read
        (Kafka's ``LogSegment.findOffsetByTimestamp``)."""
        if self._ensure_times() < timestamp_ms:
            return None
        position = 0
        for ts, offset in self._time_index:
            if ts >= timestamp_ms:
                break
            position = self.lookup(offset)
        while position < self.size:
            _, batches = self._headers_from(position, limit=64)
            for b in batches:
                if b.max_timestamp >= timestamp_ms and b.last_offset >= start_offset:
                    raw = self.pread(b.position, b.size)
                    found = first_record_at_or_after(raw, timestamp_ms, start_offset)
                    if found is not None:
                        return found
            if not batches:
                break
            position = batches[-1].position + batches[-1].size
        return None

    def lookup(self, offset: int) -> int:
        """File position of the greatest indexed batch whose last offset is ≤ ``offset``."""
        lo, hi = 0, len(self._index) - 1
        best = 0
        while lo <= hi:
            mid = (lo + hi) // 2
            if self._index[mid][0] <= offset:
                best = self._index[mid][1]
                lo = mid + 1
            else:
                hi = mid - 1
        return best

    def find_position(self, offset: int) -> tuple[int | None, int]:
        """(position, base offset) of the first batch whose last offset is ≥ ``offset``."""
        position = self.lookup(offset)
        while position < self.size:
            head = self.pread(position, 27)
            if len(head) < 27:
                break
            base, size = read_prefix(head)
            (delta,) = _LAST_DELTA.unpack_from(head, 23)
            if base + delta >= offset:
                return position, base
            position += size
        return None, self.next_offset

    def read_batches(self, start: int, max_bytes: int, max_offset: int | None) -> bytes:
        """Whole batches from ``start`` fitting ``max_bytes`` (at least one batch, as Kafka
        returns an oversized first batch whole), none starting at or beyond ``max_offset``.

        One read of the candidate range, then the batch boundaries are walked in memory.
        """
        data = self.pread(start, min(max(max_bytes, LOG_OVERHEAD), self.size - start))
        if len(data) >= LOG_OVERHEAD:
            _, first_size = read_prefix(data)
            if first_size > len(data):
                data = self.pread(start, min(first_size, self.size - start))
        end = 0
        while end + LOG_OVERHEAD <= len(data):
            base, size = read_prefix(data, end)
            if max_offset is not None and base >= max_offset:
                break
            if end + size > len(data):
                break
            end += size
        return data[:end] if end < len(data) else data

    def batch_span(self, start: int, max_bytes: int, max_offset: int | None) -> int:
        """Length of the whole batches from ``start`` that :meth:`read_batches` would return,
        found without reading them: the offset index (whose positions are batch starts) jumps
        to the last indexed batch inside the limit, then only 12-byte batch prefixes are read.
        """
        limit = start + max(max_bytes, 0)
        pos = start
        index = self._index
        # Last entry starting within the limit whose batch (last offset) is below max_offset:
        # every batch before it then ends inside the limit and starts below max_offset.
        i = bisect.bisect_right(index, limit, key=lambda e: e[1]) - 1
        if max_offset is not None:
            i = min(i, bisect.bisect_left(index, max_offset, key=lambda e: e[0]) - 1)
        if i >= 0 and start < index[i][1] <= self.size:
            pos = index[i][1]
        while pos + LOG_OVERHEAD <= self.size:
            base, size = read_prefix(self.pread(pos, LOG_OVERHEAD))
            if max_offset is not None and base >= max_offset:
                break
            if pos + size > self.size or (pos + size > limit and pos > start):
                break
            pos += size
        return pos - start

    def dup_fd(self) -> int:
        """A new descriptor of the ``.log`` file, owned by the caller (see ``FileRange``)."""
        return os.dup(self._fd())

    def state(self) -> SegmentState:
        return SegmentState(
            self.base_offset,
            self.size,
            self.next_offset,
            self._index,
            len(self._index),
            self.log_path,
            self._time_index,
            len(self._time_index),
            self._max_timestamp,
            self._max_timestamp_offset,
        )
