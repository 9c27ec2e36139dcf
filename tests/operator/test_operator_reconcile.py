"""With the operator running (a real subprocess) against the real API server: the example
cluster becomes exactly its owned objects, status and printer columns fill in, growth patches
the claim, shrinks and removals of non-empty volumes are refused, deletion collects garbage."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
Cluster = Any  # tests/operator/conftest.py Cluster
BROKERS = ["demo-0", "demo-1", "demo-2"]
EXPANDABLE = "spindle-expandable"


def _condition(body: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for cond in ((body or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return dict(cond)
    return None


def _owned_names(cluster: Cluster, kind: str) -> set[str]:
    items = cluster.get(kind)["items"]
    return {
        i["metadata"]["name"]
        for i in items
        if i["metadata"].get("labels", {}).get("spindle.io/broker")
    }


def _reconciled(cluster: Cluster, name: str) -> Callable[[], dict[str, Any] | None]:
    def probe() -> dict[str, Any] | None:
        body = cluster.get("broker", name)
        status = (body or {}).get("status") or {}
        generation = (body or {}).get("metadata", {}).get("generation")
        return body if status.get("observedGeneration") == generation else None

    return probe


def test_example_cluster_creates_exactly_the_owned_objects(
    operator: Path, namespace: Cluster, wait_for: Callable[..., Any]
) -> None:
    namespace.kubectl("apply", "-f", str(ROOT / "examples" / "cluster.yaml"))
    for name in BROKERS:
        body = wait_for(_reconciled(namespace, name), what=f"status of {name}")
        assert body["status"]["phase"] == "Pending"  # no kubelet: the Pod stays Pending
        assert body["status"]["volumes"] == "0/3"
        assert body["status"]["volumesTotal"] == 3
    wait_for(lambda: len(_owned_names(namespace, "logvolumes")) == 9 or None, what="9 LogVolumes")

    expected_pvcs = {f"data-{v}-{b}" for b in BROKERS for v in range(3)}
    assert _owned_names(namespace, "pvc") == expected_pvcs
    assert _owned_names(namespace, "pods") == set(BROKERS)
    assert _owned_names(namespace, "configmaps") == set(BROKERS)
    assert _owned_names(namespace, "services") == set(BROKERS)
    assert _owned_names(namespace, "logvolumes") == {
        f"{b}-data-{v}" for b in BROKERS for v in range(3)
    }

    pod = namespace.get("pod", "demo-1")
    mounts = {m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert {
        "/var/lib/spindle/data-0",
        "/var/lib/spindle/data-1",
        "/var/lib/spindle/data-2",
    } <= mounts
    properties = namespace.get("configmap", "demo-1")["data"]["server.properties"]
    assert (
        "log.dirs=/var/lib/spindle/data-0,/var/lib/spindle/data-1,/var/lib/spindle/data-2"
        in properties.splitlines()
    )
    broker_uid = namespace.get("broker", "demo-1")["metadata"]["uid"]
    for kind, name in [("pod", "demo-1"), ("service", "demo-1"), ("logvolume", "demo-1-data-0")]:
        owners = namespace.get(kind, name)["metadata"]["ownerReferences"]
        assert [(o["kind"], o["uid"]) for o in owners] == [("Broker", broker_uid)]
    # deleteClaim: true on volume 2 only: only that claim is owned (collected with the Broker).
    assert (
        namespace.get("pvc", "data-2-demo-1")["metadata"]["ownerReferences"][0]["uid"] == broker_uid
    )
    assert not namespace.get("pvc", "data-0-demo-1")["metadata"].get("ownerReferences")

    def volume_status_filled() -> bool:
        return all(
            (lv.get("status") or {}).get("usage") == "?/1Gi"
            for lv in namespace.get("logvolumes")["items"]
        )

    wait_for(volume_status_filled, what="LogVolume status")
    table = namespace.kubectl("get", "spindle").stdout
    lines = table.splitlines()
    assert any(
        line.split()[:5] == ["broker.spindle.io/demo-0", "0", "demo", "Pending", "0/3"]
        for line in lines
    ), table
    assert any(
        line.split()[:5]
        == ["logvolume.spindle.io/demo-2-data-2", "demo-2", "2", "Active", "Pending"]
        and "?/1Gi" in line
        for line in lines
    ), table
    ready = _condition(namespace.get("broker", "demo-0"), "Ready")
    assert ready is not None
    assert ready["status"] == "False"
    assert set(ready) >= {"type", "status", "reason", "message", "lastTransitionTime"}
    assert namespace.events("Created"), "no Created events recorded"


def test_example_logvolume_is_adopted_and_keeps_users_desired_state(
    operator: Path, namespace: Cluster, wait_for: Callable[..., Any]
) -> None:
    namespace.kubectl("apply", "-f", str(ROOT / "examples" / "logvolume.yaml"))
    namespace.kubectl("apply", "-f", str(ROOT / "examples" / "cluster.yaml"))
    wait_for(_reconciled(namespace, "demo-2"), what="status of demo-2")

    def adopted() -> dict[str, Any] | None:
        lv = namespace.get("logvolume", "demo-2-data-2")
        return lv if lv["metadata"].get("ownerReferences") else None

    lv = wait_for(adopted, what="LogVolume adopted by its Broker")
    assert lv["spec"]["desiredState"] == "Cordoned"
    assert lv["metadata"]["ownerReferences"][0]["name"] == "demo-2"


def _expandable_broker(namespace: Cluster, volumes: list[dict[str, Any]]) -> str:
    """A Broker on an expandable class whose claims get pre-bound PersistentVolumes (the
    API server resizes only bound claims; no provisioner runs here, so the PVs are made by
    hand and the real persistentvolume-binder controller binds them)."""
    namespace.kube.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": EXPANDABLE},
                "provisioner": "kubernetes.io/no-provisioner",
                "allowVolumeExpansion": True,
                "volumeBindingMode": "Immediate",
            }
        ),
    )
    for volume in volumes:
        claim = f"data-{volume['id']}-grow"
        namespace.kube.kubectl(
            "apply",
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": f"{namespace.namespace}-{claim}"},
                    "spec": {
                        "capacity": {"storage": volume["size"]},
                        "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "storageClassName": EXPANDABLE,
                        "hostPath": {"path": f"/tmp/spindle-test-pv/{claim}"},
                        "claimRef": {"namespace": namespace.namespace, "name": claim},
                    },
                }
            ),
        )
    spec = {
        "brokerId": 10,
        "cluster": "grow",
        "volumes": [{**v, "storageClass": EXPANDABLE} for v in volumes],
    }
    namespace.apply(
        json.dumps(
            {
                "apiVersion": "spindle.io/v1alpha1",
                "kind": "Broker",
                "metadata": {"name": "grow"},
                "spec": spec,
            }
        )
    )
    return "grow"


def _set_volumes(namespace: Cluster, name: str, volumes: list[dict[str, Any]]) -> None:
    patch = {"spec": {"volumes": [{**v, "storageClass": EXPANDABLE} for v in volumes]}}
    namespace.kubectl("patch", "broker", name, "--type=merge", "-p", json.dumps(patch))


def _claim_phase(namespace: Cluster, claim: str) -> Callable[[], str | None]:
    def probe() -> str | None:
        pvc = namespace.get("pvc", claim)
        phase = ((pvc or {}).get("status") or {}).get("phase")
        return phase if phase == "Bound" else None

    return probe


def test_growth_patches_the_claim_and_shrink_is_refused(
    operator: Path, namespace: Cluster, wait_for: Callable[..., Any]
) -> None:
    name = _expandable_broker(namespace, [{"id": 0, "size": "1Gi"}])
    wait_for(_claim_phase(namespace, "data-0-grow"), what="claim bound to its PV")
    pod_uid = wait_for(lambda: namespace.get("pod", name), what="pod")["metadata"]["uid"]

    _set_volumes(namespace, name, [{"id": 0, "size": "2Gi"}])

    def grown() -> bool:
        pvc = namespace.get("pvc", "data-0-grow")
        return pvc["spec"]["resources"]["requests"]["storage"] == "2Gi"

    wait_for(grown, what="claim request grown to 2Gi")
    updated = [
        e
        for e in namespace.events("Updated")
        if "PersistentVolumeClaim data-0-grow" in e["message"]
    ]
    assert updated, "no Event for the claim's growth"
    body = wait_for(_reconciled(namespace, name), what="status after growth")
    assert _condition(body, "Reconciled")["status"] == "True"  # type: ignore[index]
    assert namespace.get("pod", name)["metadata"]["uid"] == pod_uid  # growth keeps the Pod

    _set_volumes(namespace, name, [{"id": 0, "size": "1Gi"}])
    body = wait_for(_reconciled(namespace, name), what="status after shrink")
    refused = _condition(body, "Reconciled")
    assert refused is not None
    assert (refused["status"], refused["reason"]) == ("False", "VolumeShrinkRefused")
    assert "shrinking from 2Gi to 1Gi is refused" in refused["message"]
    assert namespace.get("pvc", "data-0-grow")["spec"]["resources"]["requests"]["storage"] == "2Gi"
    events = wait_for(lambda: namespace.events("VolumeShrinkRefused"), what="Warning event")
    assert events[0]["type"] == "Warning"
    assert events[0]["involvedObject"]["name"] == name


def test_removing_a_volume_waits_until_its_logvolume_is_empty(
    operator: Path, namespace: Cluster, wait_for: Callable[..., Any]
) -> None:
    volumes = [{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi", "deleteClaim": True}]
    name = "shed"
    namespace.apply(
        json.dumps(
            {
                "apiVersion": "spindle.io/v1alpha1",
                "kind": "Broker",
                "metadata": {"name": name},
                "spec": {"brokerId": 11, "cluster": "shed", "volumes": volumes},
            }
        )
    )
    wait_for(_reconciled(namespace, name), what="first status")
    wait_for(lambda: namespace.get("logvolume", "shed-data-1"), what="LogVolume of volume 1")
    old_pod = wait_for(lambda: namespace.get("pod", name), what="pod")

    namespace.kubectl(
        "patch",
        "broker",
        name,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"volumes": volumes[:1]}}),
    )
    body = wait_for(_reconciled(namespace, name), what="status after removal")
    refused = _condition(body, "Reconciled")
    assert refused is not None
    assert (refused["status"], refused["reason"]) == ("False", "VolumeRemovalRefused")
    assert "not Empty or Released" in refused["message"]
    assert namespace.get("pvc", "data-1-shed") is not None
    assert namespace.get("logvolume", "shed-data-1") is not None
    assert namespace.get("pod", name)["metadata"]["uid"] == old_pod["metadata"]["uid"]
    assert wait_for(lambda: namespace.events("VolumeRemovalRefused"), what="Warning event")

    # The broker reports the directory empty (stand-in: the status written directly).
    namespace.kubectl(
        "patch",
        "logvolume",
        "shed-data-1",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"state": "Empty"}}),
    )

    def released() -> Any:
        lv = namespace.get("logvolume", "shed-data-1") or {}
        gone = (pvc := namespace.get("pvc", "data-1-shed")) is None or bool(
            pvc["metadata"].get("deletionTimestamp")
        )
        return gone and (lv.get("status") or {}).get("state") == "Released" and lv

    lv = wait_for(released, what="volume 1 released")
    # The LogVolume stays, Released, and says the claim went with it (deleteClaim: true).
    assert lv["status"]["claimKept"] is False
    assert lv["metadata"]["labels"]["spindle.io/released"] == "true"
    ready = {c["type"]: c for c in lv["status"]["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "Released")
    assert "deleted" in ready["message"]
    pod = wait_for(
        lambda: (
            (p := namespace.get("pod", name))
            and p["metadata"]["uid"] != old_pod["metadata"]["uid"]
            and p
        ),
        what="pod replaced without volume 1",
    )
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {"data-0-shed"}
    body = wait_for(_reconciled(namespace, name), what="status after release")
    wait_for(
        lambda: (
            (_condition(namespace.get("broker", name), "Reconciled") or {}).get("status") == "True"
        ),
        what="Reconciled=True after release",
    )


def test_deleting_a_broker_collects_what_it_owns_and_keeps_claims(
    operator: Path, namespace: Cluster, wait_for: Callable[..., Any]
) -> None:
    namespace.kubectl("apply", "-f", str(ROOT / "examples" / "cluster.yaml"))
    wait_for(_reconciled(namespace, "demo-0"), what="status of demo-0")
    wait_for(lambda: namespace.get("pvc", "data-2-demo-0"), what="claims")
    wait_for(lambda: namespace.get("logvolume", "demo-0-data-2"), what="LogVolumes")

    namespace.kubectl("delete", "broker", "demo-0", "--wait=true", "--timeout=60s")

    def collected() -> bool:
        gone = all(
            namespace.get(kind, name) is None
            for kind, name in [
                ("pod", "demo-0"),
                ("configmap", "demo-0"),
                ("service", "demo-0"),
                ("logvolume", "demo-0-data-0"),
                ("logvolume", "demo-0-data-2"),
                ("pvc", "data-2-demo-0"),
            ]
        )
        return gone

    wait_for(collected, what="garbage collection of demo-0's objects", timeout=90)
    # deleteClaim: false keeps the data's claims.
    assert namespace.get("pvc", "data-0-demo-0") is not None
    assert namespace.get("pvc", "data-1-demo-0") is not None
    # The other brokers are untouched.
    assert namespace.get("pod", "demo-1") is not None
