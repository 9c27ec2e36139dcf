"""Apache Kafka's own tools against a real Spindle broker, for groups and the admin gaps:
console consumer with and without ``--group``, ``kafka-consumer-groups`` (list, describe,
reset to earliest, delete offsets, delete), the offsets formatter reading ``__consumer_offsets``,
``kafka-consumer-perf-test``, ``kafka-configs`` (alter a broker, describe ``--all``),
``kafka-delete-records`` and ``kafka-get-offsets --time -3`` (MAX_TIMESTAMP). The broker runs
with Kafka's defaults for groups (50 offsets partitions, 3 s initial rebalance delay)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from .conftest import CACHE_BIN, Broker, Etcd, make_broker

pytestmark = pytest.mark.slow

TOPIC = "cli-groups"
LINES = [f"line {i}" for i in range(30)]


def _tool(name: str) -> str:
    found = shutil.which(name) or str(CACHE_BIN / name)
    if not Path(found).exists():
        pytest.fail(f"{name} is missing: run ./dev sync (scripts/install.d/30-kafka-jars.sh)")
    return found


def run(*args: str, stdin: str | None = None, timeout: float = 120) -> str:
    proc = subprocess.run(
        [_tool(args[0]), *args[1:]], input=stdin, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, (
        f"{args[0]} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    return proc.stdout


@pytest.fixture(scope="module")
def cli_broker(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Broker]:
    broker = make_broker(tmp_path_factory.mktemp("groups-cli"), etcd, dirs=2)
    broker.start()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(TOPIC, 3, 1)])
    admin.close()
    run(
        "kafka-console-producer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        TOPIC,
        stdin="\n".join(LINES) + "\n",
    )
    yield broker
    broker.stop()


def consume(broker: Broker, *extra: str, count: int = len(LINES)) -> list[str]:
    out = run(
        "kafka-console-consumer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        TOPIC,
        "--from-beginning",
        "--max-messages",
        str(count),
        "--timeout-ms",
        "60000",
        *extra,
    )
    return out.splitlines()


def groups(broker: Broker, *args: str) -> str:
    return run("kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, *args)


def describe_offsets(broker: Broker, group: str) -> dict[int, tuple[int, int]]:
    """partition -> (CURRENT-OFFSET, LOG-END-OFFSET) from ``--describe``."""
    out = groups(broker, "--describe", "--group", group)
    rows = [line.split() for line in out.splitlines() if line.startswith(group + " ")]
    return {int(r[2]): (int(r[3]) if r[3] != "-" else -1, int(r[4])) for r in rows}


def test_console_consumer_without_group_reads_everything(cli_broker: Broker) -> None:
    assert sorted(consume(cli_broker)) == sorted(LINES)


def test_consumer_groups_list_describe_reset_and_delete(cli_broker: Broker) -> None:
    assert sorted(consume(cli_broker, "--group", "cli-g")) == sorted(LINES)
    assert "cli-g" in groups(cli_broker, "--list").split()
    described = describe_offsets(cli_broker, "cli-g")
    assert sorted(described) == [0, 1, 2]
    assert all(cur == end for cur, end in described.values())
    assert sum(end for _, end in described.values()) == len(LINES)
    out = groups(
        cli_broker,
        "--reset-offsets",
        "--group",
        "cli-g",
        "--topic",
        TOPIC,
        "--to-earliest",
        "--execute",
    )
    assert re.search(rf"cli-g\s+{TOPIC}\s+0\s+0", out), out
    assert all(cur == 0 for cur, _ in describe_offsets(cli_broker, "cli-g").values())
    # Reset to the start: the group reads everything again.
    assert sorted(consume(cli_broker, "--group", "cli-g")) == sorted(LINES)
    # OffsetDelete: the group is empty again, so its offsets of the topic may go.
    out = groups(cli_broker, "--delete-offsets", "--group", "cli-g", "--topic", TOPIC)
    assert out.count("Successful") == 3, out
    assert describe_offsets(cli_broker, "cli-g") == {}
    out = groups(cli_broker, "--delete", "--group", "cli-g")
    assert "Deletion of requested consumer groups ('cli-g') was successful" in out
    assert "cli-g" not in groups(cli_broker, "--list").split()


def read_consumer_offsets(broker: Broker, formatter: str) -> list[dict[str, Any]]:
    """``__consumer_offsets`` through Kafka's own formatter (it prints one JSON object per
    record, key and value decoded with Kafka's schemas)."""
    out = run(
        "kafka-console-consumer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        "__consumer_offsets",
        "--from-beginning",
        "--formatter",
        f"org.apache.kafka.tools.consumer.{formatter}",
        "--consumer-property",
        "exclude.internal.topics=false",
        "--timeout-ms",
        "8000",
    )
    decoder = json.JSONDecoder()
    records, pos = [], 0
    text = out.strip()
    while pos < len(text):
        obj, end = decoder.raw_decode(text, pos)
        records.append(obj)
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return records


def test_kafkas_formatters_read_consumer_offsets(cli_broker: Broker) -> None:
    consume(cli_broker, "--group", "formatted")
    offsets = [
        r
        for r in read_consumer_offsets(cli_broker, "OffsetsMessageFormatter")
        if r["key"]["data"]["group"] == "formatted"
    ]
    latest = {r["key"]["data"]["partition"]: r["value"]["data"]["offset"] for r in offsets}
    assert sorted(latest) == [0, 1, 2]
    assert sum(latest.values()) == len(LINES)
    assert {r["key"]["version"] for r in offsets} == {1}
    assert {r["value"]["version"] for r in offsets} == {3}
    metas = [
        r
        for r in read_consumer_offsets(cli_broker, "GroupMetadataMessageFormatter")
        if r["key"]["data"]["group"] == "formatted"
    ]
    assert metas, "no group metadata record for the console consumer's group"
    assert metas[0]["value"]["data"]["protocolType"] == "consumer"
    assert metas[0]["value"]["data"]["generation"] >= 1


def test_consumer_perf_test_consumes_with_a_group(cli_broker: Broker) -> None:
    out = run(
        "kafka-consumer-perf-test",
        "--bootstrap-server",
        cli_broker.bootstrap,
        "--topic",
        TOPIC,
        "--messages",
        str(len(LINES)),
        "--timeout",
        "60000",
    )
    header, values = out.strip().splitlines()[-2:]
    row = dict(zip([h.strip() for h in header.split(",")], values.split(","), strict=False))
    assert int(row["data.consumed.in.nMsg"]) == len(LINES)


def test_kafka_configs_alters_a_broker_and_describes_all_defaults(cli_broker: Broker) -> None:
    base = ["kafka-configs", "--bootstrap-server", cli_broker.bootstrap]
    out = run(
        *base,
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--alter",
        "--add-config",
        "replica.alter.log.dirs.io.max.bytes.per.second=1000000",
    )
    assert "Completed updating config for broker 1" in out
    out = run(*base, "--entity-type", "brokers", "--entity-name", "1", "--describe")
    assert "replica.alter.log.dirs.io.max.bytes.per.second=1000000" in out
    out = run(*base, "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all")
    assert "log.retention.ms=604800000" in out
    assert "offsets.topic.num.partitions=50" in out
    out = run(*base, "--entity-type", "topics", "--entity-name", TOPIC, "--describe", "--all")
    assert "retention.ms=604800000 sensitive=false synonyms={}" in out
    assert "cleanup.policy=delete" in out


def test_delete_records_and_get_offsets_max_timestamp(cli_broker: Broker, tmp_path: Path) -> None:
    producer = KafkaProducer(bootstrap_servers=cli_broker.bootstrap)
    for i in range(5):
        producer.send("delete-me", f"r{i}".encode(), partition=0)
    for ts in (1_000, 9_000, 5_000):
        producer.send("max-ts", b"x", partition=0, timestamp_ms=ts)
        producer.flush()
    producer.close()
    plan = tmp_path / "delete.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "delete-me", "partition": 0, "offset": 3}]}
        )
    )
    out = run(
        "kafka-delete-records",
        "--bootstrap-server",
        cli_broker.bootstrap,
        "--offset-json-file",
        str(plan),
    )
    assert re.search(r"partition: delete-me-0\s+low_watermark: 3", out), out
    offsets = ["kafka-get-offsets", "--bootstrap-server", cli_broker.bootstrap, "--topic"]
    assert "delete-me:0:3" in run(*offsets, "delete-me", "--time", "-2").split()
    # MAX_TIMESTAMP: the record with the largest timestamp (9000) is offset 1.
    assert "max-ts:0:1" in run(*offsets, "max-ts", "--time", "-3").split()
