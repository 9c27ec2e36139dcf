"""The Broker object the builder tests start from (one place, shared by the test modules)."""

from __future__ import annotations

from typing import Any


def broker_body(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "brokerId": 7,
        "cluster": "demo",
        "image": "spindle:test",
        "rack": "rack-a",
        "config": {"num.replica.alter.log.dirs.threads": "2"},
        "volumes": [
            {"id": 1, "size": "2Gi", "storageClass": "fast"},
            {"id": 0, "size": "1Gi", "deleteClaim": True},
        ],
    }
    base.update(spec)
    return {
        "apiVersion": "spindle.io/v1alpha1",
        "kind": "Broker",
        "metadata": {"name": "b7", "namespace": "ns", "uid": "uid-7", "generation": 3},
        "spec": base,
    }
