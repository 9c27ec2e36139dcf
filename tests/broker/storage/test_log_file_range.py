"""Zero-copy reads: a ``FileRange`` names exactly the batches the copying read returns, and its
bytes stay the same across a roll, retention and a replica move's swap while it is held."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from spindle.broker.common.errors import ErrorCode
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch, validate
from spindle.broker.storage import FileRange, Log, LogManager

Opener = Callable[..., LogManager]
TP = TopicPartition("zc", 0)


def _fill(log: Log, n: int, *, start: int = 0, size: int = 3000) -> None:
    for i in range(start, start + n):
        log.append(build_batch([f"{i:08d}".encode() * (size // 8)]))


def _ranged(log: Log, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
    got = log.read(offset, max_bytes, max_offset=max_offset, file_range_min_bytes=0)
    if got.file is None:
        return got.records
    with got.file as rng:
        return rng.read()


def _whole_log(log: Log) -> bytes:
    out = bytearray()
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 30).records
        out += chunk
        offset = validate(chunk)[-1].next_offset
    return bytes(out)


@pytest.mark.parametrize("interval", [0, 100, 4096, 50_000])
def test_file_range_names_exactly_the_batches_the_copying_read_returns(
    open_manager: Opener, dirs: list[str], interval: int
) -> None:
    log = open_manager(
        dirs, **{"log.index.interval.bytes": interval, "log.segment.bytes": 20_000}
    ).get_or_create_log(TP)
    for i in range(120):
        log.append(build_batch([b"v" * (37 * (i % 11) + 1)] * (1 + i % 3)))
    assert log.segment_count > 1
    leo = log.log_end_offset
    for offset in range(0, leo, 7):
        for max_bytes in (1, 500, 4096, 30_000, 1 << 20):
            for max_offset in (None, offset + 1, offset + 40, leo):
                copied = log.read(offset, max_bytes, max_offset=max_offset).records
                assert _ranged(log, offset, max_bytes, max_offset) == copied, (
                    offset,
                    max_bytes,
                    max_offset,
                )


def test_small_slices_are_copied_and_large_ones_are_file_ranges_the_caller_closes(
    open_manager: Opener, dirs: list[str]
) -> None:
    log = open_manager(dirs).get_or_create_log(TP)
    _fill(log, 40)
    small = log.read(0, 5000, file_range_min_bytes=65536)
    assert small.file is None
    assert small.size == len(small.records) > 0
    large = log.read(0, 1 << 20, file_range_min_bytes=65536)
    assert large.records == b""
    assert large.file is not None
    assert large.size == large.file.length >= 65536
    fd = large.file.fd
    os.fstat(fd)  # open
    large.file.close()
    large.file.close()  # idempotent
    assert large.file.closed
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)


def test_a_dropped_range_closes_its_descriptor(open_manager: Opener, dirs: list[str]) -> None:
    log = open_manager(dirs).get_or_create_log(TP)
    _fill(log, 40)
    rng = log.read(0, 1 << 20, file_range_min_bytes=0).file
    assert isinstance(rng, FileRange)
    fd = rng.fd
    del rng
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)


def test_a_held_range_keeps_its_bytes_across_roll_appends_and_retention(
    open_manager: Opener, dirs: list[str]
) -> None:
    log = open_manager(dirs, **{"log.retention.bytes": 0}).get_or_create_log(TP)
    _fill(log, 40)
    expected = log.read(0, 1 << 20).records
    rng = log.read(0, 1 << 20, file_range_min_bytes=0).file
    assert rng is not None
    segment_file = Path(log.dir_path) / "00000000000000000000.log"
    log.roll()
    _fill(log, 40, start=40)
    log.high_watermark = log.log_end_offset
    assert log.apply_retention() == 1  # the ranged segment is deleted from disk
    assert not segment_file.exists()
    assert rng.read() == expected
    rng.close()


def test_a_range_held_across_a_move_swap_keeps_its_bytes_and_reads_after_match(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs, **{"log.segment.bytes": 64_000})
    log = lm.get_or_create_log(TP)
    _fill(log, 100)
    before = _whole_log(log)
    held = [log.read(offset, 30_000, file_range_min_bytes=0).file for offset in range(0, 100, 9)]
    expected = [log.read(offset, 30_000).records for offset in range(0, 100, 9)]
    src_dir = log.dir_path
    dest = next(d for d in dirs if d != log.logdir_path)
    assert lm.change_replica_dir(TP, dest) is ErrorCode.NONE
    assert lm.await_idle(60)
    assert log.logdir_path == dest
    deadline = time.monotonic() + 30
    while os.path.exists(src_dir) or any(n.endswith("-delete") for n in os.listdir(dirs[0])):
        assert time.monotonic() < deadline, "the old replica directory was never deleted"
        time.sleep(0.05)
    for rng, want in zip(held, expected, strict=True):
        assert rng is not None
        with rng:
            assert rng.read() == want
    assert _whole_log(log) == before
    offset = 0
    after = bytearray()
    while offset < log.log_end_offset:
        chunk = _ranged(log, offset, 1 << 20)
        after += chunk
        offset = validate(chunk)[-1].next_offset
    assert bytes(after) == before
