"""The broker Pod: one container, the ConfigMap and every volume's claim mounted."""

from __future__ import annotations

from spindle.operator.specs.broker import BrokerSpec
from spindle.operator.specs.configmap import server_properties
from spindle.operator.specs.meta import Obj, metadata, spec_hash
from spindle.operator.specs.names import (
    CONFIG_DIR,
    CONFIG_FILE,
    SPEC_HASH_ANNOTATION,
    mount_path,
    pvc_name,
)


def _pod_spec(broker: BrokerSpec) -> Obj:
    mounts: list[Obj] = [
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
    ]
    volumes: list[Obj] = [{"name": "config", "configMap": {"name": broker.name}}]
    for volume in broker.volumes:
        mounts.append({"name": f"data-{volume.id}", "mountPath": mount_path(volume.id)})
        volumes.append(
            {
                "name": f"data-{volume.id}",
                "persistentVolumeClaim": {"claimName": pvc_name(broker.name, volume.id)},
            }
        )
    container: Obj = {
        "name": "broker",
        "image": broker.image,
        "imagePullPolicy": broker.image_pull_policy,
        "command": ["spindle-broker", "--config", f"{CONFIG_DIR}/{CONFIG_FILE}"],
        "ports": [{"name": "kafka", "containerPort": broker.port, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": "kafka"}, "periodSeconds": 5},
        "volumeMounts": mounts,
    }
    if broker.resources:
        container["resources"] = dict(broker.resources)
    return {
        "containers": [container],
        "volumes": volumes,
        "restartPolicy": "Always",
        "hostname": broker.name,
        "subdomain": broker.name,
        "terminationGracePeriodSeconds": 60,
    }


def build_pod(broker: BrokerSpec) -> Obj:
    """The broker Pod, mounting every volume and the ConfigMap.

    A Pod's volumes cannot be edited in place, so the Pod carries a digest of its spec and
    of its configuration; the apply layer replaces the Pod when the digest changes (a volume
    added or removed, a setting changed) and leaves it alone otherwise (a volume grown).
    """
    spec = _pod_spec(broker)
    digest = spec_hash({"pod": spec, "config": server_properties(broker)})
    meta = metadata(broker, broker.name)
    meta["annotations"] = {SPEC_HASH_ANNOTATION: digest}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
