"""Segment files: Kafka's .index/.timeindex formats on disk, lookups, rebuilding bad indexes."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from spindle.broker.records.batch import build_batch, validate
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
    assert seg.find_timestamp(1035) == 108
    assert seg.find_timestamp(2000) is None
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
