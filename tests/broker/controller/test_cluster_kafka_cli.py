"""Apache Kafka's own tools against a three-broker Spindle cluster (elected controller):
``kafka-topics --create/--describe``, a throttled cross-broker ``kafka-reassign-partitions``
executed and verified until complete while the data stays readable, and
``kafka-leader-election --election-type preferred``."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..cluster import running
from ..conftest import Broker, Etcd
from ..test_broker_kafka_cli import _run

pytestmark = pytest.mark.slow

TOPIC = "tools"
PARTITIONS = 4
LINES = [f"tool line {i}" for i in range(40)]


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[dict[int, Broker]]:
    with running(tmp_path_factory.mktemp("cli-cluster"), etcd, nodes=3) as cluster:
        yield cluster.brokers


def _bootstrap(brokers: dict[int, Broker]) -> str:
    return ",".join(b.bootstrap for b in brokers.values())


def _describe(brokers: dict[int, Broker]) -> dict[int, tuple[int, list[int], list[int]]]:
    """``kafka-topics --describe``: partition -> (leader, replicas, isr)."""
    out = _run(
        "kafka-topics", "--bootstrap-server", _bootstrap(brokers), "--describe", "--topic", TOPIC
    )
    rows = {}
    for m in re.finditer(
        r"Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]*)", out
    ):
        ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
        rows[int(m.group(1))] = (int(m.group(2)), ints(m.group(3)), ints(m.group(4)))
    assert len(rows) == PARTITIONS, out
    return rows


def _consume_all(brokers: dict[int, Broker]) -> list[str]:
    out = _run(
        "kafka-console-consumer",
        "--bootstrap-server",
        _bootstrap(brokers),
        "--topic",
        TOPIC,
        "--from-beginning",
        "--max-messages",
        str(len(LINES)),
        "--timeout-ms",
        "60000",
    )
    return sorted(line for line in out.splitlines() if line)


def test_create_produce_and_describe(brokers: dict[int, Broker]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            _run(
                "kafka-topics",
                "--bootstrap-server",
                _bootstrap(brokers),
                "--create",
                "--topic",
                TOPIC,
                "--partitions",
                str(PARTITIONS),
                "--replication-factor",
                "2",
            )
            break
        except AssertionError:
            assert time.monotonic() < deadline, "the cluster never accepted the topic"
            time.sleep(0.5)
    _run(
        "kafka-console-producer",
        "--bootstrap-server",
        _bootstrap(brokers),
        "--topic",
        TOPIC,
        stdin="\n".join(LINES) + "\n",
    )
    rows = _describe(brokers)
    for leader, replicas, isr in rows.values():
        assert len(replicas) == 2
        assert leader == replicas[0]
        assert sorted(isr) == sorted(replicas)
    assert _consume_all(brokers) == sorted(LINES)


def test_throttled_cross_broker_reassignment_executes_and_verifies(
    brokers: dict[int, Broker], tmp_path: Path
) -> None:
    before = _describe(brokers)
    # Move every partition to the two brokers it is not fully on now, leader first.
    plan = {
        "version": 1,
        "partitions": [
            {
                "topic": TOPIC,
                "partition": p,
                "replicas": [b for b in (1, 2, 3) if b != replicas[0]],
                "log_dirs": ["any", "any"],
            }
            for p, (_l, replicas, _i) in sorted(before.items())
        ],
    }
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    common = (
        "kafka-reassign-partitions",
        "--bootstrap-server",
        _bootstrap(brokers),
        "--reassignment-json-file",
        str(plan_file),
    )
    out = _run(*common, "--execute", "--throttle", "50000000")
    assert "Successfully started partition reassignment" in out, out
    deadline = time.monotonic() + 90
    while True:
        out = _run(*common, "--verify")
        if out.count("is completed") >= PARTITIONS:
            break
        assert time.monotonic() < deadline, f"reassignment never completed:\n{out}"
        time.sleep(1)
    # --verify lifts the throttles --execute set.
    assert "Clearing broker-level throttles" in out, out
    assert "Clearing topic-level throttles" in out, out
    after = _describe(brokers)
    for p, (leader, replicas, isr) in after.items():
        assert replicas == plan["partitions"][p]["replicas"]
        assert sorted(isr) == sorted(replicas)
        assert leader in replicas
    assert _consume_all(brokers) == sorted(LINES)


def test_preferred_leader_election_puts_first_replicas_in_charge(
    brokers: dict[int, Broker], tmp_path: Path
) -> None:
    # Reversing each replica list completes at once and leaves every leader second in line.
    current = _describe(brokers)
    plan = {
        "version": 1,
        "partitions": [
            {"topic": TOPIC, "partition": p, "replicas": list(reversed(replicas))}
            for p, (_l, replicas, _i) in sorted(current.items())
        ],
    }
    plan_file = tmp_path / "reorder.json"
    plan_file.write_text(json.dumps(plan))
    common = (
        "kafka-reassign-partitions",
        "--bootstrap-server",
        _bootstrap(brokers),
        "--reassignment-json-file",
        str(plan_file),
    )
    _run(*common, "--execute")
    assert _run(*common, "--verify").count("is completed") == PARTITIONS
    assert all(leader != replicas[0] for leader, replicas, _i in _describe(brokers).values())
    out = _run(
        "kafka-leader-election",
        "--bootstrap-server",
        _bootstrap(brokers),
        "--election-type",
        "preferred",
        "--all-topic-partitions",
    )
    assert "Successfully completed leader election (PREFERRED)" in out, out
    for leader, replicas, _isr in _describe(brokers).values():
        assert leader == replicas[0]
