"""ListOffsets by timestamp answers the first *record* at or after the time, as Kafka does,
not the first offset of the batch that holds it (asked through Kafka's own GetOffsetShell and
through a client's ``offsets_for_times``, of Spindle and of Apache Kafka in the same run)."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from ..broker.conftest import Broker
from ..broker.test_broker_kafka_cli import _run as kafka_tool
from .conftest import Kafka

# A few minutes ago, whole seconds: records much older would be deleted by either broker's
# time retention (7 days) while the test runs.
T0 = (int(time.time()) - 300) * 1000
RECORDS = 30
ASKED = {
    "before the first record": T0 - 60_000,
    "the first record's time": T0,
    "record 10's time": T0 + 10_000,
    "record 10's time + 0.5 s": T0 + 10_500,
    "just before the last record": T0 + 28_999,
    "the second batch's first record": T0 + 29_500,
    "after the last record": T0 + 99_000,
}
ASKED_THROUGH_THE_SHELL = ("record 10's time + 0.5 s", "the second batch's first record")


def _expected(ts: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after ``ts``: records 0-29 at T0 + i s in
    one batch, records 30-31 at T0 + 40 s and T0 + 41 s in another."""
    times = [T0 + i * 1000 for i in range(RECORDS)] + [T0 + 40_000, T0 + 41_000]
    return next(((o, t) for o, t in enumerate(times) if t >= ts), None)


def _fill(bootstrap: str, topic: str, compression: str | None) -> None:
    """One topic, one partition, two batches: 30 records a second apart, then two."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        linger_ms=5_000,  # every send below is in the first batch; flush() sends it
        batch_size=1 << 20,
        compression_type=compression,
        acks=1,
    )
    try:
        for i in range(RECORDS):
            producer.send(topic, b"r%d" % i, partition=0, timestamp_ms=T0 + i * 1000)
        producer.flush()
        for ts in (T0 + 40_000, T0 + 41_000):
            producer.send(topic, b"late", partition=0, timestamp_ms=ts)
        producer.flush()
    finally:
        producer.close()


def _answers(bootstrap: str, topic: str) -> dict[str, object]:
    """What a client's offsets_for_times and Kafka's GetOffsetShell say for each ASKED time."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    tp = TopicPartition(topic, 0)
    try:
        out: dict[str, object] = {}
        for what, ts in ASKED.items():
            found = consumer.offsets_for_times({tp: ts})[tp]
            shell = None
            if what in ASKED_THROUGH_THE_SHELL:  # a JVM each: only where the bug was
                shell = kafka_tool(
                    "kafka-get-offsets", "--bootstrap-server", bootstrap, "--topic", topic,
                    "--time", str(ts),
                ).strip()  # fmt: skip
            out[what] = (None if found is None else (found.offset, found.timestamp), shell)
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("compression", [None, "gzip"], ids=["uncompressed", "gzip"])
def test_a_time_inside_a_batch_answers_the_record_at_or_after_it_as_kafka_does(
    apache_kafka: Kafka, spindle: Broker, compression: str | None
) -> None:
    topic = f"times-{compression or 'none'}-{uuid.uuid4().hex[:6]}"
    _fill(spindle.bootstrap, topic, compression)
    _fill(apache_kafka.bootstrap, topic, compression)
    ours = _answers(spindle.bootstrap, topic)
    kafkas = _answers(apache_kafka.bootstrap, topic)
    assert ours == kafkas
    for what, ts in ASKED.items():
        expected = _expected(ts)
        found, shell = ours[what]  # type: ignore[misc]
        assert found == expected, what
        if what in ASKED_THROUGH_THE_SHELL:  # GetOffsetShell prints TOPIC:PARTITION:OFFSET
            assert expected is not None
            assert shell == f"{topic}:0:{expected[0]}", what
