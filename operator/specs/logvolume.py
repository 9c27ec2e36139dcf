"""The LogVolume of one of a Broker's volumes, and its status as the operator sees it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spindle.operator.quantity import format_bytes, quantity_bytes
from spindle.operator.specs.broker import BrokerSpec, VolumeSpec
from spindle.operator.specs.meta import Obj, metadata
from spindle.operator.specs.names import (
    API_VERSION,
    LABEL_VOLUME_ID,
    logvolume_name,
    mount_path,
    pvc_name,
)


def build_logvolume(broker: BrokerSpec, volume: VolumeSpec) -> Obj:
    """The LogVolume for one volume. ``spec.desiredState`` is the user's and is not set here:
    the CRD defaults it to Active on creation and the operator never overwrites it."""
    return {
        "apiVersion": API_VERSION,
        "kind": "LogVolume",
        "metadata": metadata(
            broker,
            logvolume_name(broker.name, volume.id),
            extra={LABEL_VOLUME_ID: str(volume.id)},
        ),
        "spec": {"broker": broker.name, "brokerId": broker.broker_id, "volumeId": volume.id},
    }


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
