"""Apply one way: read, compare, create or patch only when different, say what was done.

Every owned object goes through ``apply_object``. The comparison asks "does the live object
already carry every field the builder set, with the same value?" (``is_subset``): fields the
API server fills in (defaults, status, resourceVersion) never count as differences, so a
reconcile of an unchanged Broker writes nothing and emits no Event. Pods are the exception:
their spec is immutable, so they are compared by the builder's digest annotation and
replaced when it differs.

``differences`` and ``is_subset`` are pure; ``apply_object`` does the I/O through ``KubeApi``
and returns an ``Outcome`` for the caller to turn into an Event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spindle.operator.kube.client import KubeApi, KubeError
from spindle.operator.kube.resources import RESOURCES_BY_KIND
from spindle.operator.quantity import QuantityError, parse_quantity
from spindle.operator.specs.names import SPEC_HASH_ANNOTATION

# Keys whose values are quantities: "1Gi" and "1024Mi" are the same size.
QUANTITY_KEYS = frozenset({"storage", "cpu", "memory", "ephemeral-storage"})


def _same_quantity(a: Any, b: Any) -> bool:
    try:
        return parse_quantity(a) == parse_quantity(b)
    except (QuantityError, TypeError):
        return False


def differences(desired: Any, actual: Any, path: str = "") -> list[str]:
    """Paths where ``actual`` lacks or contradicts a value of ``desired``.

    Dicts: only the desired keys are checked. Lists: same length, items compared in order.
    A desired empty list or dict matches a missing one (the server omits empty fields).
    """
    if isinstance(desired, Mapping):
        if not desired and not actual:
            return []
        if not isinstance(actual, Mapping):
            return [path or "."]
        found: list[str] = []
        for key, value in desired.items():
            sub = f"{path}.{key}"
            if key in QUANTITY_KEYS and _same_quantity(value, actual.get(key)):
                continue
            found.extend(differences(value, actual.get(key), sub))
        return found
    if isinstance(desired, list):
        if not desired and not actual:
            return []
        if not isinstance(actual, list) or len(actual) != len(desired):
            return [path or "."]
        found = []
        for index, (want, have) in enumerate(zip(desired, actual, strict=True)):
            found.extend(differences(want, have, f"{path}[{index}]"))
        return found
    return [] if desired == actual else [path or "."]


def is_subset(desired: Any, actual: Any) -> bool:
    return not differences(desired, actual)


def _compared(desired: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a desired object the live one must match."""
    meta = desired["metadata"]
    compared: dict[str, Any] = {
        "metadata": {
            "labels": meta.get("labels", {}),
            "ownerReferences": meta.get("ownerReferences", []),
        }
    }
    if desired["kind"] == "Pod":
        compared["metadata"]["annotations"] = {
            SPEC_HASH_ANNOTATION: meta["annotations"][SPEC_HASH_ANNOTATION]
        }
        return compared
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
    if kind == "Pod":
        # A Pod's volumes cannot change in place; the next reconcile creates the new one
        # once the old one is gone.
        if live.get("metadata", {}).get("deletionTimestamp") is not None:
            return Outcome("Unchanged", kind, name, "old Pod still terminating")
        api.delete(resource, namespace, name)
        return Outcome("Replaced", kind, name, "spec changed: " + ", ".join(diff))
    api.patch(resource, namespace, name, compared)
    return Outcome("Updated", kind, name, ", ".join(diff))
