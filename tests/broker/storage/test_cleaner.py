"""Log compaction: latest value per key, tombstones kept for ``delete.retention.ms`` then
removed, the active segment and young segments untouched, offsets unchanged, and a cleaner
SIGKILLed at each step of its swap loses nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from spindle.broker.common.errors import KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.group.records import iter_records
from spindle.broker.records.batch import build_batch, validate
from spindle.broker.storage import Log, LogManager
from spindle.broker.storage.cleaner import CompactionConfig, LogCleaner

from .conftest import FakeClock

TP = TopicPartition("compacted", 0)
Opener = Callable[..., LogManager]
DAY_MS = 86_400_000


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20).records
        if not chunk:
            break
        out += list(iter_records(chunk))
        offset = validate(chunk)[-1].next_offset
    return out


def fill(log: Log, clock: FakeClock, rounds: int, *, tombstone: bytes | None = None) -> None:
    for r in range(rounds):
        keys = [f"k{i}".encode() for i in range(5)]
        values: list[bytes | None] = [f"r{r}-{i}".encode() for i in range(5)]
        if tombstone is not None and r == rounds - 1:
            values[keys.index(tombstone)] = None
        log.append(build_batch(values, keys=keys, timestamp_ms=clock.wall_ms()))
        log.high_watermark = log.log_end_offset


def latest_view(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes, bytes | None]:
    view: dict[bytes, bytes | None] = {}
    for _, k, v in records:
        assert k is not None
        view[k] = v
    return view


def test_compaction_keeps_the_latest_value_per_key_at_the_same_offsets(
    dirs: list[str], open_manager: Opener, clock: FakeClock
) -> None:
    lm = open_manager(dirs, clock=clock, **{"log.segment.bytes": 2048})
    log = lm.get_or_create_log(TP)
    fill(log, clock, 40)
    log.roll()
    before = read_all(log)
    leo = log.log_end_offset
    result = LogCleaner(clock=clock).clean(log, CompactionConfig())
    assert result is not None
    assert result.records_removed > 0
    after = read_all(log)
    assert latest_view(after) == latest_view(before)
    assert len(after) == 5
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in before)[-5:]
    assert log.log_end_offset == leo
    # Appends and reads go on after the swap.
    log.append(build_batch([b"new"], keys=[b"k0"], timestamp_ms=clock.wall_ms()))
    assert read_all(log)[-1][1:] == (b"k0", b"new")


def test_active_segment_and_young_segments_are_never_cleaned(
    dirs: list[str], open_manager: Opener, clock: FakeClock
) -> None:
    lm = open_manager(dirs, clock=clock, **{"log.segment.bytes": 1 << 20})
    log = lm.get_or_create_log(TP)
    fill(log, clock, 10)
    assert LogCleaner(clock=clock).clean(log, CompactionConfig(), force=True) is None
    log.roll()
    lagged = CompactionConfig(min_compaction_lag_ms=60_000)
    assert LogCleaner(clock=clock).clean(log, lagged, force=True) is None
    clock.advance(61)
    assert LogCleaner(clock=clock).clean(log, lagged, force=True) is not None
    assert len(read_all(log)) == 5


def test_tombstones_stay_for_delete_retention_then_go(
    dirs: list[str], open_manager: Opener, clock: FakeClock
) -> None:
    lm = open_manager(dirs, clock=clock, **{"log.segment.bytes": 4096})
    log = lm.get_or_create_log(TP)
    fill(log, clock, 20, tombstone=b"k2")
    log.roll()
    cleaner = LogCleaner(clock=clock)
    cleaner.clean(log, CompactionConfig(), force=True)
    view = latest_view(read_all(log))
    assert b"k2" in view
    assert view[b"k2"] is None
    assert cleaner.clean(log, CompactionConfig()) is None  # nothing new, tombstones young
    clock.advance(DAY_MS / 1000 + 1)
    # Nothing new was written, but the tombstones' time is up: the log is cleaned (KIP-534).
    assert cleaner.clean(log, CompactionConfig()) is not None
    view = latest_view(read_all(log))
    assert b"k2" not in view
    assert sorted(view) == [b"k0", b"k1", b"k3", b"k4"]


def test_dirty_ratio_below_the_minimum_skips_the_pass(
    dirs: list[str], open_manager: Opener, clock: FakeClock
) -> None:
    lm = open_manager(dirs, clock=clock, **{"log.segment.bytes": 2048})
    log = lm.get_or_create_log(TP)
    fill(log, clock, 40)
    log.roll()
    cleaner = LogCleaner(clock=clock)
    assert cleaner.clean(log, CompactionConfig()) is not None
    fill(log, clock, 1)
    log.roll()
    assert cleaner.clean(log, CompactionConfig(min_cleanable_dirty_ratio=0.9)) is None


def test_compacted_log_reloads_after_a_clean_restart(
    dirs: list[str], open_manager: Opener, clock: FakeClock
) -> None:
    lm = open_manager(dirs, clock=clock, **{"log.segment.bytes": 2048})
    log = lm.get_or_create_log(TP)
    fill(log, clock, 40)
    log.roll()
    LogCleaner(clock=clock).clean(log, CompactionConfig())
    expected = read_all(log)
    lm.close()
    again = open_manager(dirs, clock=clock, **{"log.segment.bytes": 2048})
    reopened = again.get_log(TP)
    assert reopened is not None
    assert read_all(reopened) == expected


CHILD = str(Path(__file__).with_name("cleaner_child.py"))


@pytest.mark.parametrize("step", ["clean-written", "clean-index-removed", "clean-swapped"])
def test_cleaner_killed_at_each_step_loses_nothing(
    dirs: list[str], open_manager: Opener, step: str
) -> None:
    settings = {"log.segment.bytes": 2048, "file.delete.delay.ms": 0}
    config = {"dirs": dirs, "settings": settings, "pause_at": step}
    proc = subprocess.Popen(
        [sys.executable, "-P", CHILD, json.dumps(config)],
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    try:
        assert proc.stdout is not None
        latest = json.loads(proc.stdout.readline())["latest"]
        assert json.loads(proc.stdout.readline()) == {"paused": step}
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    lm = open_manager(dirs, **settings)
    log = lm.get_log(TopicPartition("c", 0))
    assert log is not None
    records = read_all(log)
    view = {
        k.decode(): (None if v is None else v.decode()) for k, v in latest_view(records).items()
    }
    assert view == latest
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets))
    leftovers = [n for d in dirs for _, _, files in os.walk(d) for n in files if "cleaned" in n]
    assert leftovers == []


def test_disk_failure_while_cleaning_takes_the_directory_offline_once(
    dirs: list[str], open_manager: Opener, clock: FakeClock
) -> None:
    lm = open_manager(dirs, clock=clock, **{"log.segment.bytes": 2048})
    log = lm.get_or_create_log(TP)
    fill(log, clock, 40)
    log.roll()
    before = read_all(log)
    # Kafka's way to fail a directory: the partition directory is replaced by a file.
    moved = log.dir_path + ".gone"
    os.rename(log.dir_path, moved)
    Path(log.dir_path).write_text("not a directory")
    with pytest.raises(KafkaStorageError):
        LogCleaner(clock=clock).clean(log, CompactionConfig(), force=True)
    assert lm.offline_dirs == [log.logdir_path]
    with pytest.raises(KafkaStorageError):  # later operations fail at once
        log.append(build_batch([b"v"], keys=[b"k"], timestamp_ms=clock.wall_ms()))
    # Nothing was lost: with the directory back, a restart reads every record as before.
    lm.close()
    os.unlink(log.dir_path)
    os.rename(moved, log.dir_path)
    again = open_manager(dirs, clock=clock, **{"log.segment.bytes": 2048})
    reopened = again.get_log(TP)
    assert reopened is not None
    assert read_all(reopened) == before
