"""MoveReplicas, for real: three Spindle broker processes in one elected-controller cluster (a
real etcd), the operator as its own process on the real API server, Broker objects for the
three. Broker 1 (``spec.remediation.policy: MoveReplicas``) has its log directories on their
own tmpfs mounts; the one holding a replica of ``moving-0`` is remounted read-only under an
acks=all producer. Its LogVolume goes Offline (IOError), the operator creates a Reassignment
giving broker 1's replica to broker 3 (the broker outside the partition's replicas with the
fewest), the Reassignment completes, the remediation ends Succeeded with the directory still
Offline (nothing replaced it), and every acknowledged record is read back.
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
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

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
    }
    mounts = [base / "disks" / f"data-{v}" for v in range(2)]
    with ExitStack() as stack:
        for m in mounts:
            _mount(m)
            stack.callback(_umount, m)
        brokers = []
        for n in (1, 2, 3):
            dirs = mounts if n == 1 else [base / f"b{n}" / f"data-{v}" for v in range(2)]
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
        admin.create_topics([NewTopic(TOPIC, -1, replica_assignments={0: [1, 2]})])
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


def test_move_replicas_gives_the_failed_directorys_replicas_to_another_broker(
    trio: tuple[list[Broker], Any, KafkaAdminClient, list[Path]],
) -> None:
    brokers, ns, admin, mounts = trio
    producer = Acked([b.bootstrap for b in brokers])
    wait(lambda: len(producer.acked) >= 200, "200 acked records")

    def holder() -> tuple[int] | None:  # a tuple: volume 0 is falsy
        for v in (0, 1):
            status = (ns.get("logvolume", f"b1-data-{v}") or {}).get("status") or {}
            if status.get("state") == "Active" and (status.get("replicaCount") or 0) >= 1:
                return (v,)
        return None

    (volume,) = wait(holder, "broker 1's directory holding the partition")
    name = f"b1-data-{volume}"
    subprocess.run(["mount", "-o", "remount,ro", str(mounts[volume])], check=True)

    def lv() -> dict[str, Any]:
        return dict((ns.get("logvolume", name) or {}).get("status") or {})

    wait(lambda: lv().get("state") == "Offline", f"{name} Offline", 60)
    assert (lv().get("failure") or {}).get("source") == "IOError"
    record = wait(
        lambda: r if (r := lv().get("remediation") or {}).get("reassignment") else None,
        "a Reassignment",
    )
    assert record["policy"] == "MoveReplicas"
    assert record["moves"] == [{"topic": TOPIC, "partition": 0, "replicas": [3, 2]}]
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
    [meta] = admin.describe_topics([TOPIC])[0]["partitions"]
    assert sorted(meta["replica_nodes"]) == [2, 3]
    assert ns.events("RemediationStarted")
    assert ns.events("RemediationSucceeded")

    acked = producer.stop()
    consumer = KafkaConsumer(bootstrap_servers=[brokers[1].bootstrap, brokers[2].bootstrap],
                             enable_auto_commit=False, consumer_timeout_ms=10_000)  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0)])
    consumer.seek_to_beginning()
    got = {m.value for m in consumer}
    consumer.close()
    missing = [v for v in acked if v not in got]
    print(f"\nMoveReplicas: {len(acked)} acked, {len(missing)} missing")
    assert not missing, missing[:10]
