"""acks=all against min.insync.replicas on three real brokers: with the ISR whole a produce is
acknowledged; when a follower dies after the append, the controller drops it from the ISR and
the leader answers NOT_ENOUGH_REPLICAS_AFTER_APPEND; with the ISR below the minimum a produce
is refused before any append (NOT_ENOUGH_REPLICAS)."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from spindle.broker.common.errors import ErrorCode
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.model import TopicState
from spindle.broker.controller.store import MetadataStore
from spindle.broker.records.batch import build_batch

from ..conftest import Etcd, make_broker
from ..wire import Wire


def _topic(etcd_url: str, prefix: str) -> TopicState | None:
    async def read() -> TopicState | None:
        client = EtcdClient([etcd_url])
        try:
            store = MetadataStore(client, prefix=prefix)
            await store.load()
            return store.topics.get("strict")
        finally:
            await client.close()

    return asyncio.run(read())


def _produce_all(port: int, value: bytes) -> int:
    """One acks=all Produce with a 20 s timeout; its partition error code."""
    req = ProduceRequest[9](
        transactional_id=None,
        acks=-1,
        timeout_ms=20_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="strict",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=0, records=build_batch([value])
                    )
                ],
            )
        ],
    )
    with Wire(port, timeout=40) as wire:
        resp = wire.call(req, ProduceResponse)
    return int(resp.responses[0].partition_responses[0].error_code)


def test_acks_all_honours_min_insync_replicas(tmp_path: Path, etcd: Etcd) -> None:
    prefix = f"/test/{uuid.uuid4().hex}"
    extra = {
        "spindle.etcd.prefix": prefix,
        "spindle.controller.mode": "elected",
        "spindle.controller.lease.ms": "2000",
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
    }
    brokers = {n: make_broker(tmp_path / f"b{n}", etcd, node_id=n, extra=extra) for n in (1, 2, 3)}
    try:
        for b in brokers.values():
            b.start()
        deadline = time.monotonic() + 30
        while True:
            admin = KafkaAdminClient(bootstrap_servers=[b.bootstrap for b in brokers.values()])
            try:
                admin.create_topics(
                    [
                        NewTopic(
                            "strict",
                            num_partitions=-1,
                            replication_factor=-1,
                            replica_assignments={0: [1, 2, 3]},
                            topic_configs={"min.insync.replicas": "3"},
                        )
                    ]
                )
                break
            except Exception:
                assert time.monotonic() < deadline, "the cluster never accepted the topic"
                time.sleep(0.2)
            finally:
                admin.close()
        deadline = time.monotonic() + 30
        while (
            not all(
                (Path(d) / "strict-0").is_dir() for n in (2, 3) for d in brokers[n].log_dirs[:1]
            )
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert _produce_all(brokers[1].port, b"whole") == ErrorCode.NONE
        brokers[3].kill()
        # Appended while 3 is still in the ISR; committed only once the controller drops it.
        assert (
            _produce_all(brokers[1].port, b"shrinking")
            == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        )
        topic = _topic(etcd.url, prefix)
        assert topic is not None
        assert topic.partitions[0].isr == [1, 2]
        assert _produce_all(brokers[1].port, b"refused") == ErrorCode.NOT_ENOUGH_REPLICAS
    finally:
        for b in brokers.values():
            b.stop()
