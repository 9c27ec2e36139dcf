"""A volume's claim: its name, its size and who owns it."""

from __future__ import annotations

from spindle.operator import specs
from spindle.operator.specs import BrokerSpec


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
