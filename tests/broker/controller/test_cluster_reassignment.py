"""Reassignment across brokers (KIP-455) in a three-broker cluster on a real etcd: new replicas
are created on their brokers, fetch from the leader, join the ISR, and the reassignment then
completes -- removed replicas are deleted and leadership leaves them -- with every acked record
readable from the new replicas alone. A reassignment that cannot complete is listed and can be
cancelled back to its original replicas (KIP-236)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTP
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError as ClientKafkaError
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.model import TopicState
from spindle.broker.controller.store import MetadataStore

from ..conftest import Broker, Etcd, make_broker

RECORDS = 30


class Three:
    def __init__(self, brokers: dict[int, Broker], etcd_url: str, prefix: str) -> None:
        self.brokers, self.etcd_url, self.prefix = brokers, etcd_url, prefix

    def _store(self) -> MetadataStore:
        async def read() -> MetadataStore:
            client = EtcdClient([self.etcd_url])
            try:
                store = MetadataStore(client, prefix=self.prefix)
                await store.load()
                return store
            finally:
                await client.close()

        return asyncio.run(read())

    def topic(self, name: str) -> TopicState | None:
        return self._store().topics.get(name)

    def live(self) -> set[int]:
        return set(self._store().sessions)

    def bootstrap(self, alive: set[int]) -> list[str]:
        return [self.brokers[b].bootstrap for b in sorted(alive)]


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Three]:
    base = tmp_path_factory.mktemp("reassign")
    prefix = f"/test/{uuid.uuid4().hex}"
    extra = {
        "spindle.etcd.prefix": prefix,
        "spindle.controller.mode": "elected",
        "spindle.controller.lease.ms": "2000",
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
    }
    brokers = {n: make_broker(base / f"b{n}", etcd, node_id=n, extra=extra) for n in (1, 2, 3)}
    for b in brokers.values():
        b.start()
    try:
        yield Three(brokers, etcd.url, prefix)
    finally:
        for b in brokers.values():
            b.stop()


def _wait(what: str, check: object, timeout_s: float = 45) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _admin(three: Three, alive: set[int]) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=three.bootstrap(alive))


def _values(three: Three, alive: set[int], tp: KafkaTP, count: int) -> list[str]:
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


def test_reassignment_moves_replicas_and_data_to_other_brokers(three: Three) -> None:
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
        topic = three.topic("moving")
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


def test_stuck_reassignment_is_listed_and_cancelled_back(three: Three) -> None:
    # With broker 1 down, a reassignment adding it cannot complete.
    three.brokers[1].kill()
    _wait("broker 1's session to end", lambda: three.live() == {2, 3})
    admin = _admin(three, {2, 3})
    tp = KafkaTP("moving", 0)
    assert admin.alter_partition_reassignments({tp: [2, 3, 1]}) == {tp: None}
    listed = admin.list_partition_reassignments()
    assert listed[tp]["replicas"] == [2, 3, 1]
    assert listed[tp]["adding_replicas"] == [1]
    assert listed[tp]["removing_replicas"] == []
    assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
    topic = three.topic("moving")
    assert topic is not None
    part = topic.partitions[0]
    assert (part.replicas, part.adding, part.removing) == ([2, 3], [], [])
    assert sorted(part.isr) == [2, 3]
    assert admin.list_partition_reassignments() == {}
    admin.close()
