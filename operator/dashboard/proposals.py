"""Reassignments and Rebalance proposals as plain data for pages and JSON endpoints. Pure.

A Reassignment's status (issue #13's handler fills it) gives phase, bytes done/total, start
time and ETA per the CRD; the rate is bytes done over the time since the start. A Rebalance's
``status.proposal`` carries what the planner's summary says (``spindle.rebalance.pipeline``):
per-broker and per-directory utilisation before and after, the goals with their status and
reason, and the replica moves, each with its source and destination broker *and* directory.
Fields not filled yet come out as ``None`` ("—" on the page), never as zero.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from spindle.operator.dashboard import fmt

Obj = Mapping[str, Any]
# Which phases still allow which action (the operator's handler has the last word).
# A Reassignment moving data: ``Moving`` is what the reconciler writes now, ``InProgress`` the
# older name the CRD still accepts (objects written before the rename keep it).
IN_FLIGHT = frozenset({"Moving", "InProgress"})
CANCELLABLE = frozenset({"Pending", *IN_FLIGHT})
APPROVABLE = frozenset({"ProposalReady"})
STOPPABLE = frozenset({"Pending", "Snapshotting", "Planning", "ProposalReady", "Executing"})


#: The throttles a Reassignment's spec may set (either may be absent: that one is unthrottled).
THROTTLES = {
    "interBrokerBytesPerSecond": "inter-broker",
    "intraBrokerBytesPerSecond": "intra-broker",
}


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def reassignment_view(item: Obj, *, now: dt.datetime) -> dict[str, Any]:
    """Progress, rate and ETA overall, and each partition's target and state."""
    spec, status = item.get("spec") or {}, item.get("status") or {}
    done, total = fmt.as_int(status.get("bytesDone")), fmt.as_int(status.get("bytesTotal"))
    started = fmt.parse_time(status.get("startTime"))
    phase = status.get("phase") or "Pending"
    elapsed = (now - started).total_seconds() if started else None
    speed = done / elapsed if done is not None and elapsed and elapsed > 0 else None
    eta = fmt.parse_time(status.get("eta"))
    progress = {(p.get("topic"), p.get("partition")): p for p in status.get("partitions") or []}
    partitions = []
    for part in spec.get("partitions") or []:
        state = progress.get((part.get("topic"), part.get("partition")), {})
        p_done, p_total = fmt.as_int(state.get("bytesDone")), fmt.as_int(state.get("bytesTotal"))
        partitions.append(
            {
                "topic": part.get("topic"),
                "partition": part.get("partition"),
                "replicas": list(part.get("replicas") or []),
                "logDirs": list(part.get("logDirs") or []),
                "originalReplicas": state.get("originalReplicas"),
                "phase": state.get("phase") or (phase if phase not in IN_FLIGHT else "Pending"),
                "bytesDone": p_done,
                "bytesTotal": p_total,
                "fraction": fmt.fraction(p_done, p_total),
                "error": state.get("error"),
            }
        )
    given = spec.get("throttle") or {}
    throttle = {key: fmt.as_int(given.get(key)) for key in THROTTLES}
    return {
        "namespace": _meta(item).get("namespace", ""),
        "name": _meta(item).get("name", ""),
        "cluster": spec.get("cluster", ""),
        "phase": phase,
        "cancelRequested": bool(spec.get("cancel")),
        "canCancel": phase in CANCELLABLE and not spec.get("cancel"),
        "partitionsTotal": fmt.as_int(status.get("partitionsTotal")) or len(partitions),
        "partitionsDone": fmt.as_int(status.get("partitionsDone")),
        "bytesDone": done,
        "bytesTotal": total,
        "fraction": fmt.fraction(done, total),
        "progressText": f"{fmt.human_bytes(done)} / {fmt.human_bytes(total)}",
        "bytesPerSecond": speed if phase in IN_FLIGHT else None,
        "rateText": fmt.rate(speed) if phase in IN_FLIGHT else fmt.DASH,
        "eta": status.get("eta"),
        "etaText": fmt.duration((eta - now).total_seconds()) if eta else fmt.DASH,
        "startTime": status.get("startTime"),
        "completionTime": status.get("completionTime"),
        "throttle": throttle,
        "throttleText": ", ".join(
            f"{label} {fmt.rate(throttle[key]) if throttle[key] is not None else 'unthrottled'}"
            for key, label in THROTTLES.items()
        ),
        "partitions": partitions,
    }


def _utilisation(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Before/after rows of the proposal's chart (a directory row also has path and state)."""
    out = []
    for row in rows:
        before = fmt.as_float(row.get("utilisationBefore"))
        after = fmt.as_float(row.get("utilisationAfter"))
        out.append(
            {
                "brokerId": row.get("brokerId"),
                "path": row.get("path"),
                "state": row.get("state"),
                "bytesBefore": fmt.as_int(row.get("bytesBefore")),
                "bytesAfter": fmt.as_int(row.get("bytesAfter")),
                "before": before,
                "after": after,
                "beforeText": fmt.percent(before),
                "afterText": fmt.percent(after),
            }
        )
    return out


def _moves(raw: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    moves = []
    for move in raw:
        size = fmt.as_int(move.get("bytes"))
        same = move.get("sourceBroker") == move.get("destinationBroker")
        moves.append(
            {
                "topic": move.get("topic"),
                "partition": move.get("partition"),
                "sourceBroker": move.get("sourceBroker"),
                "sourceDir": move.get("sourceDir"),
                "destinationBroker": move.get("destinationBroker"),
                "destinationDir": move.get("destinationDir"),
                "bytes": size,
                "bytesText": fmt.human_bytes(size),
                "kind": "intra-broker" if same else "cross-broker",
            }
        )
    return moves


def rebalance_view(item: Obj) -> dict[str, Any]:
    """Mode, phase, the proposal (utilisation before/after, moves, goals) and what may be
    done to it now."""
    spec, status = item.get("spec") or {}, item.get("status") or {}
    phase = status.get("phase") or "Pending"
    proposal = status.get("proposal")
    view: dict[str, Any] = {
        "namespace": _meta(item).get("namespace", ""),
        "name": _meta(item).get("name", ""),
        "cluster": spec.get("cluster", ""),
        "mode": spec.get("mode") or "full",
        "phase": phase,
        "approved": bool(spec.get("approve")),
        "stopRequested": bool(spec.get("stop")),
        "canApprove": phase in APPROVABLE and not spec.get("approve") and not spec.get("stop"),
        "canStop": phase in STOPPABLE and not spec.get("stop"),
        "reassignment": status.get("reassignment"),
        "conditions": list(status.get("conditions") or []),
        "proposal": None,
    }
    if not isinstance(proposal, Mapping):
        return view
    moves = _moves(proposal.get("replicaMoves") or [])
    count = fmt.as_int(proposal.get("moves"))
    view["proposal"] = {
        "planner": proposal.get("planner"),
        "moves": count if count is not None else (len(moves) if moves else None),
        "interBrokerBytes": fmt.as_int(proposal.get("interBrokerBytes")),
        "intraBrokerBytes": fmt.as_int(proposal.get("intraBrokerBytes")),
        "interBrokerText": fmt.human_bytes(fmt.as_int(proposal.get("interBrokerBytes"))),
        "intraBrokerText": fmt.human_bytes(fmt.as_int(proposal.get("intraBrokerBytes"))),
        "balanceBefore": proposal.get("balanceBefore"),
        "balanceAfter": proposal.get("balanceAfter"),
        "brokers": _utilisation(proposal.get("brokers") or []),
        "directories": _utilisation(proposal.get("directories") or []),
        "goals": [
            {
                "name": g.get("name"),
                "status": g.get("status") or "unknown",
                "reason": g.get("reason") or "",
            }
            for g in proposal.get("goals") or []
        ],
        "replicaMoves": moves,
        "movesListed": len(moves),
    }
    return view
