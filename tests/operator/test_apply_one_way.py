"""Apply one way against the real API server: create when missing, patch only when different,
the roller replaces Pods whose digest changed (apply refuses Pods), and a reconcile of an
unchanged Broker writes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from spindle.operator import specs
from spindle.operator.kube import CONFIGMAPS, PERSISTENTVOLUMES, PODS, PVCS, KubeApi, apply_object
from spindle.operator.reconcile import reconcile_broker
from spindle.operator.reconcile.roller import roll_pod

pytestmark = pytest.mark.slow


@pytest.fixture
def api(spindle_crds: Any) -> Iterator[KubeApi]:
    client = KubeApi.from_kubeconfig(str(spindle_crds.kubeconfig))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def cluster(spindle_crds: Any, helpers: dict[str, Any]) -> Iterator[Any]:
    """A namespace no operator serves ("ap-"), so only the test writes to it."""
    with helpers["temporary_namespace"](spindle_crds, "ap") as ns:
        yield ns


class Events(list[tuple[str, str, str]]):
    """An Event sink for ``reconcile_broker`` that keeps (type, reason, message) in order."""

    def __call__(self, type_: str, reason: str, message: str) -> None:
        self.append((type_, reason, message))


@pytest.fixture
def events() -> Events:
    return Events()


def _set_volumes(cluster: Any, name: str, volumes: list[dict[str, Any]]) -> None:
    patch = {"spec": {"volumes": volumes}}
    cluster.kubectl("patch", "broker", name, "--type=merge", "-p", json.dumps(patch))


def _broker(cluster: Any, name: str = "one") -> dict[str, Any]:
    body = {
        "apiVersion": "spindle.io/v1alpha1",
        "kind": "Broker",
        "metadata": {"name": name},
        "spec": {
            "brokerId": 4,
            "cluster": "ap",
            "volumes": [{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi", "deleteClaim": True}],
        },
    }
    cluster.apply(json.dumps(body))
    live: dict[str, Any] = cluster.get("broker", name)
    return live


def test_apply_creates_then_leaves_an_equal_object_untouched(api: KubeApi, cluster: Any) -> None:
    broker = specs.BrokerSpec.from_body(_broker(cluster))
    desired = specs.build_configmap(broker)
    assert apply_object(api, desired).action == "Created"
    version = api.get(CONFIGMAPS, cluster.namespace, "one")["metadata"]["resourceVersion"]  # type: ignore[index]
    assert apply_object(api, desired).action == "Unchanged"
    assert api.get(CONFIGMAPS, cluster.namespace, "one")["metadata"]["resourceVersion"] == version  # type: ignore[index]

    changed = json.loads(json.dumps(desired))
    changed["data"]["server.properties"] += "extra=1\n"
    outcome = apply_object(api, changed)
    assert outcome.action == "Updated"
    assert ".data.server.properties" in outcome.detail
    live = api.get(CONFIGMAPS, cluster.namespace, "one")
    assert live is not None
    assert live["data"]["server.properties"].endswith("extra=1\n")


def test_claim_in_other_units_is_equal_and_stale_owner_is_removed(
    api: KubeApi, cluster: Any
) -> None:
    broker = specs.BrokerSpec.from_body(_broker(cluster))
    owned = specs.build_pvc(broker, broker.volumes[1])  # deleteClaim: true → owned
    assert apply_object(api, owned).action == "Created"
    same_in_mi = json.loads(json.dumps(owned))
    same_in_mi["spec"]["resources"]["requests"]["storage"] = "1024Mi"
    assert apply_object(api, same_in_mi).action == "Unchanged"

    kept = json.loads(json.dumps(owned))
    kept["metadata"]["ownerReferences"] = []  # deleteClaim switched to false
    assert apply_object(api, kept).action == "Updated"
    live = api.get(PVCS, cluster.namespace, owned["metadata"]["name"])
    assert live is not None
    assert not live["metadata"].get("ownerReferences")


def test_the_roller_replaces_a_pod_whose_digest_changes_and_apply_refuses_pods(
    api: KubeApi, cluster: Any
) -> None:
    body = _broker(cluster)
    broker = specs.BrokerSpec.from_body(body)
    with pytest.raises(ValueError, match="roller"):
        apply_object(api, specs.build_pod(broker))
    assert roll_pod(api, specs.build_pod(broker)).action == "Created"
    first = api.get(PODS, cluster.namespace, "one")
    assert first is not None
    body["spec"]["volumes"].append({"id": 2, "size": "1Gi"})
    outcome = roll_pod(api, specs.build_pod(specs.BrokerSpec.from_body(body)))
    assert outcome.action == "Replaced"
    # Unscheduled Pods are deleted at once, so the replacement can be created right away.
    assert roll_pod(api, specs.build_pod(specs.BrokerSpec.from_body(body))).action == "Created"
    second = api.get(PODS, cluster.namespace, "one")
    assert second is not None
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert len([v for v in second["spec"]["volumes"] if "persistentVolumeClaim" in v]) == 3


def test_reconciling_an_unchanged_broker_writes_nothing_and_is_silent(
    api: KubeApi, cluster: Any, events: Events
) -> None:
    body = _broker(cluster)
    first = reconcile_broker(api, body, now="2026-01-01T00:00:00Z", emit=events)
    assert {o.action for o in first.outcomes} == {"Created"}
    assert len(first.outcomes) == 7  # ConfigMap, Service, 2 claims, 2 LogVolumes, Pod
    assert ("Normal", "Created", "Created Pod one") in events

    def versions() -> dict[str, str]:
        found = {}
        for kind in ("configmaps", "services", "pvc", "pods", "logvolumes", "brokers"):
            for item in cluster.get(kind)["items"]:
                found[f"{kind}/{item['metadata']['name']}"] = item["metadata"]["resourceVersion"]
        return found

    before = versions()
    events.clear()
    # Within the probe stamp's period (PROBE_STAMP_SECONDS): lastProbeTime alone is not moved.
    again = reconcile_broker(
        api, cluster.get("broker", "one"), now="2026-01-01T00:00:20Z", emit=events
    )
    assert {o.action for o in again.outcomes} == {"Unchanged"}
    assert events == []
    assert versions() == before


def test_removed_empty_volume_without_delete_claim_keeps_its_claim(
    api: KubeApi, cluster: Any, events: Events
) -> None:
    body = _broker(cluster, "keep")
    body["spec"]["volumes"][1]["deleteClaim"] = False
    cluster.apply(
        json.dumps(
            {k: body[k] for k in ("apiVersion", "kind", "spec")} | {"metadata": {"name": "keep"}}
        )
    )
    reconcile_broker(api, cluster.get("broker", "keep"), now="2026-01-01T00:00:00Z", emit=events)
    cluster.kubectl(
        "patch",
        "logvolume",
        "keep-data-1",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"state": "Empty"}}),
    )
    _set_volumes(cluster, "keep", [{"id": 0, "size": "1Gi"}])
    events.clear()
    ctx = reconcile_broker(
        api, cluster.get("broker", "keep"), now="2026-01-01T00:01:00Z", emit=events
    )
    assert ctx.diff.removed == (1,)
    released = cluster.get("logvolume", "keep-data-1")
    assert released["status"]["state"] == "Released"
    assert released["status"]["claimKept"] is True
    assert released["metadata"]["labels"]["spindle.io/released"] == "true"
    claim = cluster.get("pvc", "data-1-keep")
    assert claim is not None, "a claim without deleteClaim must survive the volume's removal"
    assert claim["metadata"]["labels"]["spindle.io/released"] == "true"
    uid = claim["metadata"]["uid"]
    assert ("Normal", "VolumeReleased") in {(t, r) for t, r, _ in events}

    # The released claim is no longer the broker's: the next reconcile refuses nothing.
    again = reconcile_broker(
        api, cluster.get("broker", "keep"), now="2026-01-01T00:02:00Z", emit=events
    )
    assert again.diff.allowed
    assert again.diff.removed == ()
    reconciled = [
        c
        for c in cluster.get("broker", "keep")["status"]["conditions"]
        if c["type"] == "Reconciled"
    ]
    assert reconciled[0]["status"] == "True"

    # Declaring the volume id again takes the kept claim (and its data) back.
    _set_volumes(cluster, "keep", [{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi"}])
    events.clear()
    back = reconcile_broker(
        api, cluster.get("broker", "keep"), now="2026-01-01T00:03:00Z", emit=events
    )
    assert back.diff.allowed
    claim = cluster.get("pvc", "data-1-keep")
    assert claim["metadata"]["uid"] == uid
    assert "spindle.io/released" not in claim["metadata"]["labels"]
    back_lv = cluster.get("logvolume", "keep-data-1")
    assert back_lv["status"]["state"] == "Pending"  # leaves Released; Active once reported
    assert "claimKept" not in back_lv["status"]
    assert "spindle.io/released" not in back_lv["metadata"]["labels"]
    assert back_lv["spec"]["desiredState"] == "Active"
    assert ("Normal", "VolumeReattached") in {(t, r) for t, r, _ in events}


def test_cluster_scoped_persistent_volume_is_applied_one_way(api: KubeApi, cluster: Any) -> None:
    name = f"{cluster.namespace}-pv"
    desired = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"spindle.io/test": "apply"}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": f"/tmp/spindle-test-pv/{name}"},
        },
    }
    try:
        assert apply_object(api, desired).action == "Created"
        live = api.get(PERSISTENTVOLUMES, None, name)
        assert live is not None
        assert "namespace" not in live["metadata"]
        same_in_mi = json.loads(json.dumps(desired))
        same_in_mi["spec"]["capacity"]["storage"] = "1024Mi"
        assert apply_object(api, same_in_mi).action == "Unchanged"
        relabelled = json.loads(json.dumps(desired))
        relabelled["metadata"]["labels"]["spindle.io/test"] = "patched"
        assert apply_object(api, relabelled).action == "Updated"
        live = api.get(PERSISTENTVOLUMES, None, name)
        assert live is not None
        assert live["metadata"]["labels"]["spindle.io/test"] == "patched"
        assert any(
            pv["metadata"]["name"] == name
            for pv in api.list(PERSISTENTVOLUMES, None, "spindle.io/test=patched")
        )
        assert api.delete(PERSISTENTVOLUMES, None, name) is True
    finally:
        api.delete(PERSISTENTVOLUMES, None, name)
