"""The planner's plan, executed for real: a Spindle broker with three log directories (each its
own small tmpfs, so the disks' figures are the data's), a skewed load produced with
kafka-python, the snapshot gathered from the live broker by the operator's builder, the plan
made by the ``spindle-rebalance`` console script, and Apache Kafka's own
``kafka-reassign-partitions --execute``/``--verify`` carrying it out. Afterwards DescribeLogDirs
shows every replica where the plan put it, every record produced is still there byte for byte,
and a fresh snapshot of the rebalanced broker plans nothing.

One broker: Spindle's brokers do not replicate between each other yet (``spindle.broker
.replication`` is empty; reassignments are one-broker, see the broker's handlers), so moves
across brokers cannot be executed; the mode proven here is ``intra-broker``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from controlplane.volumes import remount_read_only
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError
from spindle.operator.brokers import gather_snapshot, gather_snapshot_async
from spindle.rebalance.input.model import parse_snapshot

from ..broker.conftest import CACHE_BIN, Broker, Etcd, make_broker

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="gives each log dir its own tmpfs: needs root (CI runs as root)"
    ),
]

CLI = str(Path(sys.executable).with_name("spindle-rebalance"))
TOPIC = "skewed"
PARTITIONS = 9  # three per directory
HOT_RECORDS, COLD_RECORDS, RECORD_BYTES = 3000, 100, 1000


@contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[str]:
    path.mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)], check=True
    )
    try:
        yield str(path)
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=False)


def _kafka_tool(name: str) -> str:
    found = shutil.which(name) or str(CACHE_BIN / name)
    if not Path(found).exists():
        pytest.fail(f"{name} is missing: run ./dev sync (scripts/install.d/30-kafka-jars.sh)")
    return found


def _run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, (
        f"{cmd[0]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    )
    return done


def _plan(
    snapshot: dict[str, Any], workdir: Path, name: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the console script on a snapshot; the plan and the summary it wrote."""
    snap, plan, summary = (
        workdir / f"{name}-{what}.json" for what in ("snapshot", "plan", "summary")
    )
    snap.write_text(json.dumps(snapshot))
    _run([CLI, "plan", "--snapshot", str(snap), "--mode", "intra-broker", "--output", str(plan),
          "--summary", str(summary), "--no-spark"])  # fmt: skip
    return json.loads(plan.read_text()), json.loads(summary.read_text())


def _placement(snapshot: dict[str, Any]) -> dict[int, str]:
    return {p["partition"]: p["logDirs"][0] for p in snapshot["partitions"] if p["topic"] == TOPIC}


def _value(partition: int, seq: int) -> bytes:
    return f"{partition}:{seq}:".encode().ljust(RECORD_BYTES, b"x")


@pytest.fixture
def skewed_broker(tmp_path: Path, etcd: Etcd) -> Iterator[tuple[Broker, dict[int, int]]]:
    """A broker on three 32 MiB tmpfs dirs; the three partitions of one dir get 3 MB each, the
    six others 0.1 MB each. Yields the broker and the records produced per partition."""
    with ExitStack() as stack:
        dirs = [stack.enter_context(_tmpfs(tmp_path / f"disk{i}", "32m")) for i in range(3)]
        # Old copies of moved replicas go at once (default: after 60 s), so the disks' used
        # bytes settle as soon as the moves complete.
        broker = make_broker(
            tmp_path / "broker", etcd, log_dirs=dirs, extra={"file.delete.delay.ms": "0"}
        )
        broker.start()
        stack.callback(broker.stop)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
        admin.close()
        where = _placement(gather_snapshot(broker.bootstrap))
        hot_dir = where[0]
        assert sorted(where.values()) == sorted(dirs * 3), where  # fewest-logs placement
        counts = {p: HOT_RECORDS if where[p] == hot_dir else COLD_RECORDS for p in where}
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5, batch_size=256 * 1024
        )
        for p, n in counts.items():
            for seq in range(n):
                producer.send(TOPIC, _value(p, seq), partition=p)
        producer.flush()
        producer.close()
        yield broker, counts


def _reassign(broker: Broker, plan_file: Path, action: str) -> str:
    return _run([_kafka_tool("kafka-reassign-partitions"), "--bootstrap-server", broker.bootstrap,
                 "--reassignment-json-file", str(plan_file), action]).stdout  # fmt: skip


def _wait_for_deleted_logs(dirs: list[str]) -> None:
    """A moved replica's old copy is renamed ``-delete`` and removed asynchronously; until it is
    gone its bytes still count as used on the source disk."""
    deadline = time.monotonic() + 60
    while any(name.endswith("-delete") for d in dirs for name in os.listdir(d)):
        assert time.monotonic() < deadline, [os.listdir(d) for d in dirs]
        time.sleep(0.2)


def test_intra_broker_plan_executes_with_kafka_reassign_partitions_and_loses_nothing(
    skewed_broker: tuple[Broker, dict[int, int]], tmp_path: Path
) -> None:
    broker, counts = skewed_broker
    before = gather_snapshot(broker.bootstrap)
    parse_snapshot(before)
    where = _placement(before)
    hot = sorted(p for p, n in counts.items() if n == HOT_RECORDS)
    assert len({where[p] for p in hot}) == 1
    sizes = {p["partition"]: p["sizeBytes"] for p in before["partitions"]}
    assert all(sizes[p] >= HOT_RECORDS * RECORD_BYTES for p in hot)

    plan, summary = _plan(before, tmp_path, "before")
    # Balance needs two of the three hot partitions on the two other disks, one each.
    assert summary["before"]["diskUtilisationOverBrokerMean"]["met"] is False
    assert summary["moves"] == {"total": 2, "crossBroker": 0, "intraBroker": 2}
    assert summary["after"]["diskUtilisationOverBrokerMean"]["met"] is True
    assert summary["unmet"] == []
    moved = {e["partition"]: e["log_dirs"][0] for e in plan["partitions"]}
    assert all(
        e["topic"] == TOPIC and e["replicas"] == [broker.node_id] for e in plan["partitions"]
    )
    assert set(moved) < set(hot)
    assert sorted(moved.values()) == sorted(set(broker.log_dirs) - {where[hot[0]]})
    assert summary["bytesMoved"]["total"] == sum(sizes[p] for p in moved)

    plan_file = tmp_path / "before-plan.json"
    out = _reassign(broker, plan_file, "--execute")
    assert "Successfully started moving log directory" in out
    deadline = time.monotonic() + 120
    while True:
        out = _reassign(broker, plan_file, "--verify")
        if out.count("completed successfully") == len(moved):
            break
        assert "failed" not in out.lower(), out
        assert time.monotonic() < deadline, out
        time.sleep(0.5)

    # DescribeLogDirs shows each replica where the plan put it; the others did not move.
    _wait_for_deleted_logs(broker.log_dirs)
    after = gather_snapshot(broker.bootstrap)
    assert _placement(after) == {**where, **moved}
    assert {p["partition"]: p["sizeBytes"] for p in after["partitions"]} == sizes
    # What the disks now report used is what the plan's summary predicted (to within tmpfs's
    # page rounding and the index files).
    predicted = {d["path"]: d["bytesAfter"] for d in summary["perDir"]}
    measured = {
        d["path"]: d["totalBytes"] - d["usableBytes"] for d in after["brokers"][0]["logDirs"]
    }
    for path, used in measured.items():
        assert abs(used - predicted[path]) <= 0.02 * predicted[path], (path, used, predicted)

    # Every record produced is still there, in order, byte for byte.
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000
    )
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for msg in consumer:
        got[msg.partition].append(msg.value)
        if sum(map(len, got.values())) == sum(counts.values()):
            break
    end = consumer.end_offsets(tps)
    consumer.close()
    assert {tp.partition: off for tp, off in end.items()} == counts
    for p, n in counts.items():
        assert got[p] == [_value(p, seq) for seq in range(n)], f"partition {p}"

    # The kopf-side wrapper gathers the same document off the event loop.
    assert asyncio.run(gather_snapshot_async(broker.bootstrap)) == after

    # The rebalanced broker, snapshotted afresh, needs nothing more.
    replan, resummary = _plan(after, tmp_path, "after")
    assert replan == {"version": 1, "partitions": []}
    assert resummary["before"]["diskUtilisationOverBrokerMean"]["met"] is True
    assert resummary["unmet"] == []


def test_a_failed_disks_replicas_stay_on_it_in_the_snapshot_and_fix_offline_rehomes_them_on_the_broker(
    skewed_broker: tuple[Broker, dict[int, int]], tmp_path: Path
) -> None:
    broker, _ = skewed_broker
    where = _placement(gather_snapshot(broker.bootstrap))
    failed = where[1]
    victims = sorted(p for p, d in where.items() if d == failed)
    remount_read_only(failed)
    try:
        # The broker finds out on its next write there.
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, retries=0)
        deadline = time.monotonic() + 60
        while True:
            with suppress(KafkaError):
                producer.send(TOPIC, b"after the failure", partition=1).get(timeout=10)
            snap = gather_snapshot(broker.bootstrap)
            dirs = {d["path"]: d for d in snap["brokers"][0]["logDirs"]}
            if dirs[failed]["state"] == "Offline":
                break
            assert time.monotonic() < deadline, dirs
            time.sleep(0.2)
        producer.close()
    finally:
        subprocess.run(["mount", "-o", "remount,rw", failed], check=False)

    # DescribeLogDirs lists nothing on the failed disk: the builder puts its replicas there.
    assert dirs[failed] == {"path": failed, "state": "Offline", "totalBytes": -1, "usableBytes": -1}
    assert all(d["state"] == "Active" for p, d in dirs.items() if p != failed)
    assert _placement(snap) == where
    cluster = parse_snapshot(snap)
    assert cluster.n_dirs == 3
    assert {
        p["partition"]: p["sizeBytes"] for p in snap["partitions"] if p["partition"] in victims
    } == dict.fromkeys(victims, 0)

    # intra-broker balances only brokers whose directories are all online: nothing here.
    plan, _ = _plan(snap, tmp_path, "offline")
    assert plan == {"version": 1, "partitions": []}
    # fix-offline re-homes the offline directory's replicas on their broker, in its live
    # directories, where they fit (AlterReplicaLogDirs re-creates a replica of an offline
    # directory live: Spindle's extension, broker/server/apis/log_dirs.py).
    snap_file, out = tmp_path / "offline-snapshot.json", tmp_path / "fix-plan.json"
    done = subprocess.run(
        [CLI, "plan", "--snapshot", str(snap_file), "--mode", "fix-offline", "--output", str(out),
         "--no-spark"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    moved = {p["partition"]: p for p in json.loads(out.read_text())["partitions"]}
    assert sorted(moved) == victims, moved
    live = set(dirs) - {failed}
    for p in moved.values():
        assert p["topic"] == TOPIC
        assert p["replicas"] == [broker.node_id]
        assert p["log_dirs"][0] in live, p
