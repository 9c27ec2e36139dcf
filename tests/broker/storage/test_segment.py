"""Segment files: Kafka's .index/.timeindex formats on disk, lookups, rebuilding bad indexes."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from spindle.broker.records.batch import build_batch, offset_parts, validate
from spindle.broker.storage.segment import Segment


def _segment_with_batches(tmp_path: Path, n: int, *, interval: int) -> tuple[Segment, list[bytes]]:
    seg = Segment.create(str(tmp_path), 100, index_interval_bytes=interval, created_ms=0)
    raws = []
    offset = 100
    for i in range(n):
        raw = build_batch([b"v" * 50, b"w" * 50], base_offset=offset, timestamp_ms=1000 + 10 * i)
        headers = validate(raw)
        seg.append(raw, [(0, len(raw), headers[0].last_offset, headers[0].max_timestamp)])
        raws.append(raw)
        offset += 2
    return seg, raws


def test_index_files_are_kafkas_binary_formats_relative_to_the_base_offset(tmp_path: Path) -> None:
    seg, raws = _segment_with_batches(tmp_path, 10, interval=400)
    seg.flush()
    index = Path(tmp_path, f"{100:020d}.index").read_bytes()
    entries = list(struct.iter_unpack(">ii", index))
    size = len(raws[0])  # 167 bytes: an entry every third batch (> 400 bytes since the last)
    assert entries == [(1, 0), (7, 3 * size), (13, 6 * size), (19, 9 * size)]
    times = list(struct.iter_unpack(">qi", Path(tmp_path, f"{100:020d}.timeindex").read_bytes()))
    assert times == [(1000, 1), (1030, 7), (1060, 13), (1090, 19)]
    seg.close()


def test_lookup_and_find_position_land_on_the_batch_holding_an_offset(tmp_path: Path) -> None:
    seg, raws = _segment_with_batches(tmp_path, 10, interval=400)
    size = len(raws[0])
    for offset in range(100, 120):
        position, base = seg.find_position(offset)
        assert position == (offset - 100) // 2 * size
        assert base == offset - offset % 2
    assert seg.find_position(120) == (None, 120)
    assert seg.find_timestamp(1035, 100) == (108, 1040)
    assert seg.find_timestamp(1035, 109) == (109, 1040)  # the log starts inside that batch
    assert seg.find_timestamp(1035, 110) == (110, 1050)
    assert seg.find_timestamp(2000, 100) is None
    seg.close()


def test_inconsistent_index_files_are_rebuilt_on_load(tmp_path: Path) -> None:
    seg, _ = _segment_with_batches(tmp_path, 10, interval=400)
    seg.flush()
    expected = Path(tmp_path, f"{100:020d}.index").read_bytes()
    seg.close()
    Path(tmp_path, f"{100:020d}.index").write_bytes(expected[:-3])  # torn last entry
    os.unlink(Path(tmp_path, f"{100:020d}.timeindex"))
    loaded, cut = Segment.load(
        str(tmp_path), 100, index_interval_bytes=400, recover=False, now_ms=0
    )
    assert cut == 0
    assert loaded.next_offset == 120
    assert loaded.max_timestamp == 1090
    loaded.flush()
    assert Path(tmp_path, f"{100:020d}.index").read_bytes() == expected
    loaded.close()


def _index_files(path: Path) -> tuple[bytes, bytes]:
    return (
        Path(path, f"{100:020d}.index").read_bytes(),
        Path(path, f"{100:020d}.timeindex").read_bytes(),
    )


def _rebuilt_index(seg: Segment, elsewhere: Path) -> bytes:
    """The offset index a full re-validation of ``seg``'s log bytes writes."""
    elsewhere.mkdir()
    Path(elsewhere, f"{100:020d}.log").write_bytes(Path(seg.log_path).read_bytes())
    rebuilt, _ = Segment.load(str(elsewhere), 100, index_interval_bytes=400, recover=True, now_ms=0)
    rebuilt.close()
    return _index_files(elsewhere)[0]


def _assert_packed_from_scratch_alike(seg: Segment, path: Path) -> None:
    """The files equal those of a flush that packs every entry again (the former way)."""
    written = _index_files(path)
    seg._packed_index.reset()
    seg._packed_times.reset()
    seg._index_dirty = True
    seg.flush()
    assert _index_files(path) == written


def test_index_files_flushed_between_appends_and_truncations_match_a_full_rebuild(
    tmp_path: Path,
) -> None:
    # Flushes pack only the entries added since the previous one; a truncation and appends of
    # other sizes after it must still give the files a rebuild from the log bytes gives.
    live = tmp_path / "live"
    live.mkdir()
    seg, _ = _segment_with_batches(live, 10, interval=400)
    seg.flush()
    offset = seg.next_offset
    for i, width in enumerate([300, 20, 20, 900, 5]):
        raw = build_batch([b"x" * width], base_offset=offset, timestamp_ms=2000 + i)
        h = validate(raw)[0]
        seg.append(raw, [(0, len(raw), h.last_offset, h.max_timestamp)])
        offset = h.last_offset + 1
        seg.flush()
    assert _index_files(live)[0] == _rebuilt_index(seg, tmp_path / "r1")
    _assert_packed_from_scratch_alike(seg, live)
    seg.truncate_to_offset(111)
    offset = seg.next_offset
    for i, width in enumerate([700, 10, 450]):
        raw = build_batch([b"y" * width, b"z"], base_offset=offset, timestamp_ms=3000 + i)
        h = validate(raw)[0]
        seg.append(raw, [(0, len(raw), h.last_offset, h.max_timestamp)])
        offset = h.last_offset + 1
    seg.flush()
    assert _index_files(live)[0] == _rebuilt_index(seg, tmp_path / "r2")
    _assert_packed_from_scratch_alike(seg, live)
    seg.close()


def test_a_copy_adopting_growing_snapshots_writes_the_sources_index_files(tmp_path: Path) -> None:
    src_dir, dst_dir = tmp_path / "src", tmp_path / "dst"
    src_dir.mkdir()
    dst_dir.mkdir()
    src, _ = _segment_with_batches(src_dir, 6, interval=400)
    dst = Segment.create(str(dst_dir), 100, index_interval_bytes=400, created_ms=0)
    fd = os.open(src.log_path, os.O_RDONLY)
    try:
        copied = 0
        for more in (0, 7, 12):
            offset = src.next_offset
            for i in range(more):
                raw = build_batch([b"m" * (40 * i + 1)], base_offset=offset, timestamp_ms=5000 + i)
                h = validate(raw)[0]
                src.append(raw, [(0, len(raw), h.last_offset, h.max_timestamp)])
                offset = h.last_offset + 1
            state = src.state()
            dst.copy_from(fd, copied, state.size - copied)
            copied = state.size
            dst.adopt_copied(state)
            dst.flush()
    finally:
        os.close(fd)
    src.flush()
    assert _index_files(dst_dir) == _index_files(src_dir)
    src.close()
    dst.close()


def test_append_of_pieces_survives_short_vectored_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = build_batch([b"x" * 100, b"y" * 50]) + build_batch([b"z"])
    headers = validate(raw)
    parts, _ = offset_parts(raw, headers, 0)
    real_writev = os.writev

    def short_writev(fd: int, buffers: list[memoryview]) -> int:
        # Write at most 7 bytes per call, as a kernel may under pressure.
        return real_writev(fd, [bytes(b"".join(bytes(b) for b in buffers)[:7])])

    monkeypatch.setattr(os, "writev", short_writev)
    seg = Segment.create(str(tmp_path), 0, index_interval_bytes=4096, created_ms=0)
    stored = validate(b"".join(parts))  # offsets 0-1 and 2
    seg.append(parts, [(h.position, h.size, h.last_offset, h.max_timestamp) for h in stored])
    monkeypatch.undo()
    assert seg.size == len(raw)
    assert seg.pread(0, seg.size) == b"".join(parts)
    assert seg.next_offset == 3
