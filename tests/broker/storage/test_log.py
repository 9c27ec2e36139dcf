"""Partition logs: appends, reads, roll, retention, truncation, recovery of a torn tail."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch, validate
from spindle.broker.storage import LogManager

from .conftest import FakeClock, crash

TP = TopicPartition("orders", 0)
Opener = Callable[..., LogManager]


def _batches(log_read: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for h in validate(log_read)]


def test_appends_get_consecutive_offsets_and_read_back_byte_for_byte(
    open_manager: Opener, dirs: list[str]
) -> None:
    log = open_manager(dirs).get_or_create_log(TP)
    sent = [build_batch([f"v{i}".encode()] * (i + 1)) for i in range(5)]
    results = [log.append(b) for b in sent]
    assert [(r.base_offset, r.last_offset) for r in results] == [
        (0, 0),
        (1, 2),
        (3, 5),
        (6, 9),
        (10, 14),
    ]
    data = log.read(0, 1 << 20).records
    assert _batches(data) == [(r.base_offset, r.last_offset) for r in results]
    # Only the base offset (bytes 0-8) differs from what the producer sent.
    offset = 0
    for raw in sent:
        assert data[offset + 8 : offset + len(raw)] == raw[8:]
        offset += len(raw)


def test_read_from_the_middle_of_a_batch_starts_at_that_batch_and_honours_max_bytes(
    open_manager: Opener, dirs: list[str]
) -> None:
    log = open_manager(dirs, **{"log.index.interval.bytes": 100}).get_or_create_log(TP)
    for _ in range(40):
        log.append(build_batch([b"x" * 50, b"y" * 50]))
    one = log.read(37, 1).records  # smaller than a batch: still one whole batch
    assert _batches(one) == [(36, 37)]
    some = log.read(37, 3 * len(one))
    assert _batches(some.records) == [(36, 37), (38, 39), (40, 41)]
    with log.read(37, 3 * len(one), file_range_min_bytes=0).file as in_file:  # type: ignore[union-attr]
        assert in_file.read() == some.records
    assert _batches(log.read(0, 1 << 20, max_offset=4).records) == [(0, 1), (2, 3)]
    assert log.read(80, 100).records == b""


def test_reading_outside_the_log_is_offset_out_of_range(
    open_manager: Opener, dirs: list[str]
) -> None:
    log = open_manager(dirs).get_or_create_log(TP)
    log.append(build_batch([b"a"]))
    with pytest.raises(KafkaError) as info:
        log.read(2, 100)
    assert info.value.code is ErrorCode.OFFSET_OUT_OF_RANGE


def test_corrupt_batch_in_a_record_set_writes_nothing(
    open_manager: Opener, dirs: list[str]
) -> None:
    log = open_manager(dirs).get_or_create_log(TP)
    log.append(build_batch([b"good"]))
    before = log.size
    bad = bytearray(build_batch([b"fine"]) + build_batch([b"broken"]))
    bad[-2] ^= 0xFF
    with pytest.raises(KafkaError) as info:
        log.append(bytes(bad))
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE
    assert (log.size, log.log_end_offset) == (before, 1)
    seg = os.path.join(log.dir_path, "00000000000000000000.log")
    assert os.path.getsize(seg) == before


def test_segments_roll_by_size_and_by_time(
    open_manager: Opener, dirs: list[str], clock: FakeClock
) -> None:
    lm = open_manager(dirs, clock=clock, **{"log.segment.bytes": 1000, "log.roll.ms": 60_000})
    log = lm.get_or_create_log(TP)
    batch = build_batch([b"z" * 200], timestamp_ms=clock.wall_ms())
    for _ in range(8):
        log.append(batch)
    assert log.segment_count == 3  # batches of 270 bytes: three fit in 1000
    log.append(batch)
    assert log.segment_count == 3
    clock.advance(61)
    log.append(build_batch([b"late"], timestamp_ms=clock.wall_ms()))
    assert log.segment_count == 4
    names = sorted(n for n in os.listdir(log.dir_path) if n.endswith(".log"))
    assert names == [f"{o:020d}.log" for o in (0, 3, 6, 9)]


def test_retention_by_size_and_time_keeps_the_active_segment_and_moves_log_start(
    open_manager: Opener, dirs: list[str], clock: FakeClock
) -> None:
    lm = open_manager(
        dirs,
        clock=clock,
        **{"log.segment.bytes": 600, "log.retention.ms": 3_600_000, "log.retention.bytes": 1200},
    )
    log = lm.get_or_create_log(TP)
    for _ in range(12):
        log.append(build_batch([b"r" * 200], timestamp_ms=clock.wall_ms()))
    log.high_watermark = log.log_end_offset
    segments = log.segment_count
    assert segments == 6
    # Kafka's rule: delete the oldest while the rest still holds >= retention.bytes.
    assert lm.run_retention() == 3  # 6 x 540 bytes -> 3 x 540 = 1620 left
    assert log.log_start_offset == 6
    clock.advance(3601)
    assert lm.run_retention() == 2
    assert (log.segment_count, log.log_start_offset) == (1, 10)
    assert _batches(log.read(10, 10_000).records) == [(10, 10), (11, 11)]


def test_retention_never_deletes_beyond_the_high_watermark(
    open_manager: Opener, dirs: list[str], clock: FakeClock
) -> None:
    lm = open_manager(dirs, clock=clock, **{"log.segment.bytes": 600, "log.retention.bytes": 0})
    log = lm.get_or_create_log(TP)
    for _ in range(6):
        log.append(build_batch([b"r" * 200]))
    assert lm.run_retention() == 0
    log.high_watermark = 2
    assert lm.run_retention() == 1


def test_truncate_to_drops_later_batches_and_segments(
    open_manager: Opener, dirs: list[str]
) -> None:
    log = open_manager(dirs, **{"log.segment.bytes": 600}).get_or_create_log(TP)
    for _ in range(10):
        log.append(build_batch([b"t" * 200]))
    log.truncate_to(5)
    assert log.log_end_offset == 5
    assert _batches(log.read(0, 1 << 20).records) == [(0, 0), (1, 1)]
    assert log.append(build_batch([b"again"])).base_offset == 5


def test_unclean_shutdown_recovery_truncates_a_torn_tail(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs, **{"log.segment.bytes": 1000})
    log = lm.get_or_create_log(TP)
    for i in range(10):
        log.append(build_batch([bytes([i]) * 200]))
    active = os.path.join(
        log.dir_path, f"{log.log_end_offset - 1 - (log.log_end_offset - 1) % 3:020d}.log"
    )
    lm.flush_and_checkpoint()
    good_size = os.path.getsize(active)
    crash(lm)
    with open(active, "ab") as f:  # half a batch, as a crash mid-write leaves it
        f.write(build_batch([b"torn" * 30])[:70])
    lm2 = open_manager(dirs, **{"log.segment.bytes": 1000})
    log2 = lm2.get_log(TP)
    assert log2 is not None
    assert log2.log_end_offset == 10
    assert os.path.getsize(active) == good_size
    assert log2.append(build_batch([b"next"])).base_offset == 10


def test_unclean_shutdown_recovery_revalidates_crc_after_the_recovery_point(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    log = lm.get_or_create_log(TP)
    for i in range(5):
        log.append(build_batch([bytes([65 + i]) * 100]))
    seg = os.path.join(log.dir_path, f"{0:020d}.log")
    crash(lm)
    with open(seg, "r+b") as f:  # flip a byte inside the 4th batch's records
        f.seek(3 * 173 + 100)
        b = f.read(1)
        f.seek(3 * 173 + 100)
        f.write(bytes([b[0] ^ 0xFF]))
    log2 = open_manager(dirs).get_log(TP)
    assert log2 is not None
    assert log2.log_end_offset == 3


def test_clean_shutdown_skips_recovery_and_keeps_offsets(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs, **{"log.segment.bytes": 800})
    log = lm.get_or_create_log(TP)
    for _ in range(9):
        log.append(build_batch([b"c" * 150]))
    log.high_watermark = 7
    lm.close()
    assert os.path.exists(os.path.join(log.logdir_path, ".kafka_cleanshutdown"))
    # A flipped payload byte in the last batch: only a recovery (CRC re-check) would notice.
    last_segment = log.segment_states()[-1].log_path
    with open(last_segment, "r+b") as f:
        f.seek(-5, os.SEEK_END)
        byte = f.read(1)
        f.seek(-5, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0xFF]))
    lm2 = open_manager(dirs, **{"log.segment.bytes": 800})
    assert not os.path.exists(os.path.join(log.logdir_path, ".kafka_cleanshutdown"))
    log2 = lm2.get_log(TP)
    assert log2 is not None
    assert (log2.log_end_offset, log2.high_watermark, log2.segment_count) == (9, 7, 3)  # skipped
    assert log2.read(8, 1000).size == 220  # served as stored: no recovery ran


def _spy_fsync(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the path of every file or directory fsynced from now on (then really sync)."""
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return synced


def test_housekeeping_checkpoints_offsets_that_survive_a_crash_without_flushing_the_active_segment(
    open_manager: Opener, dirs: list[str], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    lm = open_manager(dirs, clock=clock, **{"log.segment.bytes": 700})
    log = lm.get_or_create_log(TP)
    for _ in range(9):
        log.append(build_batch([b"h" * 150]))
    log.high_watermark = 6
    lm.run_housekeeping()  # nothing due yet
    hw_file = Path(log.logdir_path, "replication-offset-checkpoint")
    recovery_file = Path(log.logdir_path, "recovery-point-offset-checkpoint")
    assert not hw_file.exists()
    clock.advance(5)  # replica.high.watermark.checkpoint.interval.ms
    lm.run_housekeeping()
    assert hw_file.read_text() == "0\n1\norders 0 6\n"
    assert not recovery_file.exists()
    synced = _spy_fsync(monkeypatch)
    clock.advance(55)  # log.flush.offset.checkpoint.interval.ms
    lm.run_housekeeping()
    # Kafka's recovery point: the end of the rolled (flushed) segments; the active one, 6-8,
    # is not flushed by the checkpoint (nor is any other segment file).
    assert recovery_file.read_text() == "0\n1\norders 0 6\n"
    assert log.recovery_point == 6
    assert synced  # the checkpoint files
    assert [p for p in synced if p.startswith(log.dir_path)] == []
    crash(lm)
    log2 = open_manager(dirs, clock=clock, **{"log.segment.bytes": 700}).get_log(TP)
    assert log2 is not None
    assert (log2.high_watermark, log2.log_end_offset) == (6, 9)  # 6-8 re-validated


def test_deleted_log_is_renamed_then_removed_and_can_be_recreated(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    log = lm.get_or_create_log(TP)
    log.append(build_batch([b"bye"]))
    assert lm.delete_log(TP)
    assert lm.get_log(TP) is None
    assert lm.await_idle(10)
    assert not any(n.startswith("orders-0") for d in dirs for n in os.listdir(d))
    assert not lm.delete_log(TP)
    assert lm.get_or_create_log(TP).log_end_offset == 0


def test_follower_appends_keep_the_leaders_offsets_and_refuse_going_back(
    open_manager: Opener, dirs: list[str]
) -> None:
    log = open_manager(dirs).get_or_create_log(TP)
    r = log.append(build_batch([b"a", b"b"], base_offset=0), assign_offsets=False)
    assert (r.base_offset, r.last_offset) == (0, 1)
    r = log.append(build_batch([b"c"], base_offset=5), assign_offsets=False)  # a gap is fine
    assert (r.base_offset, r.last_offset, log.log_end_offset) == (5, 5, 6)
    with pytest.raises(KafkaError) as info:
        log.append(build_batch([b"old"], base_offset=3), assign_offsets=False)
    assert info.value.code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert _batches(log.read(0, 1000).records) == [(0, 1), (5, 5)]


def _timed_batch(base_offset: int, timestamps: list[int], compression: int) -> bytes:
    """One v2 batch with a record per timestamp (kafka-python's builder: compression, and a
    timestamp per record, which ``build_batch`` does not make)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, ts in enumerate(timestamps):
        builder.append(i, timestamp=ts, key=None, value=b"r%d" % i, headers=[])
    raw = bytes(builder.build())
    return base_offset.to_bytes(8, "big") + raw[8:]


@pytest.mark.parametrize("compression", [0, 1], ids=["uncompressed", "gzip"])
def test_a_timestamp_inside_a_batch_finds_the_first_record_at_or_after_it(
    open_manager: Opener, dirs: list[str], compression: int
) -> None:
    # Kafka looks inside the batch: with 30 records a second apart, record 10's time + 0.5 s
    # is record 11's offset and time, not the batch's first offset (0).
    log = open_manager(dirs).get_or_create_log(TP)
    t0 = 1_700_000_000_000
    log.append(_timed_batch(0, [t0 + i * 1000 for i in range(30)], compression))
    log.append(_timed_batch(0, [t0 + 40_000, t0 + 41_000], compression))
    log.high_watermark = 32
    assert log.offset_for_timestamp(t0 + 10_500) == (11, t0 + 11_000)
    assert log.offset_for_timestamp(t0 + 10_000) == (10, t0 + 10_000)
    assert log.offset_for_timestamp(t0 - 1) == (0, t0)
    assert log.offset_for_timestamp(t0 + 29_001) == (30, t0 + 40_000)
    assert log.offset_for_timestamp(t0 + 41_001) is None


@pytest.mark.parametrize("lose_time_index", [False, True])
def test_offsets_by_timestamp_and_time_retention_survive_a_restart(
    open_manager: Opener, dirs: list[str], clock: FakeClock, lose_time_index: bool
) -> None:
    settings = {"log.segment.bytes": 1500, "log.index.interval.bytes": 300}
    lm = open_manager(dirs, clock=clock, **settings)
    log = lm.get_or_create_log(TP)
    t0 = clock.wall_ms()
    for i in range(30):  # timestamps t0, t0+1000, ... ; one out of order at offset 17
        ts = t0 + (500 if i == 17 else i * 1000)
        log.append(build_batch([b"q" * 100], timestamp_ms=ts))
    log.high_watermark = 30
    offsets = {t0: 0, t0 + 1: 1, t0 + 500: 1, t0 + 16_500: 18, t0 + 29_000: 29}
    expected = {ts: (o, t0 + (500 if o == 17 else o * 1000)) for ts, o in offsets.items()}
    assert {ts: log.offset_for_timestamp(ts) for ts in expected} == expected
    assert log.offset_for_timestamp(t0 + 29_001) is None
    lm.close()
    time_indexes = [n for n in os.listdir(log.dir_path) if n.endswith(".timeindex")]
    assert len(time_indexes) == log.segment_count
    if lose_time_index:
        for name in time_indexes:
            os.unlink(os.path.join(log.dir_path, name))
    lm2 = open_manager(dirs, clock=clock, **settings)
    log2 = lm2.get_log(TP)
    assert log2 is not None
    assert {ts: log2.offset_for_timestamp(ts) for ts in expected} == expected
    clock.advance(30)  # now = t0 + 30 s: keep segments with records newer than t0 + 17.5 s
    lm2.close()
    lm3 = open_manager(dirs, clock=clock, **settings, **{"log.retention.ms": 12_500})
    log3 = lm3.get_log(TP)
    assert log3 is not None
    # 170-byte batches, 8 per segment: newest records t0+7 s, t0+15 s, t0+23 s, active.
    assert lm3.run_retention() == 2
    assert log3.log_start_offset == 16
    assert _batches(log3.read(16, 170).records) == [(16, 16)]


def test_a_roll_leaves_its_flush_to_housekeeping_and_a_crash_before_it_keeps_every_record(
    open_manager: Opener, dirs: list[str], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    lm = open_manager(dirs, clock=clock, **{"log.segment.bytes": 700})
    log = lm.get_or_create_log(TP)
    synced = _spy_fsync(monkeypatch)
    for _ in range(9):
        log.append(build_batch([b"r" * 150]))  # three a segment: rolls at 3 and 6
    assert log.segment_count == 3
    assert synced == []  # the appends that rolled (on the event loop) waited for no fsync
    assert log.recovery_point == 0
    lm.run_housekeeping()  # every tick flushes what has rolled
    states = log.segment_states()
    assert log.recovery_point == 6
    assert {states[0].log_path, states[1].log_path} <= set(synced)
    assert states[2].log_path not in synced  # the active segment is left to the page cache
    for _ in range(3):
        log.append(build_batch([b"s" * 150]))  # rolls at 9, not flushed before the crash
    crash(lm)
    log2 = open_manager(dirs, clock=clock, **{"log.segment.bytes": 700}).get_log(TP)
    assert log2 is not None
    assert log2.log_end_offset == 12
    assert len(validate(log2.read(6, 1 << 20).records)) == 3


def test_a_flush_packs_the_index_entries_before_it_takes_the_partition_lock(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs, **{"log.segment.bytes": 16 << 10, "log.index.interval.bytes": 0})
    log = lm.get_or_create_log(TP)
    for _ in range(300):
        log.append(build_batch([b"p" * 200]))  # an index entry per batch, several rolls
    locked: list[tuple[int, int]] = []
    free: list[tuple[int, int]] = []
    for seg in log._segments:
        real = seg._packed_index._pack

        def pack(entry: tuple[int, int], real: Callable[..., bytes] = real) -> bytes:
            (locked if log.lock._is_owned() else free).append(entry)
            return real(entry)

        seg._packed_index._pack = pack
    log.flush()
    assert len(free) == 300  # every entry, packed before the locked pass
    assert locked == []
