"""LogVolume status is the truth about a disk: the operator reads a real broker's
DescribeLogDirs (bytes, replica count) and turns each failure source into ``Offline`` with the
source named, a condition and an Event.

One scenario for the module (a broker, an operator, a namespace): a real broker process on
loopback whose two log directories are their own tmpfs mounts, a real operator process on the
local control plane pointed at it with ``--bootstrap``, a Broker object declaring those two
volumes. Then, in order: bytes and replicas appear; one directory's file system is remounted
read-only under an acks=all producer (the broker takes it offline, KIP-112) and its LogVolume
goes ``Offline`` (source IOError) -- after a cordon of it was shown to keep new replicas
off it (KIP-1066 ``cordoned.log.dirs`` set by the operator); a volume-health Event on the other directory's claim
(source VolumeHealth); then its PV marked ``Failed`` through the API (source
PersistentVolumeFailed, which outranks the health report).
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane import stop_process_group
from controlplane.volumes import remount_read_only
from kafka import KafkaProducer, TopicPartitionReplica
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or __import__("os").geteuid() != 0,
    reason="mounts tmpfs and remounts it read-only: needs root (CI runs as root)",
)

CLUSTER = "c1"


def _utc(stamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(stamp)


def _mount(path: Path) -> None:
    path.mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "tmpfs", str(path)], check=True
    )


def _umount(path: Path) -> None:
    subprocess.run(["mount", "-o", "remount,rw", str(path)], check=False, capture_output=True)
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], check=False)


class Scene:
    """The module's broker, operator and namespace."""

    def __init__(self, cluster: Any, broker: Any, dirs: list[Path], log: Path) -> None:
        self.cluster = cluster
        self.broker = broker
        self.dirs = dirs
        self.log = log

    def lv(self, volume: int) -> dict[str, Any]:
        found = self.cluster.get("logvolume", f"b1-data-{volume}")
        return dict((found or {}).get("status") or {})

    def events(self, reason: str) -> list[dict[str, Any]]:
        return list(self.cluster.events(reason))


@pytest.fixture(scope="module")
def scene(
    spindle_crds: Any,
    etcd: Any,
    tmp_path_factory: pytest.TempPathFactory,
    session_helpers: dict[str, Any],
    broker_factory: Callable[..., Any],
) -> Iterator[Scene]:
    base = tmp_path_factory.mktemp("volumes")
    dirs = [base / "disks" / f"data-{i}" for i in range(2)]
    for d in dirs:
        _mount(d)

    broker = broker_factory(base / "broker", etcd, log_dirs=[str(d) for d in dirs])
    operator_log = base / "operator.log"
    proc = None
    try:
        broker.start()
        with session_helpers["temporary_namespace"](spindle_crds, "vol") as cluster:
            url = f"http://127.0.0.1:{session_helpers['free_port']()}/healthz"
            env = {**spindle_crds.env, "PYTHONUNBUFFERED": "1"}
            with operator_log.open("wb") as out:
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "spindle.operator",
                        "run",
                        "--namespace",
                        cluster.namespace,
                        "--liveness",
                        url,
                        "--bootstrap",
                        f"{CLUSTER}={broker.bootstrap}",
                        "--probe-period",
                        "1",
                        # Where the directory ids are: the broker's registration in etcd.
                        "--etcd-endpoints",
                        etcd.url,
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=base,
                    start_new_session=True,
                )
            deadline = time.monotonic() + 90
            while not session_helpers["healthy"](url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"operator did not start:\n{operator_log.read_text()[-4000:]}")
                time.sleep(0.25)
            cluster.apply(
                json.dumps(
                    {
                        "apiVersion": "spindle.io/v1alpha1",
                        "kind": "Broker",
                        "metadata": {"name": "b1"},
                        "spec": {
                            "brokerId": broker.node_id,
                            "cluster": CLUSTER,
                            "config": {"spindle.etcd.prefix": broker.etcd_prefix},
                            "volumes": [{"id": 0, "size": "64Mi"}, {"id": 1, "size": "64Mi"}],
                        },
                    }
                )
            )
            yield Scene(cluster, broker, dirs, operator_log)
    finally:
        if proc is not None:
            stop_process_group(proc)
        broker.kill()
        for d in dirs:
            _umount(d)


class Producer:
    """An acks=all producer writing to every partition until stopped; counts its acks."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.acked = 0
        self.failed = 0
        self._stop = threading.Event()
        self._producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", retries=0, request_timeout_ms=5000
        )
        self._thread = threading.Thread(target=self._run, args=(topic, partitions), daemon=True)
        self._thread.start()

    def _run(self, topic: str, partitions: int) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                self._producer.send(topic, b"x" * 1000, partition=n % partitions).get(timeout=10)
                self.acked += 1
            except Exception:
                self.failed += 1
            n += 1
            time.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=20)
        self._producer.close(timeout=5)


def test_logvolumes_show_the_brokers_real_bytes_and_replicas(
    scene: Scene, wait_for: Callable[..., Any]
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=scene.broker.bootstrap)
    try:
        admin.create_topics([NewTopic("bytes", num_partitions=4, replication_factor=1)])
    finally:
        admin.close()
    producer = Producer(scene.broker.bootstrap, "bytes", 4)
    try:
        wait_for(lambda: producer.acked >= 400, what="400 acked records", timeout=120)
    finally:
        producer.stop()

    def both_active() -> Any:
        statuses = [scene.lv(0), scene.lv(1)]
        # Every acked record (1000-byte values) counted in the bytes the broker reports.
        used = sum(s.get("usedBytes") or 0 for s in statuses)
        if all(s.get("state") == "Active" for s in statuses) and used >= producer.acked * 1000:
            return statuses
        return None

    try:
        statuses = wait_for(both_active, what="both LogVolumes Active with bytes", timeout=60)
    except BaseException:
        print("LogVolumes:", scene.lv(0), scene.lv(1), sep="\n")
        raise
    assert sum(s["replicaCount"] for s in statuses) == 4
    for i, s in enumerate(statuses):
        assert s["usableBytes"] <= s["totalBytes"]
        assert 0 < s["totalBytes"] <= 64 * 2**20  # the tmpfs's own size, from DescribeLogDirs v4
        assert s["usage"].split("/")[0] != "?"
        assert s["lastProbeTime"]
        assert {c["type"]: c["status"] for c in s["conditions"]} == {
            "Ready": "True",
            "Reported": "True",
        }, (i, s)
    assert all(s["usedBytes"] > 0 for s in statuses)  # both directories hold replicas


def test_each_logvolume_shows_its_directorys_id_from_meta_properties(
    scene: Scene, wait_for: Callable[..., Any]
) -> None:
    """``status.directoryId`` is the KIP-858 ``directory.id`` the broker wrote into the
    directory's ``meta.properties`` (read by the operator from the broker's registration)."""
    written = []
    for d in scene.dirs:
        props = dict(
            line.split("=", 1)
            for line in (d / "meta.properties").read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )
        written.append(props["directory.id"])
    assert len(set(written)) == 2
    shown = wait_for(
        lambda: ids if all(ids := [scene.lv(v).get("directoryId") for v in (0, 1)]) else None,
        what="both LogVolumes' directoryId",
    )
    assert shown == written


def test_a_cordoned_volume_takes_no_new_replicas_until_uncordoned(
    scene: Scene, wait_for: Callable[..., Any]
) -> None:
    def desire(volume: int, state: str) -> None:
        scene.cluster.kubectl(
            "patch",
            "logvolume",
            f"b1-data-{volume}",
            "--type=merge",
            "-p",
            json.dumps({"spec": {"desiredState": state}}),
        )

    desire(1, "Cordoned")
    status = wait_for(
        lambda: (s := scene.lv(1)).get("state") == "Cordoned" and s,
        what="LogVolume b1-data-1 Cordoned",
    )
    assert status["cordoned"] is True
    assert scene.lv(0)["state"] == "Active"
    assert scene.events("DirectoryCordoned")
    admin = KafkaAdminClient(bootstrap_servers=scene.broker.bootstrap)
    try:
        # The broker's own config says so (kafka-configs would show the same).
        configs = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(scene.broker.node_id))]
        )
        value = configs["broker"][str(scene.broker.node_id)]["cordoned.log.dirs"]["value"]
        assert value == str(scene.dirs[1])
        admin.create_topics([NewTopic("placed", num_partitions=6, replication_factor=1)])

        def placed() -> Any:
            where = {}
            for entry in admin.describe_log_dirs(brokers=[scene.broker.node_id]):
                for d in entry["log_dirs"]:
                    for t in d.get("topics") or ():
                        if t["name"] == "placed":
                            for p in t["partitions"]:
                                where[p["partition_index"]] = d["log_dir"]
            return where if len(where) == 6 else None

        where = wait_for(placed, what="the six new replicas on disk")
        # Moving a replica into the cordoned directory is refused (KIP-1066).
        refused = admin.alter_replica_log_dirs(
            {TopicPartitionReplica("placed", 0, scene.broker.node_id): str(scene.dirs[1])}
        )
        assert [e.__name__ for e in refused.values()] == ["InvalidReplicationAssignmentError"]
    finally:
        admin.close()
    assert set(where.values()) == {str(scene.dirs[0])}, where
    desire(1, "Active")
    status = wait_for(
        lambda: (s := scene.lv(1)).get("state") == "Active" and s,
        what="LogVolume b1-data-1 Active again",
    )
    assert status["cordoned"] is False


def test_a_drained_volume_moves_its_replicas_to_the_other_directory_and_is_empty(
    scene: Scene, wait_for: Callable[..., Any]
) -> None:
    before = scene.lv(1)
    assert before["replicaCount"] > 0
    scene.cluster.kubectl(
        "patch",
        "logvolume",
        "b1-data-1",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"desiredState": "Drained"}}),
    )
    status = wait_for(
        lambda: (s := scene.lv(1)).get("state") == "Empty" and s,
        what="LogVolume b1-data-1 Empty",
        timeout=120,
    )
    assert (status["replicaCount"], status["usedBytes"], status["cordoned"]) == (0, 0, True)
    moved = scene.lv(0)
    assert moved["replicaCount"] == 10  # 4 of "bytes" + 6 of "placed", all in data-0 now
    assert scene.events("DrainStarted")
    # Every record is still there: the end offsets of the drained partitions did not move back.
    admin = KafkaAdminClient(bootstrap_servers=scene.broker.bootstrap)
    try:
        dirs = admin.describe_log_dirs(brokers=[scene.broker.node_id])[0]["log_dirs"]
        sizes = {
            (t["name"], p["partition_index"]): p["partition_size"]
            for d in dirs
            for t in d.get("topics") or ()
            for p in t["partitions"]
        }
    finally:
        admin.close()
    assert sum(v for (t, _), v in sizes.items() if t == "bytes") >= 400 * 1000
    scene.cluster.kubectl(
        "patch",
        "logvolume",
        "b1-data-1",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"desiredState": "Active"}}),
    )
    wait_for(lambda: scene.lv(1).get("state") == "Active", what="b1-data-1 Active again")


def test_a_directory_failing_for_real_goes_offline_naming_the_broker_as_source(
    scene: Scene, wait_for: Callable[..., Any]
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=scene.broker.bootstrap)
    try:  # placed in the emptier directory: data-1, after its drain
        admin.create_topics([NewTopic("late", num_partitions=4, replication_factor=1)])
    finally:
        admin.close()
    producer = Producer(scene.broker.bootstrap, "late", 4)
    try:
        wait_for(lambda: producer.acked >= 50, what="the producer running", timeout=60)
        failed_at = datetime.datetime.now(datetime.UTC)
        started = time.monotonic()
        remount_read_only(scene.dirs[1])
        status = wait_for(
            lambda: (s := scene.lv(1)).get("state") == "Offline" and s,
            what="LogVolume b1-data-1 Offline",
            timeout=60,
        )
        seen_after = time.monotonic() - started
    finally:
        producer.stop()
    assert status["failure"]["source"] == "IOError"
    assert "KafkaStorageError" in status["failure"]["message"]
    since = _utc(status["failure"]["since"])
    print(
        f"failure -> Offline: seen by the test after {seen_after:.1f}s; "
        f"failure.since - remount = {(since - failed_at).total_seconds():.1f}s "
        "(failure.since has 1 s resolution)"
    )
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "IOError")
    assert scene.lv(0)["state"] == "Active"  # the other disk is untouched
    events = wait_for(
        lambda: [e for e in scene.events("VolumeOffline") if "b1-data-1" in e["message"]],
        what="a VolumeOffline Event",
    )
    assert any("source IOError" in e["message"] for e in events)
    broker = scene.cluster.get("broker", "b1")
    degraded = {c["type"]: c for c in broker["status"]["conditions"]}["Degraded"]
    assert degraded["status"] == "True"
    assert "b1-data-1 (IOError)" in degraded["message"]


def test_a_volume_health_event_on_the_claim_makes_its_logvolume_offline(
    scene: Scene, wait_for: Callable[..., Any]
) -> None:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    # What Kubernetes' external health monitor posts about a claim whose volume is abnormal.
    scene.cluster.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": "data-0-b1."},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "name": "data-0-b1",
                    "namespace": scene.cluster.namespace,
                },
                "type": "Warning",
                "reason": "VolumeConditionAbnormal",
                "message": "volume has bad sectors",
                "source": {"component": "csi-pv-monitor-controller"},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
        ),
    )
    wait_for(
        lambda: (
            [
                e
                for e in scene.events("VolumeOffline")
                if "b1-data-0" in e["message"] and "VolumeHealth" in e["message"]
            ]
            and (scene.lv(0).get("failure") or {}).get("source") == "VolumeHealth"
        ),
        what="LogVolume b1-data-0 Offline from the health Event",
        timeout=60,
    )


def test_a_failed_persistent_volume_makes_its_logvolume_offline(
    scene: Scene, wait_for: Callable[..., Any], tmp_path: Path
) -> None:
    pv_name = f"pv-{uuid.uuid4().hex[:8]}"
    scene.cluster.kube.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": pv_name},
                "spec": {
                    "capacity": {"storage": "64Mi"},
                    "accessModes": ["ReadWriteOnce"],
                    "hostPath": {"path": str(tmp_path)},
                    "storageClassName": "",
                    "claimRef": {"namespace": scene.cluster.namespace, "name": "data-0-b1"},
                },
            }
        ),
    )
    try:
        wait_for(
            lambda: scene.lv(0).get("pvName") == pv_name,
            what="claim data-0-b1 bound to the PV",
            timeout=60,
        )
        scene.cluster.kube.kubectl(
            "patch",
            "pv",
            pv_name,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"phase": "Failed", "message": "the disk died"}}),
        )
        events = wait_for(
            lambda: [
                e
                for e in scene.events("VolumeOffline")
                if "b1-data-0" in e["message"] and "PersistentVolumeFailed" in e["message"]
            ],
            what="a VolumeOffline Event naming PersistentVolumeFailed",
            timeout=60,
        )
        assert "the disk died" in events[0]["message"]
    finally:
        scene.cluster.kube.kubectl("delete", "pv", pv_name, "--wait=false", check=False)
