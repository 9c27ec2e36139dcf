"""Pure builders: a Broker custom resource → the Kubernetes objects it should own.

Everything here turns dicts into dicts. No API calls, no clock reads, no environment: the
handlers feed in what they read and apply what comes out, so every object the operator
creates is unit-tested by looking at the returned dict (the CloudNativePG ``pkg/specs``
shape). ``build_<thing>`` returns the complete desired object; the apply layer decides
whether the live object differs.

Naming is part of the contract with users and with later issues:

* PVC ``data-<id>-<broker>``, mounted at ``/var/lib/spindle/data-<id>``;
* Pod, ConfigMap and Service share the Broker's name (one broker, one Pod: a StatefulSet would
  let the broker's disks outlive its identity, which JBOD remediation cannot allow);
* LogVolume ``<broker>-data-<id>``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spindle.operator.quantity import QuantityError, format_bytes, quantity_bytes

GROUP = "spindle.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
DATA_ROOT = "/var/lib/spindle"
CONFIG_DIR = "/etc/spindle"
CONFIG_FILE = "server.properties"
MANAGED_BY = "spindle-operator"
SPEC_HASH_ANNOTATION = "spindle.io/spec-hash"
LABEL_BROKER = "spindle.io/broker"
LABEL_BROKER_ID = "spindle.io/broker-id"
LABEL_CLUSTER = "spindle.io/cluster"
LABEL_VOLUME_ID = "spindle.io/volume-id"
# Settings derived from the Broker's own fields; the CRD refuses them in spec.config too.
RESERVED_CONFIG = frozenset({"node.id", "broker.id", "broker.rack", "log.dir", "log.dirs"})
ONLINE_STATES = frozenset({"Active", "Cordoned", "Draining"})

Obj = dict[str, Any]


class SpecError(ValueError):
    """A Broker spec the operator cannot act on; the message names the field and why."""


@dataclass(frozen=True)
class VolumeSpec:
    """One entry of ``spec.volumes``."""

    id: int
    size: str
    size_bytes: int
    storage_class: str | None = None
    delete_claim: bool = False


@dataclass(frozen=True)
class BrokerSpec:
    """A validated Broker custom resource: the only input the builders accept."""

    name: str
    namespace: str
    uid: str
    broker_id: int
    cluster: str
    image: str
    image_pull_policy: str
    port: int
    volumes: tuple[VolumeSpec, ...]
    rack: str | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, Any] = field(default_factory=dict)
    generation: int = 0

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> BrokerSpec:
        """Read a Broker object (as the API returns it) into a ``BrokerSpec``.

        The CRD already enforces types; this re-checks what the builders depend on, because
        an operator must fail with a readable message rather than build a broken Pod from an
        object written before a schema change.
        """
        meta = body.get("metadata") or {}
        spec = body.get("spec") or {}
        name = meta.get("name")
        if not name:
            raise SpecError("metadata.name is missing")
        try:
            broker_id = int(spec["brokerId"])
            cluster = str(spec["cluster"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(f"Broker {name}: spec.brokerId and spec.cluster are required") from exc
        if broker_id < 0:
            raise SpecError(f"Broker {name}: spec.brokerId must be >= 0, got {broker_id}")
        config = {str(k): str(v) for k, v in (spec.get("config") or {}).items()}
        reserved = sorted(RESERVED_CONFIG & config.keys())
        if reserved:
            raise SpecError(
                f"Broker {name}: spec.config may not set {', '.join(reserved)}; "
                "they come from brokerId, rack and volumes"
            )
        volumes: list[VolumeSpec] = []
        seen: set[int] = set()
        for index, raw in enumerate(spec.get("volumes") or []):
            try:
                volume_id = int(raw["id"])
                size = str(raw["size"])
                size_bytes = quantity_bytes(raw["size"])
            except (KeyError, TypeError, ValueError, QuantityError) as exc:
                raise SpecError(
                    f"Broker {name}: spec.volumes[{index}] needs an integer id and a size "
                    f"quantity ({exc})"
                ) from exc
            if volume_id in seen:
                raise SpecError(f"Broker {name}: volume id {volume_id} appears twice")
            if size_bytes <= 0:
                raise SpecError(f"Broker {name}: volume {volume_id} size must be positive")
            seen.add(volume_id)
            volumes.append(
                VolumeSpec(
                    id=volume_id,
                    size=size,
                    size_bytes=size_bytes,
                    storage_class=raw.get("storageClass"),
                    delete_claim=bool(raw.get("deleteClaim", False)),
                )
            )
        if not volumes:
            raise SpecError(f"Broker {name}: spec.volumes needs at least one volume")
        return cls(
            name=name,
            namespace=meta.get("namespace") or "default",
            uid=meta.get("uid") or "",
            generation=int(meta.get("generation") or 0),
            broker_id=broker_id,
            cluster=cluster,
            image=spec.get("image") or "spindle:latest",
            image_pull_policy=spec.get("imagePullPolicy") or "IfNotPresent",
            port=int(spec.get("port") or 9092),
            rack=spec.get("rack") or None,
            config=config,
            resources=dict(spec.get("resources") or {}),
            volumes=tuple(sorted(volumes, key=lambda v: v.id)),
        )


# --- names ---------------------------------------------------------------------------------


def pvc_name(broker: str, volume_id: int) -> str:
    """``data-<id>-<broker>``: the claim name users see in ``kubectl get pvc``."""
    return f"data-{volume_id}-{broker}"


def logvolume_name(broker: str, volume_id: int) -> str:
    """``<broker>-data-<id>``: sorts a broker's LogVolumes together in ``kubectl get``."""
    return f"{broker}-data-{volume_id}"


def mount_path(volume_id: int) -> str:
    """Where volume ``id`` is mounted in the broker container; one entry of ``log.dirs``."""
    return f"{DATA_ROOT}/data-{volume_id}"


def log_dirs(broker: BrokerSpec) -> list[str]:
    """``log.dirs`` of the broker: exactly its volumes' mount paths, in volume id order."""
    return [mount_path(v.id) for v in broker.volumes]


# --- metadata ------------------------------------------------------------------------------


def labels(broker: BrokerSpec, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Labels every owned object carries; selectors and ``kubectl get -l`` rely on them."""
    result = {
        "app.kubernetes.io/name": "spindle-broker",
        "app.kubernetes.io/instance": broker.name,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        LABEL_CLUSTER: broker.cluster,
        LABEL_BROKER: broker.name,
        LABEL_BROKER_ID: str(broker.broker_id),
    }
    result.update(extra or {})
    return result


def owner_reference(broker: BrokerSpec) -> Obj:
    """Controller owner reference to the Broker: the garbage collector deletes what carries it."""
    return {
        "apiVersion": API_VERSION,
        "kind": "Broker",
        "name": broker.name,
        "uid": broker.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(
    broker: BrokerSpec, name: str, *, owned: bool = True, extra: Mapping[str, str] | None = None
) -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": broker.namespace,
        "labels": labels(broker, extra),
        # An empty list is explicit: the apply layer then removes a stale owner reference.
        "ownerReferences": [owner_reference(broker)] if owned else [],
    }
    return meta


def spec_hash(obj: Any) -> str:
    """Stable short digest of a JSON-able value (key order does not matter)."""
    encoded = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


# --- builders ------------------------------------------------------------------------------


def build_pvc(broker: BrokerSpec, volume: VolumeSpec) -> Obj:
    """The claim for one volume.

    A claim with ``deleteClaim: false`` deliberately has no owner reference: an owner
    reference is exactly what makes the garbage collector delete the claim with its Broker,
    and such a claim must keep its data for a later broker. It is still found by its labels.
    """
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "volumeMode": "Filesystem",
        "resources": {"requests": {"storage": volume.size}},
    }
    if volume.storage_class is not None:
        spec["storageClassName"] = volume.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(
            broker,
            pvc_name(broker.name, volume.id),
            owned=volume.delete_claim,
            extra={LABEL_VOLUME_ID: str(volume.id)},
        ),
        "spec": spec,
    }


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
        "metadata": _metadata(broker, broker.name),
        "data": {CONFIG_FILE: server_properties(broker)},
    }


def build_service(broker: BrokerSpec) -> Obj:
    """A headless Service: the broker's stable DNS name, which its advertised listener uses.

    Headless because Kafka clients must reach this broker, not any broker; unready addresses
    are published because a broker must be reachable by the controller while it starts.
    """
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(broker, broker.name),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {LABEL_BROKER: broker.name, "app.kubernetes.io/name": "spindle-broker"},
            "ports": [
                {"name": "kafka", "port": broker.port, "targetPort": "kafka", "protocol": "TCP"}
            ],
        },
    }


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
    metadata = _metadata(broker, broker.name)
    metadata["annotations"] = {SPEC_HASH_ANNOTATION: digest}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def build_logvolume(broker: BrokerSpec, volume: VolumeSpec) -> Obj:
    """The LogVolume for one volume. ``spec.desiredState`` is the user's and is not set here:
    the CRD defaults it to Active on creation and the operator never overwrites it."""
    return {
        "apiVersion": API_VERSION,
        "kind": "LogVolume",
        "metadata": _metadata(
            broker,
            logvolume_name(broker.name, volume.id),
            extra={LABEL_VOLUME_ID: str(volume.id)},
        ),
        "spec": {"broker": broker.name, "brokerId": broker.broker_id, "volumeId": volume.id},
    }


# --- status --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """A kubectl-standard condition before it gets its transition time."""

    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str


def merge_conditions(
    existing: Sequence[Mapping[str, Any]],
    wanted: Sequence[Condition],
    *,
    now: str,
    generation: int,
) -> list[Obj]:
    """Conditions as they should be written: ``lastTransitionTime`` moves only when the
    status of a condition changes (kubectl's and controller-runtime's convention)."""
    by_type = {c.get("type"): c for c in existing}
    result: list[Obj] = []
    for cond in wanted:
        old = by_type.get(cond.type)
        since = old.get("lastTransitionTime") if old and old.get("status") == cond.status else None
        result.append(
            {
                "type": cond.type,
                "status": cond.status,
                "reason": cond.reason,
                "message": cond.message,
                "lastTransitionTime": since or now,
                "observedGeneration": generation,
            }
        )
    return result


def logvolume_status(
    volume: VolumeSpec,
    broker: BrokerSpec,
    *,
    current: Mapping[str, Any],
    pvc: Mapping[str, Any] | None,
    generation: int,
    now: str,
) -> Obj:
    """Status of a LogVolume from what the operator itself can see (the claim).

    ``state`` stays what was last observed (the broker's reports set it in a later issue);
    a LogVolume nobody has reported on yet is ``Pending``. Capacity is the bound claim's,
    or its request until it is bound.
    """
    pvc_status = (pvc or {}).get("status") or {}
    capacity = (pvc_status.get("capacity") or {}).get("storage")
    total = quantity_bytes(capacity) if capacity else volume.size_bytes
    used = current.get("usedBytes")
    state = current.get("state") or "Pending"
    status: Obj = {
        "observedGeneration": generation,
        "state": state,
        "path": mount_path(volume.id),
        "pvcName": pvc_name(broker.name, volume.id),
        "claimPhase": pvc_status.get("phase") or "Pending",
        "totalBytes": total,
        "usage": f"{format_bytes(used) if isinstance(used, int) else '?'}/{format_bytes(total)}",
        "lastTransitionTime": current.get("lastTransitionTime") or now,
    }
    pv = ((pvc or {}).get("spec") or {}).get("volumeName")
    if pv:
        status["pvName"] = pv
    return status


def broker_phase(pod: Mapping[str, Any] | None, volumes_online: int, volumes_total: int) -> str:
    """Pending until the Pod runs and is ready; then Running, or Degraded when a log
    directory is not online; Failed when the Pod failed."""
    pod_status = (pod or {}).get("status") or {}
    phase = pod_status.get("phase")
    if phase == "Failed":
        return "Failed"
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod_status.get("conditions") or []
    )
    if phase != "Running" or not ready:
        return "Pending"
    return "Running" if volumes_online == volumes_total else "Degraded"


def used_percent(volume_statuses: Sequence[Mapping[str, Any]]) -> str | None:
    """Used bytes over capacity across the directories the broker has reported on; ``None``
    (column left empty) until it has reported on any — unknown is not zero."""
    used = total = 0
    for status in volume_statuses:
        if isinstance(status.get("usedBytes"), int) and isinstance(status.get("totalBytes"), int):
            used += status["usedBytes"]
            total += status["totalBytes"]
    if total <= 0:
        return None
    return f"{100 * used / total:.1f}%"
