"""Metadata every object a Broker owns carries: its labels and its owner reference."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from spindle.operator.specs.broker import BrokerSpec
from spindle.operator.specs.names import (
    API_VERSION,
    LABEL_BROKER,
    LABEL_BROKER_ID,
    LABEL_CLUSTER,
    MANAGED_BY,
)

Obj = dict[str, Any]


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


def metadata(
    broker: BrokerSpec, name: str, *, owned: bool = True, extra: Mapping[str, str] | None = None
) -> Obj:
    """``metadata`` of an object the Broker owns (in its namespace, with its labels)."""
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
