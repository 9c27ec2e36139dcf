"""librdkafka (confluent-kafka) and aiokafka against a real broker, idempotent-producer sequence
rules on the wire, and CreatePartitions."""

from __future__ import annotations

import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTP
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.protocol.producer import (
    ProduceResponse,
)
from spindle.broker.common.errors import ErrorCode
from spindle.broker.records.batch import build_batch

from .conftest import Broker
from .wire import Wire, init_producer_id, produce_batch_request


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _ck_create(bootstrap: str, topic: str, partitions: int) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    ).values():
        fut.result(30)
    return admin


def test_confluent_idempotent_producer_and_assign_consumer_round_trip(
    module_broker: Broker,
) -> None:
    topic = _name("ck")
    _ck_create(module_broker.bootstrap, topic, 2)
    producer = Producer(
        {
            "bootstrap.servers": module_broker.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "lz4",
            "linger.ms": 5,
        }
    )
    delivered: list[tuple[int, int]] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    sent = [f"value-{i}".encode() for i in range(2000)]
    for i, v in enumerate(sent):
        producer.produce(topic, value=v, partition=i % 2, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors
    assert sorted(o for p, o in delivered if p == 0) == list(range(1000))
    consumer = Consumer(
        {
            "bootstrap.servers": module_broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([CkTP(topic, 0, 0), CkTP(topic, 1, 0)])
    got: dict[int, list[bytes]] = {0: [], 1: []}
    while len(got[0]) + len(got[1]) < len(sent):
        msg = consumer.poll(10)
        assert msg is not None, "consumer timed out"
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF
            continue
        got[msg.partition()].append(msg.value())
    consumer.close()
    assert got[0] == sent[0::2]
    assert got[1] == sent[1::2]


def test_create_partitions_adds_writable_partitions(module_broker: Broker) -> None:
    topic = _name("grow")
    admin = _ck_create(module_broker.bootstrap, topic, 1)
    for fut in admin.create_partitions([NewPartitions(topic, 4)]).values():
        fut.result(30)
    md = admin.list_topics(topic, timeout=10)
    assert sorted(md.topics[topic].partitions) == [0, 1, 2, 3]
    shrink = admin.create_partitions([NewPartitions(topic, 2)])
    err = next(iter(shrink.values())).exception(30)
    assert err is not None
    assert err.args[0].code() == KafkaError.INVALID_PARTITIONS
    producer = Producer({"bootstrap.servers": module_broker.bootstrap})
    producer.produce(topic, value=b"in-new-partition", partition=3)
    assert producer.flush(30) == 0


async def test_aiokafka_round_trip(module_broker: Broker) -> None:
    topic = _name("aio")
    _ck_create(module_broker.bootstrap, topic, 1)
    producer = AIOKafkaProducer(bootstrap_servers=module_broker.bootstrap, compression_type="gzip")
    await producer.start()
    try:
        for i in range(300):
            await producer.send(topic, f"aio-{i}".encode(), partition=0)
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=module_broker.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = AioTP(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list[bytes] = []
        while len(got) < 300:
            batch = await consumer.getmany(tp, timeout_ms=10_000)
            assert batch, "aiokafka consumer timed out"
            got += [m.value for m in batch[tp]]
    finally:
        await consumer.stop()
    assert got == [f"aio-{i}".encode() for i in range(300)]


def test_idempotent_sequences_drop_duplicates_and_refuse_gaps(module_broker: Broker) -> None:
    topic = _name("seq")
    _ck_create(module_broker.bootstrap, topic, 1)
    with Wire(module_broker.port) as wire:
        init = init_producer_id(wire)
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch

        def produce(seq: int, n: int) -> tuple[int, int]:
            batch = build_batch(
                [b"v"] * n, producer_id=pid, producer_epoch=epoch, base_sequence=seq
            )
            req = produce_batch_request(topic, 0, batch, acks=-1)
            part = wire.call(req, ProduceResponse).responses[0].partition_responses[0]
            return part.error_code, part.base_offset

        assert produce(0, 5) == (0, 0)
        assert produce(5, 5) == (0, 5)
        assert produce(5, 5) == (0, 5)  # a retried batch: same offsets, not written again
        assert produce(20, 1)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(10, 1) == (0, 10)
