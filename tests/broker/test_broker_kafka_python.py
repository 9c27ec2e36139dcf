"""kafka-python against a real Spindle broker process: topics, produce with every acks setting
and compression codec, consume by assign + seek."""

from __future__ import annotations

import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from .conftest import Broker


def _topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def admin(module_broker: Broker):  # type: ignore[no-untyped-def]
    client = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap, client_id="test-admin")
    yield client
    client.close()


def _consume_all(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        consumer_timeout_ms=10_000,
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list[bytes] = []
        for msg in consumer:
            out.append(msg.value)
            if len(out) >= count:
                break
        return out
    finally:
        consumer.close()


def test_created_topics_are_listed_and_duplicates_refused(admin, module_broker: Broker) -> None:  # type: ignore[no-untyped-def]
    name = _topic()
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)])
    assert name in admin.list_topics()
    from kafka.errors import TopicAlreadyExistsError

    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    admin.delete_topics([name])
    assert name not in admin.list_topics()


@pytest.mark.parametrize(
    ("acks", "compression"),
    [(0, None), (1, None), ("all", None), (1, "gzip"), (1, "lz4"), ("all", "zstd")],
)
def test_produced_batches_come_back_in_order_by_assign_and_seek(
    admin,
    module_broker: Broker,
    acks: object,
    compression: str | None,  # type: ignore[no-untyped-def]
) -> None:
    name = _topic()
    admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])
    producer = KafkaProducer(
        bootstrap_servers=module_broker.bootstrap,
        acks=acks,
        compression_type=compression,
        linger_ms=5,
        batch_size=16384,
    )
    sent = [f"{compression}-{acks}-{i}".encode() * 3 for i in range(500)]
    futures = [producer.send(name, value=v, partition=1) for v in sent]
    producer.flush()
    if acks != 0:
        offsets = [f.get(timeout=10).offset for f in futures]
        assert offsets == list(range(len(sent)))
    producer.close()
    assert _consume_all(module_broker.bootstrap, name, 1, len(sent)) == sent
