"""Apply one way: read, compare, create or patch only when different, say what was done.

Every owned object goes through ``apply_object``. The comparison asks "does the live object
already carry every field the builder set, with the same value?" (``is_subset``): fields the
API server fills in (defaults, status, resourceVersion) never count as differences, so a
reconcile of an unchanged Broker writes nothing and emits no Event. Pods are not applied
here: their spec is immutable, so a changed one means deleting the Pod -- a broker restart,
which is the roller's decision (``spindle.operator.reconcile.roller`` with the pure
``spindle.operator.decisions.roll``), never a side effect of a generic apply.

``differences`` and ``is_subset`` (pure, ``spindle.operator.decisions.compare``) are
re-exported; ``apply_object`` does the I/O through ``KubeApi`` and returns an ``Outcome`` for
the caller to turn into an Event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spindle.operator.decisions.compare import differences, is_subset
from spindle.operator.kube.client import KubeApi, KubeError
from spindle.operator.kube.resources import RESOURCES_BY_KIND

__all__ = ["Outcome", "apply_object", "differences", "is_subset"]


def _compared(desired: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a desired object the live one must match."""
    meta = desired["metadata"]
    compared: dict[str, Any] = {
        "metadata": {
            "labels": meta.get("labels", {}),
            "ownerReferences": meta.get("ownerReferences", []),
        }
    }
    if desired["kind"] == "PersistentVolumeClaim":
        # Only the size of a claim can change after creation (class changes are refused
        # earlier by the storage diff).
        compared["spec"] = {
            "resources": {
                "requests": {"storage": desired["spec"]["resources"]["requests"]["storage"]}
            }
        }
        return compared
    for key, value in desired.items():
        if key not in ("apiVersion", "kind", "metadata"):
            compared[key] = value
    return compared


@dataclass(frozen=True)
class Outcome:
    """What ``apply_object`` did: ``Created``, ``Updated``, ``Replaced`` or ``Unchanged``."""

    action: str
    kind: str
    name: str
    detail: str = ""

    @property
    def changed(self) -> bool:
        return self.action != "Unchanged"

    def message(self) -> str:
        text = f"{self.action} {self.kind} {self.name}"
        return f"{text} ({self.detail})" if self.detail else text


def apply_object(api: KubeApi, desired: Mapping[str, Any]) -> Outcome:
    """Make the live object match ``desired`` in one direction (builder → cluster)."""
    kind = desired["kind"]
    if kind == "Pod":
        # A Pod's spec is immutable: changing one means deleting it, a broker restart. That
        # is the roller's decision (``spindle.operator.reconcile.roller``), never apply's.
        raise ValueError("Pods are not applied: spindle.operator.reconcile.roller rolls them")
    resource = RESOURCES_BY_KIND[kind]
    # Cluster-scoped objects (PersistentVolumes) have no namespace.
    namespace = desired["metadata"]["namespace"] if resource.namespaced else None
    name = desired["metadata"]["name"]
    live = api.get(resource, namespace, name)
    if live is None:
        try:
            api.create(resource, namespace, dict(desired))
        except KubeError as exc:
            if exc.status != 409:
                raise
            # Created concurrently (a resume and a timer); compare against that one.
            live = api.get(resource, namespace, name)
            if live is None:
                raise
        else:
            return Outcome("Created", kind, name)
    compared = _compared(desired)
    diff = differences(compared, live)
    if not diff:
        return Outcome("Unchanged", kind, name)
    api.patch(resource, namespace, name, compared)
    return Outcome("Updated", kind, name, ", ".join(diff))
