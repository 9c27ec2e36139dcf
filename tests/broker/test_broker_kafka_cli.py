"""Apache Kafka's own command-line tools (jars from Maven Central, see
scripts/install.d/30-kafka-jars.sh) against a real Spindle broker: console producer and
consumer, ``kafka-log-dirs --describe`` and a throttled log-dir-only ``kafka-reassign-partitions``
plan executed and verified until completed."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from .conftest import CACHE_BIN, Broker

pytestmark = pytest.mark.slow


def _tool(name: str) -> str:
    found = shutil.which(name) or str(CACHE_BIN / name)
    if not Path(found).exists():
        pytest.fail(f"{name} is missing: run ./dev sync (scripts/install.d/30-kafka-jars.sh)")
    return found


def _run(*args: str, stdin: str | None = None, timeout: float = 120) -> str:
    proc = subprocess.run(
        [_tool(args[0]), *args[1:]], input=stdin, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, (
        f"{args[0]} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    return proc.stdout


def _reassign(broker: Broker, plan_file: Path, *action: str) -> str:
    """``kafka-reassign-partitions`` with a plan file against ``broker``; its output."""
    return _run(
        "kafka-reassign-partitions",
        "--bootstrap-server",
        broker.bootstrap,
        "--reassignment-json-file",
        str(plan_file),
        *action,
    )


def _log_dirs_json(broker: Broker, *extra: str) -> dict:  # type: ignore[type-arg]
    out = _run("kafka-log-dirs", "--bootstrap-server", broker.bootstrap, "--describe", *extra)
    return json.loads(out.strip().splitlines()[-1])


def test_console_producer_to_console_consumer_round_trip(module_broker: Broker) -> None:
    lines = [f"line {i} from the console producer" for i in range(50)]
    _run(
        "kafka-console-producer",
        "--bootstrap-server",
        module_broker.bootstrap,
        "--topic",
        "console",
        stdin="\n".join(lines) + "\n",
    )
    out = _run(
        "kafka-console-consumer",
        "--bootstrap-server",
        module_broker.bootstrap,
        "--topic",
        "console",
        "--partition",
        "0",
        "--offset",
        "earliest",
        "--max-messages",
        str(len(lines)),
        "--timeout-ms",
        "30000",
    )
    assert out.splitlines() == lines


def test_log_dirs_describe_json_matches_the_broker(module_broker: Broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    admin.create_topics([NewTopic("described", num_partitions=3, replication_factor=1)])
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap)
    for p in range(3):
        for _ in range(10 * (p + 1)):
            producer.send("described", b"x" * 100, partition=p)
    producer.flush()
    producer.close()
    truth = {}
    for d in admin.describe_log_dirs()[0]["log_dirs"]:
        for t in d["topics"]:
            for p in t["partitions"]:
                if t["name"] == "described":
                    truth[f"described-{p['partition_index']}"] = (d["log_dir"], p["partition_size"])
    admin.close()
    doc = _log_dirs_json(module_broker, "--topic-list", "described")
    assert doc["version"] == 1
    [entry] = doc["brokers"]
    assert entry["broker"] == module_broker.node_id
    assert sorted(d["logDir"] for d in entry["logDirs"]) == sorted(module_broker.log_dirs)
    seen = {}
    for d in entry["logDirs"]:
        assert d["error"] is None
        for p in d["partitions"]:
            assert p["isFuture"] is False
            assert p["offsetLag"] == 0
            seen[p["partition"]] = (d["logDir"], p["size"])
    assert seen == truth
    assert all(size > 0 for _, size in seen.values())


def test_reassign_log_dirs_plan_with_throttle_executes_and_verifies(
    module_broker: Broker, tmp_path: Path
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    admin.create_topics([NewTopic("moving", num_partitions=4, replication_factor=1)])
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap, linger_ms=5)
    for i in range(4000):
        producer.send("moving", b"y" * 500, partition=i % 4)
    producer.flush()
    producer.close()
    before = {
        p["partition"]: d["logDir"]
        for d in _log_dirs_json(module_broker, "--topic-list", "moving")["brokers"][0]["logDirs"]
        for p in d["partitions"]
    }
    dirs = module_broker.log_dirs
    target = {
        f"moving-{p}": dirs[(dirs.index(before[f"moving-{p}"]) + 1) % len(dirs)] for p in range(4)
    }
    plan = {
        "version": 1,
        "partitions": [
            {
                "topic": "moving",
                "partition": p,
                "replicas": [module_broker.node_id],
                "log_dirs": [target[f"moving-{p}"]],
            }
            for p in range(4)
        ],
    }
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    out = _reassign(
        module_broker, plan_file, "--execute", "--replica-alter-log-dirs-throttle", "2000000"
    )
    assert "The replica-alter-dir throttle limit was set to 2000000 B/s" in out
    assert "Successfully started moving log directory" in out
    deadline = time.monotonic() + 180
    while True:
        out = _reassign(module_broker, plan_file, "--verify")
        if out.count("completed successfully") == 4:
            break
        assert "failed" not in out.lower(), out
        assert time.monotonic() < deadline, out
        time.sleep(1)
    assert "Clearing broker-level throttles" in out
    after = {
        p["partition"]: d["logDir"]
        for d in _log_dirs_json(module_broker, "--topic-list", "moving")["brokers"][0]["logDirs"]
        for p in d["partitions"]
    }
    assert after == target
    configs = admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, str(module_broker.node_id))]
    )
    assert "replica.alter.log.dirs.io.max.bytes.per.second" not in repr(configs)
    admin.close()


def test_reassign_cancel_stops_a_throttled_dir_move_and_keeps_the_original_dir(
    module_broker: Broker, tmp_path: Path
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    admin.create_topics([NewTopic("cancelled", num_partitions=1, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap, linger_ms=5)
    for _ in range(10_000):
        producer.send("cancelled", b"z" * 1000, partition=0)
    producer.flush()
    producer.close()

    def placement() -> dict[tuple[str, bool], str]:
        doc = _log_dirs_json(module_broker, "--topic-list", "cancelled")
        return {
            (p["partition"], p["isFuture"]): d["logDir"]
            for d in doc["brokers"][0]["logDirs"]
            for p in d["partitions"]
        }

    [source] = placement().values()
    dest = next(d for d in module_broker.log_dirs if d != source)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {
                        "topic": "cancelled",
                        "partition": 0,
                        "replicas": [module_broker.node_id],
                        "log_dirs": [dest],
                    }
                ],
            }
        )
    )
    # 10 MB at 100 kB/s cannot finish before the cancel.
    _reassign(module_broker, plan_file, "--execute", "--replica-alter-log-dirs-throttle", "100000")
    assert placement() == {("cancelled-0", False): source, ("cancelled-0", True): dest}
    out = _reassign(module_broker, plan_file, "--cancel")
    assert "Clearing broker-level throttles" in out
    deadline = time.monotonic() + 60
    while placement() != {("cancelled-0", False): source}:
        assert time.monotonic() < deadline, placement()
        time.sleep(0.5)
