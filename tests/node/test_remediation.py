"""Remediation on the real node: a broker's disk fails for real under an acks=all producer,
its LogVolume goes Offline, leadership moves off it, and the operator (installed by helm,
running as a Pod) replaces the volume (ReplaceVolume: new claim and PV, broker restarted on the
empty directory, its replicas re-created from the other brokers) and waits until the broker is
back in every ISR: the LogVolume is Active again. The operator is killed in the middle and
resumes from the LogVolume's status. A PV marked Failed through the API is replaced the same
way; a disk that fails again right after its replacement hits the cool-down and stays Offline.
Every acknowledged record is read back at the end.

One scenario for the module (it is slow): three Brokers x three 1Gi volumes (elected
controller, the chart's etcd), a topic with one partition replicated three times whose leader's
directory holds ~200 MB when its file system is shut down (ext4 ``EXT4_IOC_SHUTDOWN``: every
access fails with EIO, as a dying disk does). The timings are printed (``-s`` shows them).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from controlplane import LocalControlPlane, volumes
from controlplane.node import cluster_dns_command
from controlplane.volumes import Failure

from .kit import Kit, install_spindle, pod_ready

RELEASE, SYSTEM, DEMO = "remedy", "remedy-system", "remedy-demo"
BROKERS = ("r-0", "r-1", "r-2")
TOPIC = "big"
BULK_MB = 200
ETCD_MEMBERS = 3


def broker(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "spindle.io/v1alpha1",
        "kind": "Broker",
        "metadata": {"name": BROKERS[index]},
        "spec": {
            "brokerId": index,
            "cluster": "remedy",
            "imagePullPolicy": "Never",
            # No spindle.etcd.endpoints: the operator gives the chart's three etcd members.
            "config": {
                "spindle.etcd.prefix": "/spindle/remedy",
                "spindle.controller.mode": "elected",
            },
            "volumes": [{"id": v, "size": "1Gi"} for v in range(3)],
        },
    }


@dataclass
class Scene:
    kube: LocalControlPlane
    demo: Kit
    image: str
    work: Path
    client: subprocess.Popen[bytes] | None = None
    client_log: Any = None
    timings: dict[str, float] = field(default_factory=dict)
    replaced: dict[str, str] = field(default_factory=dict)  # LogVolume -> new PV

    def lv(self, name: str) -> dict[str, Any]:
        return dict(self.demo.get("logvolume", name).get("status") or {})

    def lvs(self) -> list[dict[str, Any]]:
        out = self.kube.kubectl("get", "logvolumes", "-n", DEMO, "-o", "json").stdout
        return list(json.loads(out)["items"])

    def tool(self, tool: str, *args: str) -> str:
        layout = self.kube.node_layout
        assert layout is not None
        bootstrap = ",".join(f"{b}.{DEMO}.svc:9092" for b in BROKERS)
        command = cluster_dns_command(layout, [tool, "--bootstrap-server", bootstrap, *args])
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=180, env=self.kube.env
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    def leader(self) -> int | None:
        out = self.tool("kafka-topics", "--describe", "--topic", TOPIC)
        found = re.search(r"Partition: 0\s+Leader: (-?\d+)", out)
        return int(found.group(1)) if found else None

    def events(self, reason: str) -> list[dict[str, Any]]:
        out = self.kube.kubectl(
            "get", "events", "-n", DEMO, "--field-selector", f"reason={reason}", "-o", "json"
        ).stdout
        return list(json.loads(out)["items"])

    def acked(self) -> int:
        try:
            return int(json.loads((self.work / "progress.json").read_text())["acked"])
        except (FileNotFoundError, ValueError, KeyError):
            return 0

    def operator_pod(self) -> dict[str, Any] | None:
        out = self.kube.kubectl(
            "get", "pods", "-n", SYSTEM, "-l", "app.kubernetes.io/name=spindle-operator",
            "-o", "json",
        ).stdout  # fmt: skip
        running = [
            p for p in json.loads(out)["items"] if not p["metadata"].get("deletionTimestamp")
        ]
        return running[0] if running else None


@pytest.fixture(scope="module")
def scene(
    node_cluster: LocalControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scene]:
    image = install_spindle(
        node_cluster, "dashboard.enabled=false", "remediation.policy=Auto",
        "remediation.maxFailures=2", "remediation.window=3600", f"etcd.replicas={ETCD_MEMBERS}",
        release=RELEASE, namespace=SYSTEM,
    )  # fmt: skip
    node_cluster.kubectl("create", "namespace", DEMO)
    demo = Kit(node_cluster, DEMO, image)
    demo.apply(*({**broker(i), "spec": {**broker(i)["spec"], "image": image}} for i in range(3)))
    scene = Scene(node_cluster, demo, image, tmp_path_factory.mktemp("remedy"))
    try:
        for b in BROKERS:
            demo.wait_for(lambda b=b: pod_ready(demo, b), what=f"Pod {b} Ready", timeout=300)
        yield scene
    finally:
        if scene.client is not None:
            if scene.client.poll() is None:
                scene.client.kill()
            scene.client.wait(timeout=60)
        if scene.client_log is not None:
            scene.client_log.close()
        node_cluster.kubectl("delete", "namespace", DEMO, "--wait=false")
        node_cluster.helm("uninstall", RELEASE, "--namespace", SYSTEM, check=False)
        node_cluster.kubectl("delete", "namespace", SYSTEM, "--wait=false", check=False)


def test_nine_logvolumes_come_up_active(scene: Scene) -> None:
    def all_active() -> bool:
        items = scene.lvs()
        return len(items) == 9 and all(
            (i.get("status") or {}).get("state") == "Active" for i in items
        )

    scene.demo.wait_for(all_active, what="9 LogVolumes Active", timeout=180)


def test_the_brokers_run_on_the_charts_three_member_etcd_without_naming_it(scene: Scene) -> None:
    """``etcd.replicas=3``: three etcd members form one cluster, and Brokers whose config names
    no etcd get every member's URL from the operator (the chart's ``--etcd-endpoints``)."""
    members = [f"{RELEASE}-etcd-{i}" for i in range(ETCD_MEMBERS)]
    urls = ",".join(f"http://{m}.{RELEASE}-etcd-peers.{SYSTEM}.svc:2379" for m in members)
    for name in BROKERS:
        properties = scene.demo.get("configmap", name)["data"]["server.properties"]
        assert f"spindle.etcd.endpoints={urls}\n" in properties
    pod = json.loads(
        scene.kube.kubectl("get", "pod", "-n", SYSTEM, members[0], "-o", "json").stdout
    )
    request = urllib.request.Request(
        f"http://{pod['status']['podIP']}:2379/v3/cluster/member/list", data=b"{}", method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        listed = sorted(m["name"] for m in json.load(response)["members"])
    assert listed == members
    print(f"\netcd members: {', '.join(listed)}")


def start_client(scene: Scene) -> None:
    layout = scene.kube.node_layout
    assert layout is not None
    scene.tool(
        "kafka-topics", "--create", "--topic", TOPIC, "--partitions", "1",
        "--replication-factor", "3", "--config", "min.insync.replicas=2",
    )  # fmt: skip
    bootstrap = ",".join(f"{b}.{DEMO}.svc:9092" for b in BROKERS)
    command = cluster_dns_command(
        layout,
        [sys.executable, str(Path(__file__).with_name("acked_client.py")), bootstrap, TOPIC,
         str(scene.work), str(BULK_MB)],
    )  # fmt: skip
    scene.client_log = log = (scene.work / "client.log").open("wb")
    scene.client = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=scene.kube.env
    )
    scene.demo.wait_for(
        lambda: (scene.work / "bulk.json").exists() or scene.client.poll() is not None,  # type: ignore[union-attr]
        what=f"{BULK_MB} MB produced",
        timeout=900,
    )
    assert scene.client.poll() is None, (scene.work / "client.log").read_text()[-3000:]
    bulk = json.loads((scene.work / "bulk.json").read_text())
    print(f"\nbulk: {bulk['records']} records of 100 KB acked in {bulk['seconds']:.1f} s")
    scene.demo.wait_for(lambda: scene.acked() >= 50, what="the acks=all producer running")


def holder(scene: Scene, broker_id: int) -> tuple[str, str]:
    """The LogVolume of ``broker_id`` holding the topic's partition, and its PV."""

    def find() -> tuple[str, str] | None:
        for item in scene.lvs():
            status = item.get("status") or {}
            if (
                item["spec"]["brokerId"] == broker_id
                and (status.get("usedBytes") or 0) > BULK_MB * 1_000_000 // 2
            ):
                return item["metadata"]["name"], str(status["pvName"])
        return None

    return scene.demo.wait_for(
        find, what=f"broker {broker_id}'s directory with the bulk", timeout=120
    )


def wait_state(
    scene: Scene, name: str, states: set[str], timeout: float
) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    status = scene.demo.wait_for(
        lambda: s if (s := scene.lv(name)).get("state") in states else None,
        what=f"{name} in {states}",
        timeout=timeout,
    )
    return status, time.monotonic() - started


def test_a_failed_disk_goes_offline_is_replaced_and_rebuilt_while_the_operator_restarts(
    scene: Scene,
) -> None:
    start_client(scene)
    leader = scene.leader()
    assert leader is not None
    name, pv = holder(scene, leader)
    used = scene.lv(name)["usedBytes"]
    failed_at = time.monotonic()
    volumes.fail(scene.kube.state_dir / "volumes", pv, Failure.IO_ERROR)
    status, _ = wait_state(scene, name, {"Offline", "Replacing"}, timeout=60)
    to_offline = time.monotonic() - failed_at
    scene.timings["io-error->Offline"] = to_offline
    print(
        f"\n{name} ({used / 1e6:.0f} MB, PV {pv}) shut down -> {status['state']} in {to_offline:.2f} s"
    )
    source = (status.get("failure") or {}).get("source")
    assert source == "IOError", status
    scene.demo.wait_for(
        lambda: scene.leader() not in (leader, None), what="leadership to move off", timeout=120
    )
    # Kill the operator while the replacement runs; a new one (the Deployment's) resumes it.
    wait_state(scene, name, {"Replacing", "Rebuilding"}, timeout=120)
    old = scene.operator_pod()
    assert old is not None
    scene.kube.kubectl(
        "delete", "pod", "-n", SYSTEM, old["metadata"]["name"], "--grace-period=0", "--force"
    )
    print(
        f"operator Pod {old['metadata']['name']} killed at {time.monotonic() - failed_at:.1f} s ({scene.lv(name).get('state')})"
    )
    wait_state(scene, name, {"Rebuilding"}, timeout=600)
    scene.timings["io-error->Rebuilding"] = time.monotonic() - failed_at
    status, _ = wait_state(scene, name, {"Active"}, timeout=900)
    scene.timings["io-error->Active"] = time.monotonic() - failed_at
    print(
        f"{name}: Offline {to_offline:.2f} s, Rebuilding {scene.timings['io-error->Rebuilding']:.1f} s, "
        f"Active {scene.timings['io-error->Active']:.1f} s after the failure"
    )
    new = scene.operator_pod()
    assert new is not None
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    record = status["remediation"]
    assert record["phase"] == "Succeeded"
    assert record["policy"] == "ReplaceVolume"
    assert record["oldPvName"] == pv
    assert status["pvName"] not in (None, pv)
    scene.replaced[name] = status["pvName"]
    for reason in (
        "RemediationStarted",
        "RemediationClaimDeleted",
        "RemediationPodRestarted",
        "VolumeReplaced",
        "RemediationSucceeded",
    ):
        assert scene.events(reason), f"no {reason} Event"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Remediating"]["status"] == "False"
    assert conditions["Remediating"]["reason"] == "Succeeded"


def test_a_pv_marked_failed_through_the_api_is_replaced_too(scene: Scene) -> None:
    leader = scene.leader()
    assert leader is not None
    name, pv = holder(scene, leader)
    assert name not in scene.replaced
    marked_at = time.monotonic()
    scene.kube.kubectl(
        "patch", "pv", pv, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"phase": "Failed", "message": "marked failed by the test"}}),
    )  # fmt: skip
    status, _ = wait_state(scene, name, {"Offline", "Replacing"}, timeout=60)
    to_offline = time.monotonic() - marked_at
    assert (status.get("failure") or {}).get("source") == "PersistentVolumeFailed", status
    status, _ = wait_state(scene, name, {"Active"}, timeout=900)
    scene.timings["pv-failed->Offline"] = to_offline
    scene.timings["pv-failed->Active"] = time.monotonic() - marked_at
    print(
        f"\n{name} PV {pv} Failed -> Offline {to_offline:.2f} s, Active {scene.timings['pv-failed->Active']:.1f} s"
    )
    record = status["remediation"]
    assert (record["phase"], record["source"]) == ("Succeeded", "PersistentVolumeFailed")
    assert status["pvName"] != pv
    scene.replaced[name] = status["pvName"]


def test_a_disk_failing_again_right_after_replacement_hits_the_cool_down(scene: Scene) -> None:
    """The disk replaced first fails again (its new PV reported Failed): the second failure
    within the window leaves it Offline on the same claim, with the reason."""
    name, pv = next(iter(scene.replaced.items()))
    claim_uid = scene.demo.get("pvc", scene.lv(name)["pvcName"])["metadata"]["uid"]
    scene.kube.kubectl(
        "patch", "pv", pv, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"phase": "Failed", "message": "failing again"}}),
    )  # fmt: skip
    status = scene.demo.wait_for(
        lambda: (
            s
            if ((s := scene.lv(name)).get("remediation") or {}).get("phase") == "CoolDown"
            else None
        ),
        what=f"{name} cooling down",
        timeout=120,
    )
    assert status["state"] == "Offline"
    conditions = {c["type"]: c for c in status["conditions"]}
    remediating = conditions["Remediating"]
    assert (remediating["status"], remediating["reason"]) == ("False", "CoolDown")
    assert "failed 2 times" in remediating["message"]
    print(f"\n{name}: {remediating['message']}")
    # It does not loop: probes later it is still Offline on the same claim.
    time.sleep(10)
    later = scene.lv(name)
    assert later["state"] == "Offline"
    assert later["remediation"]["phase"] == "CoolDown"
    assert scene.demo.get("pvc", later["pvcName"])["metadata"]["uid"] == claim_uid
    assert scene.events("RemediationCoolDown")


CLIENT = Path(__file__).with_name("kafka_on_node.py")
MOVED_PARTITIONS, MOVED_RECORDS, LATE_RECORDS, MOVED_SIZE = 6, 200, 50, 1000


def node_client(scene: Scene, *args: str) -> list[str]:
    """The command running ``kafka_on_node.py`` (kafka-python) on the node with ``args``."""
    layout = scene.kube.node_layout
    assert layout is not None
    bootstrap = ",".join(f"{b}.{DEMO}.svc:9092" for b in BROKERS)
    return cluster_dns_command(
        layout, [sys.executable, "-P", str(CLIENT), "--bootstrap", bootstrap, *args]
    )


def on_node(scene: Scene, *args: str) -> Any:
    done = subprocess.run(
        node_client(scene, *args), capture_output=True, text=True, timeout=600, env=scene.kube.env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def desire(scene: Scene, name: str, state: str) -> None:
    scene.kube.kubectl(
        "patch", "logvolume", "-n", DEMO, name, "--type=merge",
        "-p", json.dumps({"spec": {"desiredState": state}}),
    )  # fmt: skip


def quiet_broker(scene: Scene) -> tuple[int, str, list[str]]:
    """A broker none of whose volumes failed yet; its directory without a replica of the
    bulk topic (MoveReplicas of that partition has nowhere to go: it lives on every broker),
    and its other two."""
    by_broker: dict[int, list[dict[str, Any]]] = {}
    for item in scene.lvs():
        by_broker.setdefault(item["spec"]["brokerId"], []).append(item)
    for broker_id, items in sorted(by_broker.items()):
        states = {(i.get("status") or {}).get("state") for i in items}
        if states != {"Active"} or any(i["metadata"]["name"] in scene.replaced for i in items):
            continue
        free = [
            i["metadata"]["name"]
            for i in items
            if not any(p["topic"] == TOPIC for p in (i["status"].get("partitions") or []))
        ]
        if free:
            names = sorted(i["metadata"]["name"] for i in items)
            return broker_id, free[0], [n for n in names if n != free[0]]
    raise AssertionError(f"no broker with every volume Active: {by_broker}")


def test_move_replicas_rehomes_a_full_disks_replicas_in_another_directory_of_the_broker(
    scene: Scene,
) -> None:
    """Broker policy MoveReplicas. A topic replicated twice lands in one directory of that
    broker (its other two cordoned); then one of the other two is uncordoned, and the first
    file system fills up for real (every free block allocated) while records keep coming: the
    broker's writes there fail with ENOSPC, the LogVolume goes Offline (source IOError), the
    planner's fix-offline mode keeps every affected replica on the broker in the uncordoned
    directory (room there), the operator re-homes them with AlterReplicaLogDirs (the broker
    re-creates them there live and refetches them), no Reassignment; the remediation record
    says Succeeded once they are back in sync; the broker still holds every partition it held,
    in that directory, and every acknowledged record of the topic reads back."""
    broker_id, target, others = quiet_broker(scene)
    broker_name = BROKERS[broker_id]
    scene.kube.kubectl(
        "patch", "broker", "-n", DEMO, broker_name, "--type=merge",
        "-p", json.dumps({"spec": {"remediation": {"policy": "MoveReplicas"}}}),
    )  # fmt: skip
    for name in others:
        desire(scene, name, "Cordoned")
    for name in others:
        wait_state(scene, name, {"Cordoned"}, timeout=90)
    on_node(scene, "create", "--topic", "moved", "--partitions", str(MOVED_PARTITIONS),
            "--replication", "2")  # fmt: skip
    on_node(scene, "produce", "--topic", "moved", "--partitions", str(MOVED_PARTITIONS),
            "--records", str(MOVED_RECORDS), "--size", str(MOVED_SIZE))  # fmt: skip
    before = on_node(scene, "replicas", "--topic", "moved", "--partitions", "0")
    affected = sorted(int(p) for p, r in before.items() if broker_id in r)
    scene.demo.wait_for(
        lambda: sorted(
            p["partition"] for p in scene.lv(target).get("partitions") or []
            if p["topic"] == "moved"
        ) == affected,
        what=f"{target} holding broker {broker_id}'s {len(affected)} replicas of moved",
        timeout=120,
    )  # fmt: skip
    home = others[0]  # room for the replicas when the target fails: open it again
    desire(scene, home, "Active")
    wait_state(scene, home, {"Active"}, timeout=90)
    home_path = scene.lv(home)["path"]
    pv = scene.lv(target)["pvName"]
    filled_at = time.monotonic()
    volumes.fail(scene.kube.state_dir / "volumes", pv, Failure.FULL)
    late = subprocess.Popen(
        node_client(scene, "produce", "--topic", "moved", "--partitions", str(MOVED_PARTITIONS),
                    "--records", str(LATE_RECORDS), "--size", str(MOVED_SIZE)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=scene.kube.env,
    )  # fmt: skip
    try:
        status, _ = wait_state(scene, target, {"Offline"}, timeout=60)
        to_offline = time.monotonic() - filled_at
        scene.timings["disk-full->Offline"] = to_offline
        print(f"\n{target} (PV {pv}) full -> Offline in {to_offline:.2f} s: {status['failure']}")
        assert status["failure"]["source"] == "IOError", status
        record = scene.demo.wait_for(
            lambda: r if (r := scene.lv(target).get("remediation") or {}).get("phase")
            in ("Succeeded", "Failed") else None,
            what=f"{target}'s MoveReplicas to end",
            timeout=600,
        )  # fmt: skip
        scene.timings["disk-full->moved"] = time.monotonic() - filled_at
        _, late_err = late.communicate(timeout=300)
    finally:
        if late.poll() is None:
            late.kill()
            late.wait()
    print(
        f"{target}: {record['message']} ({scene.timings['disk-full->moved']:.1f} s after the fill)"
    )
    assert (record["phase"], record["policy"]) == ("Succeeded", "MoveReplicas"), record
    # Room in the broker's other open directory: every affected replica stays on the broker.
    assert sorted(m["partition"] for m in record["intra"] if m["topic"] == "moved") == affected
    assert {m["dir"] for m in record["intra"]} == {home_path}, record
    assert not record.get("moves"), record
    assert not record.get("reassignment"), record
    status = scene.lv(target)
    assert status["state"] == "Offline"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert (conditions["Remediating"]["status"], conditions["Remediating"]["reason"]) == (
        "False", "Succeeded",
    )  # fmt: skip
    assert scene.events("RemediationRehoming")
    after = on_node(scene, "replicas", "--topic", "moved", "--partitions", "0")
    assert after == before, (before, after)  # same brokers: the replicas changed directory
    scene.demo.wait_for(
        lambda: {p["partition"] for p in scene.lv(home).get("partitions") or []
                 if p["topic"] == "moved"} >= set(affected),
        what=f"{home} listing broker {broker_id}'s {len(affected)} re-homed replicas of moved",
        timeout=60,
    )  # fmt: skip
    late_acked = late.returncode == 0
    print(f"late producer: {'every record acked' if late_acked else late_err.decode()[-300:]}")
    read = on_node(scene, "read", "--topic", "moved", "--partitions", str(MOVED_PARTITIONS),
                   "--seqs")  # fmt: skip
    for p in range(MOVED_PARTITIONS):
        seqs = read["seqs"][str(p)]
        assert seqs[:MOVED_RECORDS] == list(range(MOVED_RECORDS)), f"moved-{p}: {seqs[:20]}"
        if late_acked:
            assert seqs[MOVED_RECORDS:] == list(range(LATE_RECORDS)), f"moved-{p}"
    for name in others:
        desire(scene, name, "Active")


def test_every_acked_record_is_read_back(scene: Scene) -> None:
    assert scene.client is not None
    (scene.work / "stop").touch()
    scene.client.wait(timeout=1200)
    result = json.loads((scene.work / "verify.json").read_text())
    print(
        f"\n{result['summary']}; bulk {result['bulk_acked']} acked, {result['bulk_missing_count']} missing"
    )
    print("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in scene.timings.items()))
    assert result["acked"] > 0
    assert not result["missing"], result
    assert not result["misplaced"], result
    assert not result["duplicated"], result
    assert result["bulk_missing_count"] == 0, result
