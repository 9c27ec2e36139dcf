"""Events: what ``kubectl describe`` shows about what the operator did to an object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spindle.operator.kube.client import KubeApi
from spindle.operator.kube.resources import EVENTS


def build_event(
    involved: Mapping[str, Any],
    *,
    type_: str,
    reason: str,
    message: str,
    now: str,
    component: str,
    generate_name: str,
) -> dict[str, Any]:
    """The core/v1 Event recording ``reason`` on ``involved`` (a namespaced object); pure, so
    the operator's synchronous client and the dashboard's asynchronous one post the same body."""
    meta = involved["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": generate_name, "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion", ""),
            "kind": involved.get("kind", ""),
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
    }


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
        build_event(
            involved,
            type_=type_,
            reason=reason,
            message=message,
            now=now,
            component=component,
            generate_name=f"{meta['name']}.{stamp}-",
        ),
    )
