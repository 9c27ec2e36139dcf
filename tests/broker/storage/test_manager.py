"""LogManager: start-up rules, placement, DescribeLogDirs data, AlterReplicaLogDirs errors."""

from __future__ import annotations

import errno
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch
from spindle.broker.storage import LogManager, StorageStartupError
from spindle.broker.storage.descriptions import DirLoad, choose_log_dir
from spindle.broker.storage.logdir import read_meta

from .conftest import make_settings

Opener = Callable[..., LogManager]


def test_placement_prefers_fewest_replicas_then_most_usable_bytes() -> None:
    assert (
        choose_log_dir([DirLoad("/a", 2, 900), DirLoad("/b", 1, 10), DirLoad("/c", 1, 50)]) == "/c"
    )
    assert choose_log_dir([DirLoad("/a", 0, 5), DirLoad("/b", 0, 5)]) == "/a"


def test_new_replicas_spread_over_directories(open_manager: Opener, dirs: list[str]) -> None:
    lm = open_manager(dirs)
    placed = [lm.get_or_create_log(TopicPartition("t", p)).logdir_path for p in range(6)]
    assert sorted(placed) == sorted(dirs * 2)


def test_start_up_writes_meta_properties_with_unique_directory_ids(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    metas = [read_meta(d) for d in dirs]
    ids = {m.directory_id for m in metas if m is not None}
    assert len(ids) == 3
    assert [d.directory_id for d in lm.describe_dirs()] == [m.directory_id for m in metas if m]
    lm.close()
    again = open_manager(dirs)
    assert [d.directory_id for d in again.describe_dirs()] == [m.directory_id for m in metas if m]


def test_copied_meta_properties_refuse_start_naming_both_dirs(
    open_manager: Opener, dirs: list[str]
) -> None:
    open_manager(dirs).close()
    shutil.copy(os.path.join(dirs[0], "meta.properties"), os.path.join(dirs[2], "meta.properties"))
    with pytest.raises(StorageStartupError, match=r"same directory\.id") as info:
        LogManager.open(make_settings(dirs), cluster_id="test-cluster", node_id=1, background=False)
    assert dirs[0] in str(info.value)
    assert dirs[2] in str(info.value)


def test_unusable_directory_is_offline_from_the_start_and_others_serve(
    open_manager: Opener, dirs: list[str]
) -> None:
    Path(dirs[1]).parent.mkdir(parents=True, exist_ok=True)
    Path(dirs[1]).write_text("not a directory")
    lm = open_manager(dirs)
    assert lm.offline_dirs == [dirs[1]]
    assert lm.offline_log_directory_count == 1
    desc = {d.path: d for d in lm.describe_dirs()}
    assert desc[dirs[1]].error is ErrorCode.KAFKA_STORAGE_ERROR
    assert (desc[dirs[1]].total_bytes, desc[dirs[1]].usable_bytes) == (-1, -1)
    for p in range(4):
        log = lm.get_or_create_log(TopicPartition("t", p))
        assert log.logdir_path != dirs[1]
        log.append(build_batch([b"ok"]))


def test_no_usable_directory_refuses_start(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(StorageStartupError, match="no log directory is usable"):
        LogManager.open(
            make_settings([str(tmp_path / "f")]), cluster_id="c", node_id=1, background=False
        )


def test_two_live_copies_of_a_partition_refuse_start_naming_both(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    log = lm.get_or_create_log(TopicPartition("dup", 0))
    log.append(build_batch([b"x"]))
    lm.close()
    other = next(d for d in dirs if d != log.logdir_path)
    shutil.copytree(log.dir_path, os.path.join(other, "dup-0"))
    with pytest.raises(StorageStartupError, match="two live replicas of partition dup-0") as info:
        LogManager.open(make_settings(dirs), cluster_id="test-cluster", node_id=1, background=False)
    assert log.dir_path in str(info.value)
    assert os.path.join(other, "dup-0") in str(info.value)


def test_describe_dirs_reports_sizes_lags_and_filters(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    a = lm.get_or_create_log(TopicPartition("a", 0))
    b = lm.get_or_create_log(TopicPartition("b", 0))
    a.append(build_batch([b"1", b"2"]))
    b.append(build_batch([b"3"]))
    described = lm.describe_dirs()
    assert [d.path for d in described] == dirs
    parts = {p.tp: p for d in described for p in d.partitions}
    assert parts[TopicPartition("a", 0)].size == a.size > 0
    assert parts[TopicPartition("a", 0)].offset_lag == 0
    assert not parts[TopicPartition("a", 0)].is_future
    assert all(d.total_bytes >= d.usable_bytes > 0 for d in described)
    only = lm.describe_dirs(dirs=[b.logdir_path], topics={TopicPartition("b", 0)})
    assert [(d.path, [p.tp for p in d.partitions]) for d in only] == [
        (b.logdir_path, [TopicPartition("b", 0)])
    ]


def test_change_replica_dir_follows_kafkas_error_table(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    tp = TopicPartition("m", 0)
    assert lm.change_replica_dir(tp, "/not/configured") is ErrorCode.LOG_DIR_NOT_FOUND
    # Not hosted yet: remembered, and used when the replica is created.
    assert lm.change_replica_dir(tp, dirs[2]) is ErrorCode.REPLICA_NOT_AVAILABLE
    log = lm.get_or_create_log(tp)
    assert log.logdir_path == dirs[2]
    assert lm.change_replica_dir(tp, dirs[2]) is ErrorCode.NONE  # already there
    assert lm.moves_in_progress() == []


def test_move_copies_every_byte_and_swaps_the_same_log_object(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs, **{"log.segment.bytes": 4096})
    tp = TopicPartition("mv", 3)
    log = lm.get_or_create_log(tp)
    for i in range(100):
        log.append(build_batch([bytes([i % 256]) * 100, b"k"]))
    log.high_watermark = 150
    before = log.read(0, 1 << 30)
    whole = b"".join(log.read(o, 1 << 30).records for o in _segment_starts(log))
    source = log.dir_path
    dest = next(d for d in dirs if d != log.logdir_path)
    moved: list[tuple[TopicPartition, str]] = []
    lm.add_move_listener(lambda t, d: moved.append((t, d)))
    assert lm.change_replica_dir(tp, dest) is ErrorCode.NONE
    assert lm.await_idle(30)
    assert moved == [(tp, dest)]
    assert lm.move_status() == []
    assert lm.get_log(tp) is log
    assert log.logdir_path == dest
    assert log.dir_path == os.path.join(dest, "mv-3")
    assert not os.path.exists(source)
    assert b"".join(log.read(o, 1 << 30).records for o in _segment_starts(log)) == whole
    assert log.read(0, 1 << 30).records == before.records
    assert (log.high_watermark, log.log_end_offset) == (150, 200)
    assert [n for d in dirs for n in os.listdir(d) if n.endswith(("-future", "-delete"))] == []
    assert log.append(build_batch([b"after"])).base_offset == 200


def _segment_starts(log: object) -> list[int]:
    from spindle.broker.storage.log import Log

    assert isinstance(log, Log)
    return [s.base_offset for s in log.segment_states()]


def test_second_broker_on_the_same_dirs_refuses_to_start(
    open_manager: Opener, dirs: list[str]
) -> None:
    open_manager(dirs)
    with pytest.raises(StorageStartupError, match="every log directory failed"):
        LogManager.open(make_settings(dirs), cluster_id="test-cluster", node_id=1, background=False)


def test_corrupt_checkpoint_takes_only_its_dir_offline_at_start(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    for p, d in enumerate(dirs):
        lm.change_replica_dir(TopicPartition("cp", p), d)
        lm.get_or_create_log(TopicPartition("cp", p)).append(build_batch([b"x"]))
    lm.close()
    Path(dirs[0], "recovery-point-offset-checkpoint").write_text("0\n5\ncp 0 1\n")
    again = open_manager(dirs)
    assert again.offline_dirs == [dirs[0]]
    assert again.get_log(TopicPartition("cp", 0)) is None
    for p in (1, 2):
        log = again.get_log(TopicPartition("cp", p))
        assert log is not None
        assert log.append(build_batch([b"y"])).base_offset == 1


def test_a_failed_dir_is_handled_once_on_the_failure_handler_thread_under_the_manager_lock(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    seen: list[tuple[str, str]] = []
    lm.add_offline_listener(lambda path: seen.append((path, threading.current_thread().name)))
    start = threading.Barrier(9)
    raised: list[KafkaStorageError] = []

    def hit_io_error() -> None:
        start.wait()
        try:
            with lm.failures.guard(dirs[0], "append"):
                raise OSError(errno.EIO, "Input/output error")
        except KafkaStorageError as exc:
            raised.append(exc)

    threads = [threading.Thread(target=hit_io_error, name=f"io-{i}") for i in range(8)]
    with lm._lock:  # the handler needs this lock: it cannot run while the test holds it
        for t in threads:
            t.start()
        start.wait()
        threads[0].join(timeout=0.2)
        assert lm.offline_dirs == [dirs[0]]  # offline at once ...
        assert seen == []  # ... handled only under the manager lock ...
        assert all(t.is_alive() for t in threads)  # ... and the reporters wait for it
    for t in threads:
        t.join()
    assert seen == [(dirs[0], "log-dir-failure-handler")]
    assert len(raised) == 8
