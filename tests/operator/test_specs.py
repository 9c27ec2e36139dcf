"""Pure builders: a Broker turns into exactly the objects it should own."""

from __future__ import annotations

from typing import Any

import pytest
from spindle.operator import specs
from spindle.operator.specs import BrokerSpec, SpecError


def broker_body(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "brokerId": 7,
        "cluster": "demo",
        "image": "spindle:test",
        "rack": "rack-a",
        "config": {"num.replica.alter.log.dirs.threads": "2"},
        "volumes": [
            {"id": 1, "size": "2Gi", "storageClass": "fast"},
            {"id": 0, "size": "1Gi", "deleteClaim": True},
        ],
    }
    base.update(spec)
    return {
        "apiVersion": "spindle.io/v1alpha1",
        "kind": "Broker",
        "metadata": {"name": "b7", "namespace": "ns", "uid": "uid-7", "generation": 3},
        "spec": base,
    }


@pytest.fixture
def broker() -> BrokerSpec:
    return BrokerSpec.from_body(broker_body())


def test_volumes_are_read_in_id_order_with_exact_sizes(broker: BrokerSpec) -> None:
    assert [v.id for v in broker.volumes] == [0, 1]
    assert [v.size_bytes for v in broker.volumes] == [2**30, 2 * 2**30]
    assert broker.volumes[0].delete_claim is True
    assert broker.volumes[1].delete_claim is False
    assert broker.generation == 3


def test_pvc_is_named_data_id_broker_and_requests_the_size(broker: BrokerSpec) -> None:
    pvc = specs.build_pvc(broker, broker.volumes[1])
    assert pvc["metadata"]["name"] == "data-1-b7"
    assert pvc["metadata"]["namespace"] == "ns"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "2Gi"
    assert pvc["spec"]["storageClassName"] == "fast"
    assert pvc["metadata"]["labels"][specs.LABEL_VOLUME_ID] == "1"


def test_pvc_is_owned_only_when_delete_claim_is_true(broker: BrokerSpec) -> None:
    deleted = specs.build_pvc(broker, broker.volumes[0])
    kept = specs.build_pvc(broker, broker.volumes[1])
    assert deleted["metadata"]["ownerReferences"] == [specs.owner_reference(broker)]
    assert kept["metadata"]["ownerReferences"] == []
    assert "storageClassName" not in deleted["spec"]


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


def test_log_dirs_lists_exactly_the_mounted_volumes(broker: BrokerSpec) -> None:
    properties = specs.server_properties(broker)
    lines = dict(line.split("=", 1) for line in properties.splitlines())
    assert lines["log.dirs"] == "/var/lib/spindle/data-0,/var/lib/spindle/data-1"
    assert lines["node.id"] == "7"
    assert lines["broker.rack"] == "rack-a"
    assert lines["num.replica.alter.log.dirs.threads"] == "2"
    assert lines["advertised.listeners"] == "PLAINTEXT://b7.ns.svc:9092"
    cm = specs.build_configmap(broker)
    assert cm["data"][specs.CONFIG_FILE] == properties


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


def test_service_is_headless_and_selects_only_this_broker(broker: BrokerSpec) -> None:
    service = specs.build_service(broker)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"][specs.LABEL_BROKER] == "b7"
    assert service["spec"]["ports"][0]["port"] == 9092
    pod_labels = specs.build_pod(broker)["metadata"]["labels"]
    assert all(pod_labels[k] == v for k, v in service["spec"]["selector"].items())


def test_logvolume_names_its_broker_and_leaves_desired_state_to_the_user(
    broker: BrokerSpec,
) -> None:
    lv = specs.build_logvolume(broker, broker.volumes[1])
    assert lv["metadata"]["name"] == "b7-data-1"
    assert lv["spec"] == {"broker": "b7", "brokerId": 7, "volumeId": 1}
    assert lv["metadata"]["ownerReferences"] == [specs.owner_reference(broker)]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"config": {"log.dirs": "/x"}}, "spec.config may not set log.dirs"),
        ({"volumes": []}, "at least one volume"),
        ({"volumes": [{"id": 0, "size": "1Gi"}, {"id": 0, "size": "2Gi"}]}, "appears twice"),
        ({"volumes": [{"id": 0, "size": "lots"}]}, "size quantity"),
    ],
)
def test_invalid_spec_is_refused_naming_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        BrokerSpec.from_body(broker_body(**change))


def test_conditions_keep_transition_time_until_status_changes() -> None:
    first = specs.merge_conditions(
        [], [specs.Condition("Ready", "False", "Pending", "m")], now="T1", generation=1
    )
    same = specs.merge_conditions(
        first, [specs.Condition("Ready", "False", "Pending", "m2")], now="T2", generation=2
    )
    flipped = specs.merge_conditions(
        same, [specs.Condition("Ready", "True", "Running", "ok")], now="T3", generation=2
    )
    assert first[0]["lastTransitionTime"] == "T1"
    assert same[0]["lastTransitionTime"] == "T1"
    assert same[0]["message"] == "m2"
    assert flipped[0]["lastTransitionTime"] == "T3"
    assert set(flipped[0]) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }


def test_broker_phase_follows_pod_readiness_and_volumes() -> None:
    ready = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    assert specs.broker_phase(None, 0, 3) == "Pending"
    assert specs.broker_phase({"status": {"phase": "Pending"}}, 0, 3) == "Pending"
    assert specs.broker_phase(ready, 3, 3) == "Running"
    assert specs.broker_phase(ready, 2, 3) == "Degraded"
    assert specs.broker_phase({"status": {"phase": "Failed"}}, 3, 3) == "Failed"


def test_used_percent_is_unknown_until_a_volume_reports() -> None:
    assert specs.used_percent([{"totalBytes": 100}]) is None
    assert specs.used_percent([{"totalBytes": 100, "usedBytes": 25}, {"totalBytes": 100}]) == (
        "25.0%"
    )


def test_logvolume_status_uses_claim_capacity_once_bound(broker: BrokerSpec) -> None:
    volume = broker.volumes[0]
    pending = specs.logvolume_status(
        volume, broker, current={}, pvc={"status": {"phase": "Pending"}}, generation=1, now="T"
    )
    assert pending["state"] == "Pending"
    assert pending["totalBytes"] == 2**30
    assert pending["usage"] == "?/1Gi"
    assert pending["path"] == "/var/lib/spindle/data-0"
    bound = specs.logvolume_status(
        volume,
        broker,
        current={"state": "Active", "usedBytes": 512 * 2**20},
        pvc={
            "spec": {"volumeName": "pv-1"},
            "status": {"phase": "Bound", "capacity": {"storage": "2Gi"}},
        },
        generation=1,
        now="T",
    )
    assert bound["state"] == "Active"
    assert bound["pvName"] == "pv-1"
    assert bound["usage"] == "512Mi/2Gi"


def test_configmap_is_a_config_the_broker_accepts(broker: BrokerSpec) -> None:
    """Contract with spindle-broker: the operator's server.properties passes the broker's own
    validation (which refuses unknown keys) and yields the same node id, rack and log dirs."""
    from spindle.broker.server.config import parse_properties, settings_from_properties

    text = specs.build_configmap(broker)["data"][specs.CONFIG_FILE]
    broker_settings, storage_settings = settings_from_properties(parse_properties(text))
    assert broker_settings.node_id == 7
    assert broker_settings.broker_rack == "rack-a"
    assert storage_settings.log_dirs == specs.log_dirs(broker)
    assert storage_settings.num_replica_alter_log_dirs_threads == 2
    assert [(lst.host, lst.port) for lst in broker_settings.advertised_listener_list] == [
        ("b7.ns.svc", 9092)
    ]
