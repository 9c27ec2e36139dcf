"""The operator's snapshot builder: DescribeLogDirs and metadata in, the planner's snapshot out.
Every built snapshot goes through the planner's own ``parse_snapshot``, so "the format the
planner accepts" is checked by the planner, not restated here."""

from __future__ import annotations

from typing import Any

import pytest
from spindle.operator.snapshot import (
    BrokerReport,
    LogDirReport,
    PartitionReport,
    SnapshotBuildError,
    brokers_from_admin,
    build_snapshot,
    partitions_from_admin,
)
from spindle.rebalance.input.model import OFFLINE, parse_snapshot

GB = 1 << 30
STORAGE_ERROR = 56  # Kafka's KAFKA_STORAGE_ERROR


def _dir(path: str, replicas: dict[tuple[str, int], int] | None = None, **kw: Any) -> LogDirReport:
    kw.setdefault("total_bytes", 10 * GB)
    kw.setdefault("usable_bytes", 8 * GB)
    return LogDirReport(path=path, replicas=replicas or {}, **kw)


def _offline(path: str) -> LogDirReport:
    return LogDirReport(path=path, error_code=STORAGE_ERROR, total_bytes=-1, usable_bytes=-1)


def _two_brokers() -> tuple[list[BrokerReport], list[PartitionReport]]:
    brokers = [
        BrokerReport(
            id=2,
            rack="b",
            log_dirs=[_dir("/d1", {("t", 0): 700}), _dir("/d0", {("t", 1): 500})],
        ),
        BrokerReport(
            id=1,
            rack="a",
            log_dirs=[_dir("/d0", {("t", 0): 1000, ("t", 1): 480}), _dir("/d1")],
        ),
    ]
    parts = [
        PartitionReport(topic="t", partition=1, replicas=[2, 1], leader=2),
        PartitionReport(topic="t", partition=0, replicas=[1, 2], leader=1),
    ]
    return brokers, parts


def test_reports_become_a_snapshot_the_planner_accepts_in_a_canonical_order() -> None:
    brokers, parts = _two_brokers()
    doc = build_snapshot(brokers, parts, directory_ids={(1, "/d0"): "AAAAAAAAAAAAAAAAAAAAAA"})
    assert doc["version"] == 1
    assert [b["id"] for b in doc["brokers"]] == [1, 2]
    assert doc["brokers"][0] == {
        "id": 1,
        "rack": "a",
        "logDirs": [
            {
                "path": "/d0",
                "directoryId": "AAAAAAAAAAAAAAAAAAAAAA",
                "state": "Active",
                "totalBytes": 10 * GB,
                "usableBytes": 8 * GB,
            },
            {"path": "/d1", "state": "Active", "totalBytes": 10 * GB, "usableBytes": 8 * GB},
        ],
    }
    # Replica order and leader from the metadata; the largest replica size is the partition's.
    assert doc["partitions"] == [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "leader": 1,
         "logDirs": ["/d0", "/d1"], "sizeBytes": 1000},
        {"topic": "t", "partition": 1, "replicas": [2, 1], "leader": 2,
         "logDirs": ["/d0", "/d0"], "sizeBytes": 500},
    ]  # fmt: skip
    cluster = parse_snapshot(doc)
    assert cluster.n_replicas == 4
    assert cluster.replica_bytes_per_dir().tolist() == [1500, 0, 500, 1000]
    # The same reports in another order give the same document.
    assert build_snapshot(brokers[::-1], parts[::-1], directory_ids={(1, "/d0"): "A" * 22}) == doc


def test_storage_error_dir_is_offline_with_minus_one_bytes_and_empty_dir_is_kept() -> None:
    brokers = [
        BrokerReport(
            id=1,
            rack=None,
            log_dirs=[_dir("/a", {("t", 0): 10}), _offline("/b"), _dir("/c")],
        )
    ]
    doc = build_snapshot(brokers, [PartitionReport(topic="t", partition=0, replicas=[1])])
    dirs = {d["path"]: d for d in doc["brokers"][0]["logDirs"]}
    assert dirs["/b"] == {"path": "/b", "state": "Offline", "totalBytes": -1, "usableBytes": -1}
    assert dirs["/c"]["state"] == "Active"
    cluster = parse_snapshot(doc)
    assert cluster.dir_state.tolist()[1] == OFFLINE
    assert cluster.replica_bytes_per_dir().tolist() == [10, 0, 0]
    # The broker's storage error wins over the operator's state for that directory.
    again = build_snapshot(
        brokers,
        [PartitionReport(topic="t", partition=0, replicas=[1])],
        dir_states={(1, "/b"): "Cordoned", (1, "/c"): "Draining"},
    )
    states = [d["state"] for d in again["brokers"][0]["logDirs"]]
    assert states == ["Active", "Offline", "Draining"]
    parse_snapshot(again)


def test_replica_the_broker_does_not_list_lives_on_its_only_offline_dir() -> None:
    brokers = [
        BrokerReport(id=1, rack="a", log_dirs=[_dir("/a", {("t", 0): 300}), _offline("/b")]),
        BrokerReport(id=2, rack="b", log_dirs=[_dir("/a", {("t", 0): 290})]),
    ]
    # t-1 only lived on the failed disk: no size is known any more.
    parts = [
        PartitionReport(topic="t", partition=0, replicas=[2, 1], leader=2),
        PartitionReport(topic="t", partition=1, replicas=[1], leader=-1),
    ]
    doc = build_snapshot(brokers, parts)
    assert [(p["logDirs"], p["sizeBytes"], p["leader"]) for p in doc["partitions"]] == [
        (["/a", "/a"], 300, 2),
        (["/b"], 0, -1),
    ]
    cluster = parse_snapshot(doc)
    assert cluster.dir_state[cluster.rep_dir[2]] == OFFLINE


def test_several_offline_dirs_need_the_controllers_word_and_get_it_checked() -> None:
    brokers = [BrokerReport(id=1, rack=None, log_dirs=[_dir("/a"), _offline("/b"), _offline("/c")])]
    parts = [PartitionReport(topic="t", partition=0, replicas=[1])]
    with pytest.raises(SnapshotBuildError, match=r"2 Offline log dirs \['/b', '/c'\]"):
        build_snapshot(brokers, parts)
    doc = build_snapshot(brokers, parts, offline_replica_dirs={("t", 0, 1): "/c"})
    assert doc["partitions"][0]["logDirs"] == ["/c"]
    parse_snapshot(doc)
    with pytest.raises(SnapshotBuildError, match=r"names '/a' on broker 1, which is not one of"):
        build_snapshot(brokers, parts, offline_replica_dirs={("t", 0, 1): "/a"})
    with pytest.raises(SnapshotBuildError, match=r"names '/z' on broker 1.*its dirs: \['/a'"):
        build_snapshot(brokers, parts, offline_replica_dirs={("t", 0, 1): "/z"})
    with pytest.raises(SnapshotBuildError, match="t-0 has no replica on broker 7"):
        build_snapshot(brokers, parts, offline_replica_dirs={("t", 0, 7): "/b"})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dir_states": {(1, "/nope"): "Draining"}}, r"dir_states: broker 1 reported no log dir '/nope' \(its dirs: \['/a', '/b'\]\)"),
        ({"dir_states": {(9, "/a"): "Cordoned"}}, r"dir_states: broker 9 reported no log dir '/a' \(its dirs: \[\]\)"),
        ({"directory_ids": {(1, "/c"): "x"}}, "directory_ids: broker 1 reported no log dir '/c'"),
        ({"dir_states": {(1, "/a"): "Empty"}}, r"state 'Empty' not in \('Active'"),
    ],
)  # fmt: skip
def test_state_for_an_unknown_dir_or_an_unknown_state_is_refused(
    kwargs: dict[str, Any], message: str
) -> None:
    brokers = [BrokerReport(id=1, rack=None, log_dirs=[_dir("/a", {("t", 0): 1}), _dir("/b")])]
    with pytest.raises(SnapshotBuildError, match=message):
        build_snapshot(brokers, [PartitionReport(topic="t", partition=0, replicas=[1])], **kwargs)


@pytest.mark.parametrize(
    ("brokers", "parts", "message"),
    [
        # The metadata puts a replica on a broker that described no directories.
        ([BrokerReport(id=1, rack=None, log_dirs=[_dir("/a", {("t", 0): 1})])],
         [PartitionReport(topic="t", partition=0, replicas=[1, 3])],
         r"t-0: replica on broker 3, which reported no log dirs \(reported: \[1\]\)"),
        # All dirs online and none lists the replica: not created yet, or moved meanwhile.
        ([BrokerReport(id=1, rack=None, log_dirs=[_dir("/a"), _dir("/b")])],
         [PartitionReport(topic="t", partition=0, replicas=[1])],
         "t-0: broker 1 holds the replica per the metadata but no log dir reports it"),
        # Two current copies on one broker: which one is the replica?
        ([BrokerReport(id=1, rack=None, log_dirs=[_dir("/a", {("t", 0): 1}), _dir("/b", {("t", 0): 1})])],
         [PartitionReport(topic="t", partition=0, replicas=[1])],
         "t-0: broker 1 reports a current replica in both '/a' and '/b'"),
        ([BrokerReport(id=1, rack=None, log_dirs=[_dir("/a", {("t", 0): 1}), _dir("/a")])],
         [PartitionReport(topic="t", partition=0, replicas=[1])],
         "broker 1: log dir '/a' listed twice"),
        ([BrokerReport(id=1, rack=None, log_dirs=[_dir("/a", {("t", 0): 1}, total_bytes=-1)])],
         [PartitionReport(topic="t", partition=0, replicas=[1])],
         "dir /a: no totalBytes reported"),
        ([BrokerReport(id=1, rack=None, log_dirs=[_dir("/a", {("t", 0): 1}, error_code=29)])],
         [PartitionReport(topic="t", partition=0, replicas=[1])],
         "dir /a: DescribeLogDirs error code 29"),
        ([BrokerReport(id=1, rack=None, log_dirs=[_dir("/a", {("t", 0): 1})])],
         [PartitionReport(topic="t", partition=0, replicas=[1]),
          PartitionReport(topic="t", partition=0, replicas=[1])],
         "partition t-0 appears twice"),
        ([BrokerReport(id=1, rack=None, log_dirs=[])], [], "broker 1: DescribeLogDirs listed no log dirs"),
    ],
)  # fmt: skip
def test_reports_that_do_not_add_up_are_refused_naming_what_and_why(
    brokers: list[BrokerReport], parts: list[PartitionReport], message: str
) -> None:
    with pytest.raises(SnapshotBuildError, match=message):
        build_snapshot(brokers, parts)


def test_future_replica_does_not_move_the_replica_and_unknown_topics_are_left_out() -> None:
    brokers = [
        BrokerReport(
            id=1,
            rack=None,
            log_dirs=[
                _dir("/a", {("t", 0): 900, ("deleted", 0): 50}),
                _dir("/b", futures={("t", 0): 400}),
            ],
        )
    ]
    doc = build_snapshot(brokers, [PartitionReport(topic="t", partition=0, replicas=[1])])
    assert [(p["topic"], p["logDirs"], p["sizeBytes"]) for p in doc["partitions"]] == [
        ("t", ["/a"], 900)
    ]
    parse_snapshot(doc)


def test_kafka_python_admin_answers_convert_to_reports() -> None:
    # The shapes kafka-python 3.0 returns (describe_cluster, describe_log_dirs, describe_topics).
    cluster = {
        "brokers": [
            {"broker_id": 1, "host": "127.0.0.1", "port": 9092, "rack": "r1"},
            {"broker_id": 2, "host": "127.0.0.1", "port": 9093, "rack": None},
        ],
        "cluster_id": "x",
        "controller_id": 1,
    }
    log_dirs = [
        {"broker": 1, "log_dirs": [
            {"error_code": 0, "log_dir": "/d0", "total_bytes": 100, "usable_bytes": 60,
             "topics": [{"name": "t", "partitions": [
                 {"partition_index": 0, "partition_size": 40, "offset_lag": 0, "is_future_key": False},
                 {"partition_index": 1, "partition_size": 5, "offset_lag": 3, "is_future_key": True}]}]},
            {"error_code": STORAGE_ERROR, "log_dir": "/d1", "total_bytes": -1, "usable_bytes": -1,
             "topics": []}]},
        {"broker": 2, "log_dirs": [
            {"error_code": 0, "log_dir": "/d0", "total_bytes": 100, "usable_bytes": 90,
             "topics": [{"name": "t", "partitions": [
                 {"partition_index": 1, "partition_size": 10, "offset_lag": 0, "is_future_key": False}]}]}]},
    ]  # fmt: skip
    topics = [
        {"name": "t", "error_code": 0, "is_internal": False, "partitions": [
            {"partition_index": 0, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1],
             "offline_replicas": [], "error_code": 0},
            {"partition_index": 1, "leader_id": 2, "replica_nodes": [2, 1], "isr_nodes": [2],
             "offline_replicas": [1], "error_code": 0}]},
    ]  # fmt: skip
    brokers = brokers_from_admin(cluster, log_dirs)
    assert [(b.id, b.rack) for b in brokers] == [(1, "r1"), (2, None)]
    assert brokers[0].log_dirs[0].replicas == {("t", 0): 40}
    assert brokers[0].log_dirs[0].futures == {("t", 1): 5}
    doc = build_snapshot(brokers, partitions_from_admin(topics))
    assert [(p["replicas"], p["logDirs"], p["sizeBytes"]) for p in doc["partitions"]] == [
        ([1], ["/d0"], 40),
        ([2, 1], ["/d0", "/d1"], 10),
    ]
    parse_snapshot(doc)
    with pytest.raises(SnapshotBuildError, match=r"brokers \[2\] are in the metadata but sent"):
        brokers_from_admin(cluster, log_dirs[:1])
    with pytest.raises(SnapshotBuildError, match="topic 'gone': metadata error code 3"):
        partitions_from_admin([{"name": "gone", "error_code": 3, "partitions": []}])
