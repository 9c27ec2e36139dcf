"""The broker's ``server.properties`` and the ConfigMap that carries it into the Pod."""

from __future__ import annotations

from spindle.operator.specs.broker import BrokerSpec, log_dirs
from spindle.operator.specs.meta import Obj, metadata
from spindle.operator.specs.names import CONFIG_FILE


def server_properties(broker: BrokerSpec) -> str:
    """The broker's ``server.properties``: Kafka setting names, one per line, sorted.

    ``node.id``, ``broker.rack`` and ``log.dirs`` come from the Broker's fields; the user's
    ``spec.config`` adds everything else (it may not override those, see ``RESERVED_CONFIG``).
    """
    service = f"{broker.name}.{broker.namespace}.svc"
    settings: dict[str, str] = {
        "listeners": f"PLAINTEXT://0.0.0.0:{broker.port}",
        "advertised.listeners": f"PLAINTEXT://{service}:{broker.port}",
    }
    settings.update(broker.config)
    settings["node.id"] = str(broker.broker_id)
    settings["log.dirs"] = ",".join(log_dirs(broker))
    if broker.rack is not None:
        settings["broker.rack"] = broker.rack
    lines = [f"{key}={settings[key]}" for key in sorted(settings)]
    return "\n".join(lines) + "\n"


def build_configmap(broker: BrokerSpec) -> Obj:
    """The ConfigMap holding ``server.properties``, mounted read-only into the Pod."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(broker, broker.name),
        "data": {CONFIG_FILE: server_properties(broker)},
    }
