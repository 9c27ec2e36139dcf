"""auto.leader.rebalance.enable on three real brokers: after a failover moved leadership away
from a broker, the broker returns, catches up, rejoins the ISR, and the controller moves its
preferred partitions back to it without any request (leader.imbalance.check.interval.seconds
is 1 here; Kafka's default is 300)."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.model import TopicState
from spindle.broker.controller.store import MetadataStore

from ..conftest import Etcd, make_broker

PARTITIONS = 6


def _read(etcd_url: str, prefix: str) -> tuple[TopicState | None, set[int]]:
    async def read() -> tuple[TopicState | None, set[int]]:
        client = EtcdClient([etcd_url])
        try:
            store = MetadataStore(client, prefix=prefix)
            await store.load()
            live = {b for b, s in store.sessions.items() if not s.wants_fence}
            return store.topics.get("balanced"), live
        finally:
            await client.close()

    return asyncio.run(read())


def _wait(what: str, check: object, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_returning_broker_gets_its_preferred_leaderships_back(tmp_path: Path, etcd: Etcd) -> None:
    prefix = f"/test/{uuid.uuid4().hex}"
    extra = {
        "spindle.etcd.prefix": prefix,
        "spindle.controller.mode": "elected",
        "spindle.controller.lease.ms": "2000",
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
        "leader.imbalance.check.interval.seconds": "1",
    }
    brokers = {n: make_broker(tmp_path / f"b{n}", etcd, node_id=n, extra=extra) for n in (1, 2, 3)}
    try:
        for b in brokers.values():
            b.start()
        _wait("three unfenced brokers", lambda: _read(etcd.url, prefix)[1] == {1, 2, 3})
        admin = KafkaAdminClient(bootstrap_servers=[b.bootstrap for b in brokers.values()])
        admin.create_topics([NewTopic("balanced", num_partitions=PARTITIONS, replication_factor=3)])
        admin.close()
        _wait("the topic", lambda: _read(etcd.url, prefix)[0] is not None)
        topic, _ = _read(etcd.url, prefix)
        assert topic is not None
        preferred = {p.partition: p.replicas[0] for p in topic.partitions.values()}
        assert {p: part.leader for p, part in topic.partitions.items()} == preferred
        victim = 3
        brokers[victim].kill()

        def moved_away() -> bool:
            t, live = _read(etcd.url, prefix)
            return (
                t is not None
                and victim not in live
                and all(p.leader != victim for p in t.partitions.values())
            )

        _wait("leadership to leave the killed broker", moved_away)
        brokers[victim].start()

        def back_home() -> bool:
            t, _ = _read(etcd.url, prefix)
            return t is not None and all(
                p.leader == preferred[p.partition] and sorted(p.isr) == [1, 2, 3]
                for p in t.partitions.values()
            )

        _wait("the returning broker to lead its preferred partitions again", back_home)
    finally:
        for b in brokers.values():
            b.stop()
