"""Reassignment across brokers (KIP-455) in a three-broker cluster on a real etcd: new replicas
are created on their brokers, fetch from the leader, join the ISR, and the reassignment then
completes -- removed replicas are deleted and leadership leaves them -- with every acked record
readable from the new replicas alone. A reassignment that cannot complete is listed and can be
cancelled back to its original replicas (KIP-236)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTP
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError as ClientKafkaError
from spindle.broker.controller.model import TopicState

from ..cluster import Cluster
from ..conftest import Etcd

RECORDS = 30


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("reassign"), etcd, nodes=3)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def _topic(three: Cluster, name: str) -> TopicState | None:
    return three.view().topics.get(name)


def _wait(what: str, check: object, timeout_s: float = 45) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _admin(three: Cluster, alive: set[int]) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=three.bootstrap(alive))


def _values(three: Cluster, alive: set[int], tp: KafkaTP, count: int) -> list[str]:
    consumer = KafkaConsumer(
        bootstrap_servers=three.bootstrap(alive),
        enable_auto_commit=False,
        consumer_timeout_ms=15_000,
    )
    consumer.assign([tp])
    consumer.seek_to_beginning()
    got = []
    for message in consumer:
        got.append(message.value.decode())
        if len(got) >= count:
            break
    consumer.close()
    return got


def test_reassignment_moves_replicas_and_data_to_other_brokers(three: Cluster) -> None:
    deadline = time.monotonic() + 30
    while True:  # accepted once every broker has registered and unfenced
        admin = _admin(three, {1, 2, 3})
        try:
            admin.create_topics(
                [
                    NewTopic(
                        "moving",
                        num_partitions=-1,
                        replication_factor=-1,
                        replica_assignments={0: [1], 1: [1, 2]},
                    )
                ]
            )
            break
        except ClientKafkaError:
            assert time.monotonic() < deadline, "the cluster never accepted the topic"
            time.sleep(0.2)
        finally:
            admin.close()
    producer = KafkaProducer(bootstrap_servers=three.bootstrap({1, 2, 3}), acks="all")
    for i in range(RECORDS):
        for p in (0, 1):
            producer.send("moving", f"{p}-{i}".encode(), partition=p)
    producer.flush()
    producer.close()

    admin = _admin(three, {1, 2, 3})
    result = admin.alter_partition_reassignments(
        {KafkaTP("moving", 0): [2, 3], KafkaTP("moving", 1): [3, 2]}
    )
    assert result == {KafkaTP("moving", 0): None, KafkaTP("moving", 1): None}

    def done() -> bool:
        topic = _topic(three, "moving")
        assert topic is not None
        parts = topic.partitions
        return (
            parts[0].replicas == [2, 3]
            and parts[1].replicas == [3, 2]
            and all(not p.adding and not p.removing for p in parts.values())
            and all(sorted(p.isr) == [2, 3] and p.leader in (2, 3) for p in parts.values())
        )

    _wait("both reassignments to complete", done)
    assert admin.list_partition_reassignments() == {}
    admin.close()
    # Broker 1 deleted its replicas once it was no longer assigned them.
    _wait(
        "broker 1 to delete its replicas",
        lambda: (
            not any(
                (Path(d) / f"moving-{p}").exists()
                for d in three.brokers[1].log_dirs
                for p in (0, 1)
            )
        ),
    )
    # Everything acked before the move is served by the new replicas (broker 1 has none).
    for p in (0, 1):
        got = _values(three, {2, 3}, KafkaTP("moving", p), RECORDS)
        assert got == [f"{p}-{i}" for i in range(RECORDS)]


def test_stuck_reassignment_is_listed_and_cancelled_back(three: Cluster) -> None:
    # With broker 1 down, a reassignment adding it cannot complete.
    three.brokers[1].kill()
    _wait("broker 1's session to end", lambda: three.view().live == {2, 3})
    admin = _admin(three, {2, 3})
    tp = KafkaTP("moving", 0)
    assert admin.alter_partition_reassignments({tp: [2, 3, 1]}) == {tp: None}
    listed = admin.list_partition_reassignments()
    assert listed[tp]["replicas"] == [2, 3, 1]
    assert listed[tp]["adding_replicas"] == [1]
    assert listed[tp]["removing_replicas"] == []
    assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
    topic = _topic(three, "moving")
    assert topic is not None
    part = topic.partitions[0]
    assert (part.replicas, part.adding, part.removing) == ([2, 3], [], [])
    assert sorted(part.isr) == [2, 3]
    assert admin.list_partition_reassignments() == {}
    admin.close()
