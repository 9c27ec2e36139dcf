"""One plan, end to end: scope → preparation (Spark or numpy) → greedy → checks → plan and
summary. The CLI and the benchmark call ``make_plan``; nothing here parses flags or writes
files.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from spindle.rebalance.achievable import classify, unachievable
from spindle.rebalance.core import plan_core
from spindle.rebalance.model import Cluster, Goals, PlanError
from spindle.rebalance.prepare import Prepared, prepare_local
from spindle.rebalance.report import (
    build_plan,
    figures,
    hard_violations,
    lower_bounds,
    offenders,
    per_broker_and_dir,
)
from spindle.rebalance.scope import Request, build_scope


@dataclass(frozen=True)
class PlanResult:
    """The reassignment JSON, the summary, and where the time went (seconds)."""

    plan: dict[str, Any]
    summary: dict[str, Any]
    timings: dict[str, float]
    #: Final broker and directory index of every replica (what executing the plan gives).
    placement: tuple[Any, Any]
    #: Replica moves the core made (each replica moves at most once, so this equals the
    #: number of replicas whose broker or directory changed).
    core_moves: int
    #: Where the greedy driver's time went: seconds per phase, and inside destination
    #: scoring (with the number of destinations scored); see ``core.Outcome.profile``.
    core_profile: dict[str, float]


def make_plan(
    cluster: Cluster,
    request: Request,
    *,
    goals: Goals,
    spark: Any = None,
    detail: bool = True,
) -> PlanResult:
    """Plan one request. ``spark``: a SparkSession for the preparation stage (None: numpy).
    ``detail``: include per-broker and per-directory usage in the summary.

    Raises ``PlanError`` when a hard goal cannot be met, naming what and why.
    """
    t0 = time.perf_counter()
    scope = build_scope(cluster, request)
    prepared: Prepared
    if spark is not None:
        from spindle.rebalance.spark_job import prepare_spark

        prepared = prepare_spark(spark, cluster, scope)
    else:
        prepared = prepare_local(cluster, scope)
    t1 = time.perf_counter()
    outcome = plan_core(cluster, prepared, scope, goals=goals, request=request)
    t2 = time.perf_counter()
    if outcome.hard_failures:
        shown = "; ".join(outcome.hard_failures[:5])
        more = len(outcome.hard_failures) - 5
        raise PlanError(
            f"plan refused ({request.mode}): {shown}" + (f"; and {more} more" if more > 0 else "")
        )
    problems = hard_violations(cluster, scope, goals, outcome.cur_broker, outcome.cur_dir)
    if problems and not outcome.capped:
        raise PlanError(f"plan refused ({request.mode}): " + "; ".join(problems))
    if problems:
        problems = [p for p in problems if "must be emptied" not in p]
        if problems:
            raise PlanError(f"plan refused ({request.mode}): " + "; ".join(problems))
    plan = build_plan(cluster, outcome.cur_broker, outcome.cur_dir, outcome.leader)
    moved = outcome.moved
    cross = moved & (outcome.cur_broker != cluster.rep_broker)
    intra = moved & ~cross
    size = cluster.rep_size
    bounds = lower_bounds(cluster, scope, goals)
    before = figures(cluster, scope, goals, cluster.rep_broker, cluster.rep_dir)
    after = figures(cluster, scope, goals, outcome.cur_broker, outcome.cur_dir, outcome.leader)
    bytes_moved = int(size[moved].sum())
    unmet = list(outcome.unmet)
    status: dict[str, Any] = {}
    impossible = unachievable(cluster, scope, goals)
    for key, on in (
        ("brokerUtilisation", scope.balance_brokers),
        ("diskUtilisationOverBrokerMean", scope.balance_disks),
        ("replicas", scope.balance_counts),
        ("leaders", scope.balance_counts),
    ):
        if not on:
            status[key] = {"status": "notInScope"}
            continue
        found = (
            []
            if after[key]["met"]
            else offenders(
                cluster,
                scope,
                goals,
                outcome.cur_broker,
                outcome.cur_dir,
                key,
                leader=outcome.leader,
                limit=cluster.n_dirs,
            )
        )
        state, found = classify(key, found, impossible[key], cluster)
        status[key] = {"status": state}
        if state == "met":
            continue
        status[key]["offenders"] = found
        why = f"{after[key]['outOfBand']} out of band"
        if state == "unachievable":
            why += " (each out of reach under the hard rules: see offenders)"
        elif outcome.capped:
            why += " (the caps stopped planning)"
        unmet.append({"goal": key, "status": state, "why": why, "offenders": found[:10]})
    t3 = time.perf_counter()
    summary: dict[str, Any] = {
        "mode": request.mode,
        "request": {k: v for k, v in asdict(request).items() if v not in ((), None)},
        "goals": asdict(goals),
        "replicas": cluster.n_replicas,
        "partitionsChanged": len(plan["partitions"]),
        "moves": {
            "total": int(moved.sum()),
            "crossBroker": int(cross.sum()),
            "intraBroker": int(intra.sum()),
        },
        "preferredLeaderChanges": int(
            np.unique(cluster.rep_part[outcome.leader != cluster.rep_leader]).size
        )
        if outcome.leader is not None
        else 0,
        "bytesMoved": {
            "total": bytes_moved,
            "crossBroker": int(size[cross].sum()),
            "intraBroker": int(size[intra].sum()),
        },
        "lowerBounds": bounds,
        "bytesOverLowerBound": round(bytes_moved / bounds["bytes"], 4) if bounds["bytes"] else None,
        "before": before,
        "after": after,
        "goalStatus": status,
        "unmet": unmet,
        "capped": outcome.capped,
    }
    if detail:
        brokers, dirs = per_broker_and_dir(
            cluster,
            scope,
            (cluster.rep_broker, cluster.rep_dir),
            (outcome.cur_broker, outcome.cur_dir),
            outcome.leader,
        )
        summary["perBroker"] = brokers
        summary["perDir"] = dirs
    timings = {"prepare": t1 - t0, "core": t2 - t1, "report": time.perf_counter() - t2}
    summary["timings"] = {k: round(v, 3) for k, v in timings.items()}
    del t3
    return PlanResult(
        plan=plan,
        summary=summary,
        timings=timings,
        placement=(outcome.cur_broker, outcome.cur_dir),
        core_moves=outcome.n_moves,
        core_profile=dict(outcome.profile),
    )
