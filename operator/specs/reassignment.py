"""Reassignment objects the operator creates: a drain's (owned by the draining LogVolume) and
a Rebalance's batches (owned by the Rebalance). Pure builders; *which* partitions go where is
decided in ``spindle.operator.decisions`` (``drain``, ``proposal``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from spindle.operator.specs.broker import BrokerSpec
from spindle.operator.specs.meta import Obj, labels
from spindle.operator.specs.names import API_VERSION, DRAIN_LABEL

TP = tuple[str, int]


class Move(Protocol):
    """A partition's new replica list and directories (``decisions.drain.CrossMove``)."""

    @property
    def replicas(self) -> tuple[int, ...]: ...

    @property
    def log_dirs(self) -> tuple[str, ...]: ...


def build_drain_reassignment(
    broker: BrokerSpec,
    logvolume: Mapping[str, Any],
    name: str,
    cross: Mapping[TP, Move],
    *,
    rate: int | None = None,
) -> Obj:
    """The drain's Reassignment (Kafka's reassignment JSON as ``spec.partitions``), owned by
    the draining LogVolume, throttled at ``rate`` bytes per second when given."""
    meta = logvolume.get("metadata") or {}
    spec: Obj = {
        "cluster": broker.cluster,
        "partitions": [
            {"topic": t, "partition": p, "replicas": list(m.replicas), "logDirs": list(m.log_dirs)}
            for (t, p), m in sorted(cross.items())
        ],
    }
    if rate:
        spec["throttle"] = {"interBrokerBytesPerSecond": int(rate)}
    owners = (
        [
            {
                "apiVersion": API_VERSION,
                "kind": "LogVolume",
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": False,
            }
        ]
        if meta.get("uid") and meta.get("name")
        else []
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "Reassignment",
        "metadata": {
            "name": name,
            "namespace": broker.namespace,
            "labels": labels(broker, {DRAIN_LABEL: str(meta.get("name") or "")}),
            "ownerReferences": owners,
        },
        "spec": spec,
    }


def build_rebalance_reassignment(
    rebalance: Mapping[str, Any], index: int, partitions: Sequence[Mapping[str, Any]]
) -> Obj:
    """Reassignment ``<rebalance>-<index>`` for one batch, owned by the Rebalance."""
    meta = rebalance["metadata"]
    spec = rebalance.get("spec") or {}
    body: Obj = {
        "apiVersion": API_VERSION,
        "kind": "Reassignment",
        "metadata": {
            "name": f"{meta['name']}-{index}",
            "namespace": meta["namespace"],
            "labels": {"spindle.io/rebalance": meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "Rebalance",
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "cluster": spec["cluster"],
            "partitions": [
                {
                    "topic": p["topic"],
                    "partition": int(p["partition"]),
                    "replicas": [int(b) for b in p["replicas"]],
                    **({"logDirs": list(p["log_dirs"])} if p.get("log_dirs") else {}),
                }
                for p in partitions
            ],
        },
    }
    if spec.get("throttle"):
        body["spec"]["throttle"] = dict(spec["throttle"])
    return body
