"""A Rebalance's proposal and execution plan, pure: planner output in, status and
Reassignment bodies out.

- ``replica_moves``: each replica that changes broker or directory, with source and
  destination broker *and* directory (the planner's plan says only where replicas end up; the
  snapshot says where they are).
- ``proposal``: the CRD's ``status.proposal`` from the planner's summary (whose per-broker
  rows use ``id`` and per-directory rows ``broker``; the CRD says ``brokerId`` for both).
- ``batches``: the plan's partitions in Reassignments that each stay within the CRD's limits
  (``maxItems`` 5000, well under the object size limit at ~150 bytes a partition) and within
  the concurrency caps: at most ``max_moves`` partitions in flight, at most ``per_broker`` moves
  touching one broker and ``per_disk`` touching one directory (Cruise Control's
  ``num.concurrent.partition.movements.per.broker`` and intra-broker caps). Batches run one
  after another, so the caps bound what moves at once. Deterministic: plan order kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spindle.operator.decisions.reassignment import ClusterView
from spindle.operator.specs.meta import Obj

#: The CRD's ``status.proposal.replicaMoves`` maxItems.
MAX_LISTED_MOVES = 2000
#: Partitions per Reassignment (the Reassignment CRD allows 5000).
MAX_BATCH_PARTITIONS = 1000


@dataclass(frozen=True)
class Caps:
    """How many moves may run at once: in all, per broker, per directory."""

    max_moves: int = 50
    per_broker: int = 10
    per_disk: int = 4


def replica_moves(snapshot: Mapping[str, Any], plan: Mapping[str, Any]) -> list[Obj]:
    """Every replica the plan moves, in plan order."""
    sizes: dict[tuple[str, int], int] = {}
    current: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for p in snapshot.get("partitions") or []:
        key = (p["topic"], int(p["partition"]))
        dirs = p.get("logDirs") or ["any"] * len(p["replicas"])
        current[key] = list(zip((int(b) for b in p["replicas"]), dirs, strict=True))
        sizes[key] = int(p.get("sizeBytes") or 0)
    out: list[Obj] = []
    for entry in plan.get("partitions") or []:
        key = (entry["topic"], int(entry["partition"]))
        before = current.get(key, [])
        dirs = entry.get("log_dirs") or ["any"] * len(entry["replicas"])
        after = list(zip((int(b) for b in entry["replicas"]), dirs, strict=True))
        old = dict(before)
        new = dict(after)
        leaving = [b for b, _ in before if b not in new]
        arriving = [b for b, _ in after if b not in old]
        pairs = [(b, b) for b, d in after if b in old and d not in ("any", old[b])]
        pairs += list(zip(leaving, arriving, strict=False))
        for src, dst in pairs:
            out.append(
                {
                    "topic": key[0],
                    "partition": key[1],
                    "sourceBroker": src,
                    "sourceDir": old.get(src, "any"),
                    "destinationBroker": dst,
                    "destinationDir": new[dst],
                    "bytes": sizes.get(key, 0),
                }
            )
    return out


def _goals(summary: Mapping[str, Any]) -> list[Obj]:
    unmet = {u["goal"]: u for u in summary.get("unmet") or []}
    out = []
    for name, state in (summary.get("goalStatus") or {}).items():
        item: Obj = {"name": name, "status": state.get("status", "met")}
        if name in unmet:
            item["reason"] = unmet[name].get("why", "")
        out.append(item)
    return out


def proposal(
    summary: Mapping[str, Any], moves: Sequence[Mapping[str, Any]], *, snapshot_time: str
) -> Obj:
    """``status.proposal`` from the planner's summary and the replica moves."""
    moved = summary.get("bytesMoved") or {}
    before = summary.get("before") or {}
    after = summary.get("after") or {}

    def spread(figures: Mapping[str, Any]) -> str:
        disk = figures.get("diskUtilisationOverBrokerMean") or {}
        return f"{disk.get('outOfBand', '?')} directories out of band" if disk else ""

    return {
        "mode": summary.get("mode"),
        "planner": summary.get("planner"),
        "moves": int((summary.get("moves") or {}).get("total", len(moves))),
        "interBrokerBytes": int(moved.get("crossBroker", 0)),
        "intraBrokerBytes": int(moved.get("intraBroker", 0)),
        "balanceBefore": spread(before),
        "balanceAfter": spread(after),
        "snapshotTime": snapshot_time,
        "brokers": [
            {
                "brokerId": b["id"],
                **{
                    k: b[k]
                    for k in ("bytesBefore", "bytesAfter", "utilisationBefore", "utilisationAfter")
                },
            }
            for b in summary.get("perBroker") or []
        ],
        "directories": [
            {
                "brokerId": d["broker"],
                "path": d["path"],
                "state": d.get("state", "Active"),
                **{
                    k: d[k]
                    for k in ("bytesBefore", "bytesAfter", "utilisationBefore", "utilisationAfter")
                },
            }
            for d in summary.get("perDir") or []
        ],
        "goals": _goals(summary),
        "replicaMoves": [dict(m) for m in moves[:MAX_LISTED_MOVES]],
    }


def _touches(
    entry: Mapping[str, Any], moves: Iterable[Mapping[str, Any]]
) -> tuple[set[int], set[tuple[int, str]]]:
    brokers: set[int] = set()
    disks: set[tuple[int, str]] = set()
    for m in moves:
        brokers.update((m["sourceBroker"], m["destinationBroker"]))
        disks.update(
            {(m["sourceBroker"], m["sourceDir"]), (m["destinationBroker"], m["destinationDir"])}
        )
    return brokers, disks


def batches(
    plan: Mapping[str, Any], moves: Sequence[Mapping[str, Any]], caps: Caps
) -> list[list[Obj]]:
    """The plan's partitions split into batches under the caps (a partition whose own moves
    exceed a cap still gets a batch of its own: it cannot be split)."""
    by_tp: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for m in moves:
        by_tp.setdefault((m["topic"], m["partition"]), []).append(m)
    pending = list(plan.get("partitions") or [])
    out: list[list[Obj]] = []
    while pending:
        batch: list[Obj] = []
        per_broker: Counter[int] = Counter()
        per_disk: Counter[tuple[int, str]] = Counter()
        left = []
        for entry in pending:
            brokers, disks = _touches(
                entry, by_tp.get((entry["topic"], int(entry["partition"])), [])
            )
            fits = (
                len(batch) < min(caps.max_moves, MAX_BATCH_PARTITIONS)
                and all(per_broker[b] < caps.per_broker for b in brokers)
                and all(per_disk[d] < caps.per_disk for d in disks)
            )
            if fits or not batch:
                batch.append(dict(entry))
                per_broker.update(brokers)
                per_disk.update(disks)
            else:
                left.append(entry)
        out.append(batch)
        pending = left
    return out


def stale_moves(moves: Iterable[Mapping[str, Any]], view: ClusterView) -> list[str]:
    """Moves whose source is no longer where the planner saw it: the cluster changed since the
    snapshot, so the proposal must be planned again rather than executed."""
    out = []
    for m in moves:
        tp, src, d = (m["topic"], int(m["partition"])), int(m["sourceBroker"]), m["sourceDir"]
        if src not in view.partitions.get(tp, ()):
            out.append(f"{tp[0]}-{tp[1]} is no longer on broker {src}")
        elif d != "any" and view.current_dir(tp, src) != d:
            out.append(f"{tp[0]}-{tp[1]} on broker {src} is no longer in {d}")
    return out
