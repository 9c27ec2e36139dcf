"""The headless Service that gives a broker its stable DNS name."""

from __future__ import annotations

from spindle.operator.specs.broker import BrokerSpec
from spindle.operator.specs.meta import Obj, metadata
from spindle.operator.specs.names import LABEL_BROKER


def build_service(broker: BrokerSpec) -> Obj:
    """A headless Service: the broker's stable DNS name, which its advertised listener uses.

    Headless because Kafka clients must reach this broker, not any broker; unready addresses
    are published because a broker must be reachable by the controller while it starts.
    """
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(broker, broker.name),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {LABEL_BROKER: broker.name, "app.kubernetes.io/name": "spindle-broker"},
            "ports": [
                {"name": "kafka", "port": broker.port, "targetPort": "kafka", "protocol": "TCP"}
            ],
        },
    }
