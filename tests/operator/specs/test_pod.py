"""The broker Pod mounts exactly its volumes and is replaced only when that set changes."""

from __future__ import annotations

from spindle.operator import specs
from spindle.operator.specs import BrokerSpec

from .bodies import broker_body


def test_pod_mounts_each_volume_at_its_data_path_and_nothing_else(broker: BrokerSpec) -> None:
    pod = specs.build_pod(broker)
    container = pod["spec"]["containers"][0]
    data_mounts = {
        m["mountPath"]: m["name"] for m in container["volumeMounts"] if m["name"] != "config"
    }
    assert data_mounts == {"/var/lib/spindle/data-0": "data-0", "/var/lib/spindle/data-1": "data-1"}
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {"data-0": "data-0-b7", "data-1": "data-1-b7"}
    assert pod["kind"] == "Pod"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Broker"
    assert pod["metadata"]["ownerReferences"][0]["controller"] is True


def test_pod_digest_changes_with_volume_set_but_not_with_size() -> None:
    base = specs.build_pod(BrokerSpec.from_body(broker_body()))
    grown = specs.build_pod(
        BrokerSpec.from_body(
            broker_body(volumes=[{"id": 1, "size": "9Gi"}, {"id": 0, "size": "1Gi"}])
        )
    )
    added = specs.build_pod(
        BrokerSpec.from_body(
            broker_body(
                volumes=[
                    {"id": 1, "size": "2Gi"},
                    {"id": 0, "size": "1Gi"},
                    {"id": 2, "size": "1Gi"},
                ]
            )
        )
    )
    digest = specs.SPEC_HASH_ANNOTATION
    assert grown["metadata"]["annotations"][digest] == base["metadata"]["annotations"][digest]
    assert added["metadata"]["annotations"][digest] != base["metadata"]["annotations"][digest]
