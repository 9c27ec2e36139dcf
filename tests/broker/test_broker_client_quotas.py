"""Client quotas through Apache Kafka's own ``kafka-configs`` (AlterClientQuotas and
DescribeClientQuotas) against a real broker: set, describe, default entities, remove, and
Kafka's refusals."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

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
