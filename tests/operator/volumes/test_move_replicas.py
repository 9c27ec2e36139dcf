"""MoveReplicas, for real: three Spindle broker processes in one elected-controller cluster (a
real etcd), the operator as its own process on the real API server, Broker objects for the
three, every log directory its own 64 MiB tmpfs. Broker 1 (``spec.remediation.policy:
MoveReplicas``): its data-1 holds ``filler`` (30 MiB), its data-0 ``moving-0`` (led by broker 1,
written by an acks=all producer) and ``big-0`` (25 MiB, followed).

data-0 is remounted read-only under the producer. Its LogVolume goes Offline (IOError); the
operator asks the planner's fix-offline mode, which keeps ``moving-0`` on broker 1 in data-1
(room there under the 0.8 capacity threshold) and sends ``big-0`` to broker 3 (30 + 25 MiB
would not fit). The operator re-homes ``moving-0`` with AlterReplicaLogDirs (the broker
re-creates it in data-1 live, once leadership has left it, and refetches it) and moves
``big-0`` with a Reassignment; the remediation ends Succeeded with the directory still Offline
(nothing replaced it). Then broker 2 stops: broker 1 leads ``moving-0`` from its re-homed
replica, and every acknowledged record is read back from it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import spindle.broker.protocol.apis  # noqa: F401  (kafka-python's schemas, warnings silenced)
from controlplane.volumes import remount_read_only
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import TopicPartitionReplica

from ...broker.conftest import Broker, Etcd, make_broker
from ...broker.conftest import etcd as etcd
from ..conftest import CLUSTER, OperatorProcess, temporary_namespace

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        sys.platform != "linux" or __import__("os").geteuid() != 0,
        reason="mounts tmpfs and remounts it read-only: needs root (CI runs as root)",
    ),
]

TOPIC = "moving"


def _mount(path: Path) -> None:
    path.mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "tmpfs", str(path)], check=True
    )


def _umount(path: Path) -> None:
    subprocess.run(["mount", "-o", "remount,rw", str(path)], check=False, capture_output=True)
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], check=False)


def wait(probe: Any, what: str, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := probe():
            return result
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


class Acked:
    """An acks=all producer on partition 0 until stopped; remembers what was acknowledged."""

    def __init__(self, servers: list[str]) -> None:
        self.acked: list[bytes] = []
        self._stop = threading.Event()
        self._producer = KafkaProducer(
            bootstrap_servers=servers, acks="all", retries=5, request_timeout_ms=5000
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            value = f"m-{n}".encode()
            try:
                self._producer.send(TOPIC, value, partition=0).get(timeout=15)
                self.acked.append(value)
            except Exception:  # not acknowledged: may or may not be there
                time.sleep(0.2)
            n += 1
            time.sleep(0.01)

    def stop(self) -> list[bytes]:
        self._stop.set()
        self._thread.join(timeout=30)
        self._producer.close(timeout=5)
        return list(self.acked)


MIB = 1 << 20


def _fill(servers: list[str], topic: str, mib: int) -> None:
    """``mib`` MiB of 256 KiB records, acknowledged by every in-sync replica."""
    producer = KafkaProducer(bootstrap_servers=servers, acks="all", max_request_size=2 * MIB)
    try:
        for i in range(mib * 4):
            producer.send(topic, bytes([i % 251]) * (256 << 10), partition=0)
        producer.flush(timeout=120)
    finally:
        producer.close(timeout=5)


def _place(admin: KafkaAdminClient, homes: dict[tuple[str, int], str]) -> None:
    """Broker 1's replicas into the directories ``homes`` names (AlterReplicaLogDirs), and
    wait until DescribeLogDirs lists each there as a current replica."""
    wanted = {TopicPartitionReplica(t, p, 1): d for (t, p), d in homes.items()}
    wait(lambda: all(e is None or e.errno == 0 for e in admin.alter_replica_log_dirs(wanted).values()),
         "the moves accepted", 60)  # fmt: skip

    def placed() -> bool:
        found = {}
        for entry in admin.describe_log_dirs(brokers=[1]):
            for d in entry["log_dirs"]:
                for t in d.get("topics") or ():
                    for p in t.get("partitions") or ():
                        if not p.get("is_future_key"):
                            found[(t["name"], p["partition_index"])] = d["log_dir"]
        return all(found.get(tp) == d for tp, d in homes.items())

    wait(placed, f"broker 1's replicas placed {homes}", 60)


@pytest.fixture(scope="module")
def trio(
    spindle_crds: Any, etcd: Etcd, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[Broker], Any, KafkaAdminClient, list[Path]]]:
    base = tmp_path_factory.mktemp("move")
    extra = {
        "spindle.etcd.prefix": f"/test/{uuid.uuid4().hex}",
        "spindle.controller.mode": "elected",
        "spindle.controller.lease.ms": "2000",
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
        "message.max.bytes": str(2 * MIB),
    }
    mounts = [base / "disks" / f"data-{v}" for v in range(2)]
    # Every directory its own file system: the planner reads room from the file system, and
    # the machine's root one may well be above the 0.8 capacity threshold already.
    others = {n: [base / f"b{n}" / f"data-{v}" for v in range(2)] for n in (2, 3)}
    with ExitStack() as stack:
        for m in [*mounts, *others[2], *others[3]]:
            _mount(m)
            stack.callback(_umount, m)
        brokers = []
        for n in (1, 2, 3):
            dirs = mounts if n == 1 else others[n]
            b = make_broker(
                base / f"b{n}", etcd, node_id=n, log_dirs=[str(d) for d in dirs], extra=extra
            )
            b.start()
            stack.callback(b.stop)
            brokers.append(b)
        servers = [b.bootstrap for b in brokers]
        admin = KafkaAdminClient(bootstrap_servers=servers)
        stack.callback(admin.close)
        wait(lambda: len(admin.describe_cluster()["brokers"]) == 3, "three brokers registered", 60)
        admin.create_topics(
            [
                NewTopic(TOPIC, -1, replica_assignments={0: [1, 2]}),
                NewTopic("big", -1, replica_assignments={0: [2, 1]}),
                NewTopic("filler", -1, replica_assignments={0: [1, 3]}),
            ]
        )
        _place(admin, {(TOPIC, 0): str(mounts[0]), ("big", 0): str(mounts[0]),
                       ("filler", 0): str(mounts[1])})  # fmt: skip
        _fill(servers, "filler", 30)
        _fill(servers, "big", 25)
        operator = OperatorProcess(
            spindle_crds, Path(base), "--namespace", "mv-*",
            "--bootstrap", f"{CLUSTER}={','.join(servers)}", "--probe-period", "1",
        )  # fmt: skip
        operator.start()
        stack.callback(operator.stop)
        ns = stack.enter_context(temporary_namespace(spindle_crds, "mv"))
        for n in (1, 2, 3):
            spec: dict[str, Any] = {
                "brokerId": n,
                "cluster": CLUSTER,
                "volumes": [{"id": 0, "size": "64Mi"}, {"id": 1, "size": "64Mi"}],
            }
            if n == 1:
                spec["remediation"] = {"policy": "MoveReplicas"}
            ns.apply(json.dumps({"apiVersion": "spindle.io/v1alpha1", "kind": "Broker",
                                 "metadata": {"name": f"b{n}"}, "spec": spec}))  # fmt: skip
        yield brokers, ns, admin, mounts


def test_move_replicas_rehomes_on_the_broker_what_fits_and_moves_the_rest_elsewhere(
    trio: tuple[list[Broker], Any, KafkaAdminClient, list[Path]],
) -> None:
    brokers, ns, admin, mounts = trio
    producer = Acked([b.bootstrap for b in brokers])
    wait(lambda: len(producer.acked) >= 200, "200 acked records")
    name = "b1-data-0"

    def lv(volume: str = name) -> dict[str, Any]:
        return dict((ns.get("logvolume", volume) or {}).get("status") or {})

    wait(lambda: lv().get("state") == "Active" and (lv().get("replicaCount") or 0) == 2,
         f"{name} Active with its two replicas", 60)  # fmt: skip
    remount_read_only(mounts[0])

    wait(lambda: lv().get("state") == "Offline", f"{name} Offline", 60)
    assert (lv().get("failure") or {}).get("source") == "IOError"
    record = wait(
        lambda: r if (r := lv().get("remediation") or {}).get("phase") == "Moving" else None,
        "MoveReplicas to start",
    )
    assert record["policy"] == "MoveReplicas"
    # The planner: moving-0 fits in data-1 (30 MiB there, 0.8 x 64 MiB allowed); big-0 not.
    assert record["intra"] == [{"topic": TOPIC, "partition": 0, "dir": str(mounts[1])}], record
    assert record["moves"] == [{"topic": "big", "partition": 0, "replicas": [2, 3]}], record
    done = wait(
        lambda: (
            r
            if (r := lv().get("remediation") or {}).get("phase") in ("Succeeded", "Failed")
            else None
        ),
        "the remediation to end",
        240,
    )
    reassignment = (ns.get("reassignment", record["reassignment"]) or {}).get("status") or {}
    assert done["phase"] == "Succeeded", (done, reassignment)
    assert lv()["state"] == "Offline"  # nothing replaced the directory
    meta = {t["name"]: t["partitions"][0] for t in admin.describe_topics([TOPIC, "big"])}
    assert sorted(meta[TOPIC]["replica_nodes"]) == [1, 2]
    assert 1 in meta[TOPIC]["isr_nodes"]
    assert sorted(meta["big"]["replica_nodes"]) == [2, 3]
    assert (mounts[1] / f"{TOPIC}-0").is_dir()  # re-homed in broker 1's other directory
    other = wait(lambda: s if (s := lv("b1-data-1")).get("replicaCount") == 2 else None,
                 "b1-data-1 listing filler and the re-homed replica", 30)  # fmt: skip
    assert other["state"] == "Active"
    for reason in ("RemediationStarted", "RemediationRehoming", "RemediationSucceeded"):
        assert ns.events(reason), reason

    # Broker 2 stops: broker 1 leads moving-0 from its re-homed replica alone.
    acked = producer.stop()
    brokers[1].stop()

    def led_by_1() -> bool:
        [part] = admin.describe_topics([TOPIC])[0]["partitions"]
        return bool(part["leader_id"] == 1)

    wait(led_by_1, "broker 1 leading moving-0", 60)
    consumer = KafkaConsumer(bootstrap_servers=[brokers[0].bootstrap], enable_auto_commit=False,
                             consumer_timeout_ms=10_000)  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0)])
    consumer.seek_to_beginning()
    got = {m.value for m in consumer}
    consumer.close()
    missing = [v for v in acked if v not in got]
    print(f"\nMoveReplicas: {len(acked)} acked, {len(missing)} missing, read from broker 1")
    assert not missing, missing[:10]
