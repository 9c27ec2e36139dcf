"""Client quotas through Apache Kafka's own ``kafka-configs`` (AlterClientQuotas and
DescribeClientQuotas) against a real broker: set, describe, default entities, remove, and
Kafka's refusals."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from .conftest import CACHE_BIN, Broker

pytestmark = pytest.mark.slow


def _configs(broker: Broker, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("kafka-configs") or str(CACHE_BIN / "kafka-configs")
    if not Path(tool).exists():
        pytest.fail("kafka-configs is missing: run ./dev sync (scripts/install.d/30-kafka-jars.sh)")
    proc = subprocess.run(
        [tool, "--bootstrap-server", broker.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if ok:
        assert proc.returncode == 0, f"kafka-configs failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_kafka_configs_sets_describes_and_removes_client_quotas(module_broker: Broker) -> None:
    _configs(
        module_broker,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-name",
        "billing",
        "--add-config",
        "producer_byte_rate=1048576,consumer_byte_rate=2097152",
    )
    _configs(
        module_broker,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-default",
        "--add-config",
        "request_percentage=50",
    )
    out = _configs(
        module_broker,
        "--describe",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-name",
        "billing",
    ).stdout
    assert "producer_byte_rate=1048576.0" in out
    assert "consumer_byte_rate=2097152.0" in out
    out = _configs(
        module_broker, "--describe", "--entity-type", "clients", "--entity-default"
    ).stdout
    assert "request_percentage=50.0" in out

    _configs(
        module_broker,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-name",
        "billing",
        "--delete-config",
        "producer_byte_rate",
    )
    out = _configs(
        module_broker,
        "--describe",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-name",
        "billing",
    ).stdout
    assert "producer_byte_rate" not in out
    assert "consumer_byte_rate=2097152.0" in out


def test_an_unknown_quota_key_is_refused_and_nothing_is_stored(module_broker: Broker) -> None:
    proc = _configs(
        module_broker,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        "typo",
        "--add-config",
        "producer_byte_rat=10",
        ok=False,
    )
    assert proc.returncode != 0
    assert "producer_byte_rat" in proc.stdout + proc.stderr
    out = _configs(
        module_broker, "--describe", "--entity-type", "clients", "--entity-name", "typo"
    ).stdout
    assert "producer_byte" not in out


def _throttle_max(metrics: dict, group: str) -> float:  # type: ignore[type-arg]
    """kafka-python's ``throttle-time-max`` of the client (-inf or 0 if never throttled)."""
    value = metrics.get(group, {}).get("throttle-time-max")
    assert value is not None, f"no throttle-time-max among {group}: {sorted(metrics)}"
    return float(value)


def test_a_client_over_its_quota_is_throttled_and_loses_nothing(module_broker: Broker) -> None:
    """producer_byte_rate and consumer_byte_rate on client ids: their answers carry
    throttle_time_ms (kafka-python's throttle-time-max), an unlimited client's
    do not, and every record still arrives once."""
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    for client, key in (
        ("slow-producer", "producer_byte_rate"),
        ("slow-consumer", "consumer_byte_rate"),
    ):
        _configs(
            module_broker,
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            client,
            "--add-config",
            f"{key}=20480",
        )
    payload = b"x" * 1024
    slow = KafkaProducer(
        bootstrap_servers=module_broker.bootstrap,
        client_id="slow-producer",
        linger_ms=5,
        batch_size=16384,
    )
    fast = KafkaProducer(bootstrap_servers=module_broker.bootstrap, client_id="fast-producer")
    try:
        for i in range(300):
            slow.send(topic, payload, key=str(i).encode())
        slow.flush(timeout=120)
        fast.send(topic, payload).get(timeout=30)
        assert _throttle_max(slow.metrics(), "producer-metrics") > 0
        assert _throttle_max(fast.metrics(), "producer-metrics") <= 0
    finally:
        slow.close()
        fast.close()

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=module_broker.bootstrap,
        client_id="slow-consumer",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=60_000,
    )
    try:
        seen = 0
        for _ in consumer:
            seen += 1
            if seen == 301:
                break
        assert seen == 301
        assert _throttle_max(consumer.metrics(), "consumer-metrics") > 0
    finally:
        consumer.close()
