"""Snapshot, goals and flags: bad input is refused with a message naming what and why."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from spindle.rebalance.generator import Shape, generate
from spindle.rebalance.input.model import Goals, SnapshotError, cluster_to_json, parse_snapshot
from spindle.rebalance.input.scope import Request, build_scope


def _doc() -> dict[str, Any]:
    return {
        "version": 1,
        "brokers": [
            {
                "id": 1,
                "rack": "a",
                "logDirs": [
                    {"path": "/d0", "state": "Active", "totalBytes": 1000, "usableBytes": 900},
                    {"path": "/d1", "state": "Active", "totalBytes": 1000, "usableBytes": 1000},
                ],
            },
            {
                "id": 2,
                "rack": "b",
                "logDirs": [
                    {"path": "/d0", "state": "Active", "totalBytes": 1000, "usableBytes": 900}
                ],
            },
        ],
        "partitions": [
            {
                "topic": "t",
                "partition": 0,
                "replicas": [1, 2],
                "leader": 1,
                "logDirs": ["/d0", "/d0"],
                "sizeBytes": 100,
            }
        ],
    }


def test_a_valid_snapshot_becomes_columns_with_external_bytes_kept() -> None:
    doc = _doc()
    doc["brokers"][0]["logDirs"][0]["usableBytes"] = 850  # 50 bytes of other files
    cluster = parse_snapshot(doc)
    assert cluster.n_brokers == 2
    assert cluster.n_dirs == 3
    assert cluster.n_replicas == 2
    assert cluster.rep_leader.tolist() == [True, False]
    assert cluster.dir_external().tolist() == [50, 0, 0]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(version=2), "version"),
        (lambda d: d["brokers"].append(copy.deepcopy(d["brokers"][0])), "appears twice"),
        (lambda d: d["brokers"][0]["logDirs"][0].update(state="Broken"), "state 'Broken'"),
        (lambda d: d["brokers"][0]["logDirs"][0].update(totalBytes=0), "totalBytes must be > 0"),
        (lambda d: d["brokers"][0]["logDirs"][0].update(usableBytes=2000), "usableBytes"),
        (lambda d: d["partitions"][0].update(replicas=[1, 1]), "appears twice in"),
        (lambda d: d["partitions"][0].update(replicas=[1, 3]), "unknown broker 3"),
        (lambda d: d["partitions"][0].update(logDirs=["/d0", "/nope"]), "no log dir '/nope'"),
        (lambda d: d["partitions"][0].update(logDirs=["/d0"]), "must match"),
        (lambda d: d["partitions"][0].update(leader=7), "leader 7 is not a replica"),
        (lambda d: d["partitions"][0].update(sizeBytes=-1), "sizeBytes"),
        (lambda d: d["partitions"].append(copy.deepcopy(d["partitions"][0])), "t-0 appears twice"),
    ],
)
def test_bad_snapshot_is_refused_naming_the_problem(mutate: Any, message: str) -> None:
    doc = _doc()
    mutate(doc)
    with pytest.raises(SnapshotError, match=message):
        parse_snapshot(doc)


def test_offline_dir_may_report_minus_one_bytes_as_describe_log_dirs_does() -> None:
    doc = _doc()
    doc["brokers"][0]["logDirs"][1].update(state="Offline", totalBytes=-1, usableBytes=-1)
    cluster = parse_snapshot(doc)
    assert int(cluster.dir_total[1]) == 0


def test_generated_cluster_survives_the_json_round_trip() -> None:
    cluster = generate(Shape(brokers=5, disks=3, replicas=200, offline_dirs=1, seed=3))
    doc = json.loads(json.dumps(cluster_to_json(cluster)))
    again = parse_snapshot(doc)
    assert again.rep_broker.tolist() == cluster.rep_broker.tolist()
    assert again.rep_dir.tolist() == cluster.rep_dir.tolist()
    assert again.rep_size.tolist() == cluster.rep_size.tolist()
    assert again.dir_external().tolist() == cluster.dir_external().tolist()
    assert again.dir_state.tolist() == cluster.dir_state.tolist()


def test_goals_file_rejects_unknown_keys_and_out_of_range_values() -> None:
    assert Goals.from_json({"capacityThreshold": 0.7}).capacity_threshold == 0.7
    with pytest.raises(SnapshotError, match="unknown key 'diskBalanse'"):
        Goals.from_json({"diskBalanse": 1.2})
    with pytest.raises(SnapshotError, match="capacityThreshold"):
        Goals.from_json({"capacityThreshold": 1.5})
    with pytest.raises(SnapshotError, match="must be a number"):
        Goals.from_json({"brokerBalance": "1.1"})


def test_mode_flags_that_do_not_apply_are_refused() -> None:
    cluster = parse_snapshot(_doc())
    with pytest.raises(SnapshotError, match="needs --brokers"):
        build_scope(cluster, Request(mode="remove-brokers"))
    with pytest.raises(SnapshotError, match="--dirs applies to remove-volumes"):
        build_scope(cluster, Request(mode="full", dirs=((1, "/d0"),)))
    with pytest.raises(SnapshotError, match="broker 1 has no log directory '/x'"):
        build_scope(cluster, Request(mode="remove-volumes", dirs=((1, "/x"),)))
    with pytest.raises(SnapshotError, match="no broker with id 9"):
        build_scope(cluster, Request(mode="remove-brokers", brokers=(9,)))
    with pytest.raises(SnapshotError, match="unknown mode"):
        build_scope(cluster, Request(mode="shuffle"))
