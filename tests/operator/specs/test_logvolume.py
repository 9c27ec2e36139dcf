"""A volume's LogVolume and the status the operator writes on it."""

from __future__ import annotations

from spindle.operator import specs
from spindle.operator.specs import BrokerSpec


def test_logvolume_names_its_broker_and_leaves_desired_state_to_the_user(
    broker: BrokerSpec,
) -> None:
    lv = specs.build_logvolume(broker, broker.volumes[1])
    assert lv["metadata"]["name"] == "b7-data-1"
    assert lv["spec"] == {"broker": "b7", "brokerId": 7, "volumeId": 1}
    assert lv["metadata"]["ownerReferences"] == [specs.owner_reference(broker)]


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
