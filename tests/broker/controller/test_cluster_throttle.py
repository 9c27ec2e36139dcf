"""Replication throttles with real broker processes and Kafka's own tools.

* A cross-broker ``kafka-reassign-partitions --execute --throttle`` completes (no speed is
  asserted here; ``bench/throttle_accuracy.py`` measures the rate), and ``--verify`` lifts the
  throttles from every broker and topic.
* Kafka's ``reassign_cancel`` system test: a throttled reassignment of partitions carrying
  data is cancelled with ``--cancel`` while an acks=all idempotent producer keeps writing; the
  original assignment is restored, the adding replicas are deleted from their broker, the
  throttles are removed, and a verifying consumer finds every acknowledged message. The
  throttle is what keeps the reassignment in progress long enough to be cancelled: unthrottled
  it would finish in well under a second.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.store import MetadataStore

from ..cluster import Cluster, running
from ..conftest import Etcd
from ..verifiable import VerifiableProducer, verify_consumed

pytestmark = pytest.mark.slow

PRELOAD_MB = 8
VALUE = b"p" * 100_000
THROTTLE_KEYS = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Cluster]:
    with running(tmp_path_factory.mktemp("throttle"), etcd, nodes=3, dirs=2) as started:
        yield started


def _preload(cluster: Cluster, topic: str, partitions: int) -> None:
    """``PRELOAD_MB`` of 100 kB records into every partition (acks=all)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all"})
    for p in range(partitions):
        for i in range(PRELOAD_MB * 10):
            producer.produce(topic, VALUE, key=f"preload/{p}-{i}".encode(), partition=p)
            producer.poll(0)
    assert producer.flush(120) == 0


def _plan(topic: str, targets: dict[int, list[int]]) -> dict[str, object]:
    return {
        "version": 1,
        "partitions": [
            {"topic": topic, "partition": p, "replicas": replicas}
            for p, replicas in sorted(targets.items())
        ],
    }


def _throttle_configs(cluster: Cluster, topic: str) -> list[str]:
    """Every throttle config still set, on any broker or on ``topic`` (kafka-configs)."""
    found = []
    for n in sorted(cluster.alive()):
        out = cluster.tool(
            "kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", str(n)
        )
        found += [f"broker {n}: {k}" for k in THROTTLE_KEYS if k in out]
    out = cluster.tool(
        "kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", topic
    )
    found += [f"topic {topic}: {k}" for k in THROTTLE_KEYS if k in out]
    return found


def _stored_throttles(cluster: Cluster, topic: str) -> list[str]:
    """Every throttle config the cluster metadata in etcd still holds (brokers, ``topic``)."""

    async def read() -> list[str]:
        client = EtcdClient([cluster.etcd_url])
        try:
            store = MetadataStore(client, prefix=cluster.prefix)
            await store.load()
            found = [
                f"broker {scope or 'default'}: {k}"
                for scope, configs in store.broker_configs.items()
                for k in configs
                if k in THROTTLE_KEYS
            ]
            configs = store.topics[topic].configs
            return found + [f"topic {topic}: {k}" for k in configs if k in THROTTLE_KEYS]
        finally:
            await client.close()

    return asyncio.run(read())


def test_throttled_reassignment_completes_and_verify_lifts_the_throttles(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.create_topic("moved", "--replica-assignment", "1")
    cluster.wait_isr_whole("moved")
    _preload(cluster, "moved", 1)
    started = time.monotonic()
    out = cluster.reassign(
        _plan("moved", {0: [2]}), tmp_path / "plan.json", "--throttle", "4000000"
    )
    elapsed = time.monotonic() - started
    print(f"{PRELOAD_MB} MB reassigned at --throttle 4000000 in {elapsed:.1f} s")
    assert "Clearing broker-level throttles" in out, out
    assert "Clearing topic-level throttles" in out, out
    assert cluster.describe("moved") == {0: (2, [2], [2])}
    assert _throttle_configs(cluster, "moved") == []


def test_cancelled_throttled_reassignment_restores_the_original_replicas_without_loss(
    cluster: Cluster, tmp_path: Path
) -> None:
    topic = "cancelled"
    cluster.create_topic(topic, "--replica-assignment", "1:2,2:1")
    cluster.wait_isr_whole(topic)
    _preload(cluster, topic, 2)
    producer = VerifiableProducer(cluster.bootstrap(), topic, range(2)).start()
    producer.wait_acked(100)
    plan_file = tmp_path / "cancel.json"
    plan_file.write_text(json.dumps(_plan(topic, {0: [1, 3], 1: [2, 3]})))
    args = ("kafka-reassign-partitions", "--reassignment-json-file", str(plan_file))
    # 2 x 8 MB to copy to broker 3 at 200 kB/s: in progress for ~80 s.
    out = cluster.tool(*args, "--execute", "--throttle", "200000")
    assert "Successfully started partition reassignments" in out, out
    moving = cluster.wait(
        "broker 3 to start fetching",
        lambda v: all(p.adding == [3] for p in v.topics[topic].partitions.values()),
    )
    assert {
        p: (part.replicas, part.removing) for p, part in moving.topics[topic].partitions.items()
    } == {
        0: ([1, 3, 2], [2]),
        1: ([2, 3, 1], [1]),
    }
    assert _stored_throttles(cluster, topic) != []  # (etcd: no JVM start-up before --cancel)
    producer.wait_acked(100)  # producing goes on during the throttled move
    out = cluster.tool(*args, "--cancel")
    assert "Successfully cancelled partition reassignments" in out, out
    view = cluster.wait(
        "the original assignment back",
        lambda v: all(not p.adding and not p.removing for p in v.topics[topic].partitions.values()),
    )
    parts = view.topics[topic].partitions
    assert (parts[0].replicas, parts[1].replicas) == ([1, 2], [2, 1])
    assert all(3 not in p.isr for p in parts.values())
    assert cluster.describe(topic) == {0: (1, [1, 2], [1, 2]), 1: (2, [2, 1], [2, 1])}
    # The adding replicas are deleted from broker 3; the throttles are gone.
    deadline = time.monotonic() + 30
    while any(
        (Path(d) / f"{topic}-{p}").exists() for d in cluster.brokers[3].log_dirs for p in (0, 1)
    ):
        assert time.monotonic() < deadline, "broker 3 kept its cancelled replicas"
        time.sleep(0.2)
    assert _throttle_configs(cluster, topic) == []
    assert _stored_throttles(cluster, topic) == []
    producer.wait_acked(100)
    result = verify_consumed(cluster.bootstrap(), producer)
    print(result)
    result.check()


def test_raising_the_rate_at_run_time_lets_a_stalled_reassignment_finish(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.create_topic("stalled", "--replica-assignment", "2")
    cluster.wait_isr_whole("stalled")
    _preload(cluster, "stalled", 1)
    plan_file = tmp_path / "stalled.json"
    plan_file.write_text(json.dumps(_plan("stalled", {0: [3]})))
    args = ("kafka-reassign-partitions", "--reassignment-json-file", str(plan_file))
    # 1 kB/s: one fetch gets through, then the 8 MB would take over two hours.
    assert "Successfully started" in cluster.tool(*args, "--execute", "--throttle", "1000")
    cluster.wait(
        "broker 3 to start fetching",
        lambda v: v.topics["stalled"].partitions[0].adding == [3],
    )
    assert "is still in progress" in cluster.tool(*args, "--verify", "--preserve-throttles")
    # The operator raises the rate with kafka-configs: no restart, the move finishes.
    for node in (2, 3):
        cluster.tool(
            "kafka-configs",
            "--alter",
            "--entity-type",
            "brokers",
            "--entity-name",
            str(node),
            "--add-config",
            "leader.replication.throttled.rate=200000000,"
            "follower.replication.throttled.rate=200000000",
        )
    view = cluster.wait(
        "the reassignment to finish at the raised rate",
        lambda v: v.topics["stalled"].partitions[0].replicas == [3],
        timeout_s=120,
    )
    assert view.topics["stalled"].partitions[0].isr == [3]
    out = cluster.tool(*args, "--verify")
    assert "Clearing broker-level throttles" in out, out
    assert _stored_throttles(cluster, "stalled") == []
