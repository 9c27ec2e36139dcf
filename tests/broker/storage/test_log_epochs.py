"""Leader epochs in a partition's log on real files: the leader stamps ``partitionLeaderEpoch``
on what it appends, every replica keeps ``leader-epoch-checkpoint`` in the partition directory
in step with its batches (appends, truncation, log start, restarts, crashes, moves)."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch, validate
from spindle.broker.storage import Log, LogManager

from .conftest import crash

TP = TopicPartition("epochs", 0)
Opener = Callable[..., LogManager]


def _checkpoint(log: Log) -> str:
    return Path(log.dir_path, "leader-epoch-checkpoint").read_text()


def _stored_epochs(log: Log) -> list[tuple[int, int]]:
    """(base offset, partitionLeaderEpoch) of every stored batch, CRCs checked."""
    data = log.read(log.log_start_offset, 1 << 24).records
    return [(h.base_offset, h.partition_leader_epoch) for h in validate(data)]


def _lead(log: Log, epoch: int, count: int) -> None:
    """Become leader at ``epoch`` and append ``count`` one-record batches as a producer sends
    them (partitionLeaderEpoch -1)."""
    log.assign_leader_epoch(epoch)
    for i in range(count):
        log.append(build_batch([f"e{epoch}-{i}".encode()]), leader_epoch=epoch)


def test_leader_stamps_its_epoch_on_each_batch_and_checkpoints_where_epochs_begin(
    open_manager: Opener, dirs: list[str]
) -> None:
    log = open_manager(dirs).get_or_create_log(TP)
    _lead(log, 0, 2)
    _lead(log, 3, 2)
    log.assign_leader_epoch(5)  # led without appending: epoch 5 starts at the log end
    assert _stored_epochs(log) == [(0, 0), (1, 0), (2, 3), (3, 3)]
    assert _checkpoint(log) == "0\n3\n0 0\n3 2\n5 4\n"
    assert log.end_offset_for_epoch(0) == (0, 2)
    assert log.end_offset_for_epoch(4) == (3, 4)
    assert log.end_offset_for_epoch(5) == (5, 4)


def test_follower_keeps_the_leaders_epochs_and_stamps_nothing(
    open_manager: Opener, dirs: list[str]
) -> None:
    log = open_manager(dirs).get_or_create_log(TP)
    fetched = b"".join(
        build_batch([b"x"], base_offset=o, partition_leader_epoch=e)
        for o, e in [(0, -1), (1, 2), (2, 2), (3, 7)]
    )
    log.append(fetched, assign_offsets=False)
    assert _stored_epochs(log) == [(0, -1), (1, 2), (2, 2), (3, 7)]
    assert _checkpoint(log) == "0\n2\n2 1\n7 3\n"


def test_truncation_and_a_raised_log_start_rewrite_the_checkpoint(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs, **{"log.segment.bytes": 300})
    log = lm.get_or_create_log(TP)
    for epoch in (1, 2, 4):
        _lead(log, epoch, 4)
    log.truncate_to(9)
    assert _checkpoint(log) == "0\n3\n1 0\n2 4\n4 8\n"
    log.truncate_to(8)
    assert _checkpoint(log) == "0\n2\n1 0\n2 4\n"
    log.high_watermark = 8
    log.advance_log_start_offset(6)
    assert log.log_start_offset == 6
    assert _checkpoint(log) == "0\n1\n2 6\n"


def test_truncating_at_the_log_end_drops_an_epoch_led_without_appending(
    open_manager: Opener, dirs: list[str]
) -> None:
    """Kafka's ``UnifiedLog.truncateTo`` with nothing to cut still truncates the epoch cache
    at the log end: this replica led epoch 5 and lost it before appending, and the leader it
    now follows never had epoch 5."""
    log = open_manager(dirs).get_or_create_log(TP)
    _lead(log, 3, 2)
    log.assign_leader_epoch(5)
    log.truncate_to(log.log_end_offset)
    assert log.log_end_offset == 2
    assert [(e.epoch, e.start_offset) for e in log.epochs.entries] == [(3, 0)]
    assert _checkpoint(log) == "0\n1\n3 0\n"


def test_the_cache_survives_a_restart_and_is_rebuilt_from_batches_when_lost(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    log = lm.get_or_create_log(TP)
    _lead(log, 1, 3)
    _lead(log, 4, 3)
    expected = _checkpoint(log)
    lm.close()
    lm2 = open_manager(dirs)
    log2 = lm2.get_log(TP)
    assert log2 is not None
    assert _checkpoint(log2) == expected
    assert log2.end_offset_for_epoch(1) == (1, 3)
    crash(lm2)
    Path(log2.dir_path, "leader-epoch-checkpoint").unlink()  # written before Spindle kept epochs
    log3 = open_manager(dirs).get_log(TP)
    assert log3 is not None
    assert [(e.epoch, e.start_offset) for e in log3.epochs.entries] == [(1, 0), (4, 3)]


def test_after_a_crash_epochs_past_the_recovery_point_come_back_from_the_batches(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    log = lm.get_or_create_log(TP)
    _lead(log, 1, 3)
    lm.flush_and_checkpoint()  # recovery point 3
    checkpoint = Path(log.dir_path, "leader-epoch-checkpoint")
    before = checkpoint.read_text()
    _lead(log, 2, 2)
    crash(lm)
    checkpoint.write_text(before)  # the crash came before the epoch file reached the disk
    log2 = open_manager(dirs).get_log(TP)
    assert log2 is not None
    assert [(e.epoch, e.start_offset) for e in log2.epochs.entries] == [(1, 0), (2, 3)]


def test_a_torn_tail_cut_at_recovery_takes_its_epoch_with_it(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    log = lm.get_or_create_log(TP)
    _lead(log, 1, 3)
    lm.flush_and_checkpoint()
    _lead(log, 2, 1)
    segment = Path(log.dir_path, f"{0:020d}.log")
    crash(lm)
    with open(segment, "r+b") as f:  # the epoch-2 batch reached the disk only in part
        f.truncate(os.path.getsize(segment) - 5)
    log2 = open_manager(dirs).get_log(TP)
    assert log2 is not None
    assert log2.log_end_offset == 3
    assert [(e.epoch, e.start_offset) for e in log2.epochs.entries] == [(1, 0)]


def test_a_moved_replica_takes_its_epochs_to_the_new_directory(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    lm.change_replica_dir(TP, dirs[0])
    log = lm.get_or_create_log(TP)
    _lead(log, 2, 5)
    _lead(log, 6, 5)
    expected = _checkpoint(log)
    assert lm.change_replica_dir(TP, dirs[1]).name == "NONE"
    assert lm.await_idle(30)
    assert log.logdir_path == dirs[1]
    assert _checkpoint(log) == expected
    _lead(log, 7, 1)  # appends after the swap keep the file in the new directory current
    assert _checkpoint(log) == "0\n3\n2 0\n6 5\n7 10\n"
    lm.close()
    log2 = open_manager(dirs).get_log(TP)
    assert log2 is not None
    assert log2.logdir_path == dirs[1]
    assert _stored_epochs(log2)[-1] == (10, 7)
    assert log2.end_offset_for_epoch(6) == (6, 10)


def test_stamping_changes_only_the_epoch_field_and_keeps_the_crc(
    open_manager: Opener, dirs: list[str]
) -> None:
    log = open_manager(dirs).get_or_create_log(TP)
    sent = build_batch([b"payload"], partition_leader_epoch=-1)
    log.append(sent, leader_epoch=9)
    stored = log.read(0, 1 << 20).records
    assert struct.unpack_from(">i", stored, 12) == (9,)
    assert stored[16:] == sent[16:]  # magic, CRC and everything after unchanged
    validate(stored)  # the CRC still checks
