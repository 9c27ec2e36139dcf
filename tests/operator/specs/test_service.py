"""The broker's Service is headless and reaches only its own Pod."""

from __future__ import annotations

from spindle.operator import specs
from spindle.operator.specs import BrokerSpec


def test_service_is_headless_and_selects_only_this_broker(broker: BrokerSpec) -> None:
    service = specs.build_service(broker)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"][specs.LABEL_BROKER] == "b7"
    assert service["spec"]["ports"][0]["port"] == 9092
    pod_labels = specs.build_pod(broker)["metadata"]["labels"]
    assert all(pod_labels[k] == v for k, v in service["spec"]["selector"].items())
