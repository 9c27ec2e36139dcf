"""Cluster overview and volume page as plain data: Kubernetes objects in, view dicts out. Pure.

The JSON endpoints return these dicts as they are and the templates render them, so what a
script reads and what a person sees cannot drift apart. Sources are the objects ``kubectl get
spindle`` shows: Broker (rack, phase, volumes online/total), LogVolume (state, bytes, replica
count, failure), Reassignment specs (moves that touch a directory) and core Events.

Balance figures use the planner's own goal thresholds and band (``spindle.rebalance``: Goals
defaults are Cruise Control's; band ``[(2 - f) * mean, f * mean]``), computed from the bytes
the LogVolumes report, so "in band" here means what it means to the planner.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from spindle.operator.dashboard import fmt
from spindle.rebalance import Goals, band_floor

Obj = Mapping[str, Any]
STATES = ("Active", "Cordoned", "Draining", "Offline", "Replacing", "Rebuilding", "Empty")
ALL_STATES = (*STATES, "Released", "Pending")
ONLINE = frozenset({"Active", "Cordoned", "Draining"})


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Mapping[str, Any]:
    return obj.get("status") or {}


def volume_row(volume: Obj) -> dict[str, Any]:
    """One LogVolume as a usage bar: state (its colour), used/total, replica count."""
    spec, status = _spec(volume), _status(volume)
    used, total = fmt.as_int(status.get("usedBytes")), fmt.as_int(status.get("totalBytes"))
    share = fmt.fraction(used, total)
    state = status.get("state") or "Pending"
    failure = status.get("failure") or {}
    return {
        "namespace": _meta(volume).get("namespace", ""),
        "name": _meta(volume).get("name", ""),
        "broker": spec.get("broker", ""),
        "brokerId": fmt.as_int(spec.get("brokerId")),
        "volumeId": fmt.as_int(spec.get("volumeId")),
        "desiredState": spec.get("desiredState") or "Active",
        "state": state if state in ALL_STATES else "Pending",
        "path": status.get("path"),
        "usedBytes": used,
        "usableBytes": fmt.as_int(status.get("usableBytes")),
        "totalBytes": total,
        "usedFraction": share,
        "replicaCount": fmt.as_int(status.get("replicaCount")),
        "failure": dict(failure) if failure else None,
        "label": f"{fmt.human_bytes(used)} / {fmt.human_bytes(total)}",
        "percent": fmt.percent(share),
    }


def broker_row(broker: Obj, volumes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    spec, status = _spec(broker), _status(broker)
    online = sum(1 for v in volumes if v["state"] in ONLINE)
    declared = fmt.as_int(status.get("volumesTotal"))
    total = declared if declared is not None else len(spec.get("volumes") or [])
    used = [v["usedBytes"] for v in volumes if v["usedBytes"] is not None]
    cap = [v["totalBytes"] for v in volumes if v["usedBytes"] is not None and v["totalBytes"]]
    share = fmt.fraction(sum(used), sum(cap)) if cap else None
    return {
        "namespace": _meta(broker).get("namespace", ""),
        "name": _meta(broker).get("name", ""),
        "brokerId": fmt.as_int(spec.get("brokerId")),
        "cluster": spec.get("cluster", ""),
        "rack": spec.get("rack"),
        "phase": status.get("phase") or "Pending",
        "volumesOnline": online,
        "volumesTotal": total,
        "usedFraction": share,
        "percent": fmt.percent(share),
        "volumes": list(volumes),
    }


def overview(
    brokers: Iterable[Obj], logvolumes: Iterable[Obj], *, goals: Goals | None = None
) -> dict[str, Any]:
    """Clusters (namespace + spec.cluster) with their brokers, each with its volumes."""
    by_broker: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for volume in logvolumes:
        row = volume_row(volume)
        by_broker[(row["namespace"], row["broker"])].append(row)
    clusters: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for broker in brokers:
        meta = _meta(broker)
        rows = sorted(
            by_broker.get((meta.get("namespace", ""), meta.get("name", "")), []),
            key=lambda r: (r["volumeId"] is None, r["volumeId"] or 0, r["name"]),
        )
        row = broker_row(broker, rows)
        clusters[(row["namespace"], row["cluster"])].append(row)
    goals = goals or Goals()
    out = []
    for (namespace, name), rows in sorted(clusters.items()):
        rows.sort(key=lambda r: (r["brokerId"] is None, r["brokerId"] or 0, r["name"]))
        out.append(
            {
                "namespace": namespace,
                "name": name,
                "brokers": rows,
                "counts": state_counts(v for r in rows for v in r["volumes"]),
                "balance": balance(rows, goals),
            }
        )
    return {"clusters": out, "states": list(ALL_STATES)}


def state_counts(volumes: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for volume in volumes:
        counts[volume["state"]] = counts.get(volume["state"], 0) + 1
    return counts


def balance(brokers: Sequence[Mapping[str, Any]], goals: Goals) -> dict[str, Any]:
    """Broker and disk balance against the planner's goals, from reported bytes only.

    Broker: each broker's utilisation within ``broker_balance`` of the cluster mean (bytes
    over capacity across brokers, as the planner computes it). Disk: each Active directory's
    utilisation within ``disk_balance`` of its broker's Active mean. ``None`` figures mean no
    directory has reported its bytes yet.
    """
    known = [
        (b, [v for v in b["volumes"] if v["usedBytes"] is not None and v["totalBytes"]])
        for b in brokers
    ]
    known = [(b, vs) for b, vs in known if vs]
    broker_figure: dict[str, Any] = {"goal": goals.broker_balance, "mean": None, "met": None}
    disk_figure: dict[str, Any] = {"goal": goals.disk_balance, "met": None, "outOfBand": None}
    if known:
        used = sum(v["usedBytes"] for _, vs in known for v in vs)
        cap = sum(v["totalBytes"] for _, vs in known for v in vs)
        mean = used / cap
        utils = [
            sum(v["usedBytes"] for v in vs) / sum(v["totalBytes"] for v in vs) for _, vs in known
        ]
        hi, lo = goals.broker_balance * mean, band_floor(goals.broker_balance, mean)
        out = sum(1 for u in utils if u > hi + 1e-9 or u < lo - 1e-9)
        broker_figure.update(
            mean=mean,
            max=max(utils),
            min=min(utils),
            outOfBand=out,
            met=out == 0,
            text=f"max {fmt.percent(max(utils))}, mean {fmt.percent(mean)}, band x{goals.broker_balance:g}",
        )
        disk_out = 0
        for _, vs in known:
            active = [v for v in vs if v["state"] == "Active"]
            a_cap = sum(v["totalBytes"] for v in active)
            if not a_cap:
                continue
            a_mean = sum(v["usedBytes"] for v in active) / a_cap
            for v in active:
                ratio = (v["usedBytes"] / v["totalBytes"]) / a_mean if a_mean else 1.0
                if (
                    ratio > goals.disk_balance + 1e-9
                    or ratio < band_floor(goals.disk_balance, 1.0) - 1e-9
                ):
                    disk_out += 1
        disk_figure.update(outOfBand=disk_out, met=disk_out == 0)
    return {"broker": broker_figure, "disk": disk_figure}


def _moves_touching(
    reassignments: Iterable[Obj], broker_id: int | None, path: str | None
) -> list[dict[str, Any]]:
    """Partitions of Reassignments whose target puts a replica into this directory."""
    found: list[dict[str, Any]] = []
    if broker_id is None or not path:
        return found
    for item in reassignments:
        phase = _status(item).get("phase") or "Pending"
        for part in _spec(item).get("partitions") or []:
            replicas, dirs = part.get("replicas") or [], part.get("logDirs") or []
            for index, replica in enumerate(replicas):
                if replica == broker_id and index < len(dirs) and dirs[index] == path:
                    found.append(
                        {
                            "reassignment": _meta(item).get("name", ""),
                            "topic": part.get("topic"),
                            "partition": part.get("partition"),
                            "phase": phase,
                        }
                    )
    return found


def volume_page(volume: Obj, events: Iterable[Obj], reassignments: Iterable[Obj]) -> dict[str, Any]:
    """One LogVolume: its bar, status details, history (Events plus status timestamps, newest
    first), the partitions its status lists, and moves into it."""
    row = volume_row(volume)
    status = _status(volume)
    history = [
        {
            "time": e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or "",
            "type": e.get("type") or "Normal",
            "reason": e.get("reason") or "",
            "message": e.get("message") or "",
            "source": (e.get("source") or {}).get("component") or e.get("reportingComponent") or "",
            "count": fmt.as_int(e.get("count")) or 1,
        }
        for e in events
    ]
    if status.get("lastTransitionTime"):
        history.append(
            {
                "time": status["lastTransitionTime"],
                "type": "Normal",
                "reason": "LastTransition",
                "message": f"last state change the operator recorded; the state is now {row['state']}",
                "source": "status",
                "count": 1,
            }
        )
    failure = row["failure"] or {}
    if failure.get("time"):
        history.append(
            {
                "time": failure["time"],
                "type": "Warning",
                "reason": f"Failure{failure.get('source', '')}",
                "message": failure.get("message", ""),
                "source": "status.failure",
                "count": 1,
            }
        )
    history.sort(key=lambda h: h["time"], reverse=True)
    partitions = status.get("partitions")
    return {
        **row,
        "pvcName": status.get("pvcName"),
        "pvName": status.get("pvName"),
        "claimPhase": status.get("claimPhase"),
        "directoryId": status.get("directoryId"),
        "lastTransitionTime": status.get("lastTransitionTime"),
        "conditions": list(status.get("conditions") or []),
        "history": history,
        "partitions": list(partitions) if isinstance(partitions, list) else None,
        "incomingMoves": _moves_touching(reassignments, row["brokerId"], row["path"]),
    }
