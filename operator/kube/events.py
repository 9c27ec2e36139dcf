"""Events: what ``kubectl describe`` shows about what the operator did to an object."""

from __future__ import annotations

from typing import Any

from spindle.operator.kube.client import KubeApi
from spindle.operator.kube.resources import EVENTS


def post_event(
    api: KubeApi,
    involved: dict[str, Any],
    *,
    type_: str,
    reason: str,
    message: str,
    now: str,
    component: str = "spindle-operator",
) -> None:
    """Record a core/v1 Event on ``involved`` (a namespaced object)."""
    meta = involved["metadata"]
    stamp = now.replace("-", "").replace(":", "").replace("T", "").replace("Z", "").lower()
    api.create(
        EVENTS,
        meta["namespace"],
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{meta['name']}.{stamp}-",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "apiVersion": involved["apiVersion"],
                "kind": involved["kind"],
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        },
    )
