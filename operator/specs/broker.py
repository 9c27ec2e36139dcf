"""The Broker custom resource, validated: the only input the builders accept.

``BrokerSpec.from_body`` reads a Broker object (as the API returns it) and refuses, with a
message naming the field, what the builders could not turn into working objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spindle.operator.quantity import QuantityError, quantity_bytes
from spindle.operator.specs.names import mount_path

# Settings derived from the Broker's own fields; the CRD refuses them in spec.config too.
RESERVED_CONFIG = frozenset({"node.id", "broker.id", "broker.rack", "log.dir", "log.dirs"})


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
    #: ``spec.remediation.policy``; None: the operator's default (``--remediation-policy``).
    remediation_policy: str | None = None

    @classmethod
    def from_body(
        cls, body: Mapping[str, Any], *, config_defaults: Mapping[str, str] | None = None
    ) -> BrokerSpec:
        """Read a Broker object (as the API returns it) into a ``BrokerSpec``.

        ``config_defaults`` are broker settings the operator was started with (the chart's
        etcd endpoints, ``spindle-operator run --etcd-endpoints``): the Broker's own
        ``spec.config`` wins over them.

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
        config = {**(config_defaults or {}), **config}
        reserved = sorted(RESERVED_CONFIG & config.keys())
        if reserved:
            raise SpecError(
                f"Broker {name}: spec.config may not set {', '.join(reserved)}; "
                "they come from brokerId, rack and volumes"
            )
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
            volumes=_volumes(name, spec.get("volumes") or []),
            remediation_policy=_remediation_policy(name, spec.get("remediation")),
        )


REMEDIATION_POLICIES = ("Auto", "Manual", "MoveReplicas", "ReplaceVolume")


def _remediation_policy(name: str, raw: Any) -> str | None:
    """``spec.remediation.policy``: one of ``REMEDIATION_POLICIES`` or absent."""
    if raw is None:
        return None
    policy = raw.get("policy") if isinstance(raw, Mapping) else raw
    if policy is None:
        return None
    if policy not in REMEDIATION_POLICIES:
        raise SpecError(
            f"Broker {name}: spec.remediation.policy must be one of "
            f"{', '.join(REMEDIATION_POLICIES)}, got {policy!r}"
        )
    return str(policy)


def _volumes(name: str, entries: Sequence[Mapping[str, Any]]) -> tuple[VolumeSpec, ...]:
    """``spec.volumes`` in volume id order: ids unique, sizes positive quantities, not empty."""
    volumes: list[VolumeSpec] = []
    seen: set[int] = set()
    for index, raw in enumerate(entries):
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
    return tuple(sorted(volumes, key=lambda v: v.id))


def log_dirs(broker: BrokerSpec) -> list[str]:
    """``log.dirs`` of the broker: exactly its volumes' mount paths, in volume id order."""
    return [mount_path(v.id) for v in broker.volumes]
