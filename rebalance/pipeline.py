"""One plan, end to end: scope → preparation (Spark or numpy) → greedy → checks → plan and
summary. The CLI and the benchmark call ``make_plan``; nothing here parses flags or writes
files.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from spindle.rebalance.analysis.report import (
    build_election,
    build_plan,
    figures,
    hard_violations,
    lower_bounds,
    per_broker_and_dir,
)
from spindle.rebalance.exact import mip as exact
from spindle.rebalance.goals.base import dir_loads
from spindle.rebalance.input.model import Cluster, Goals, PlanError
from spindle.rebalance.input.scope import Request, Scope, build_scope
from spindle.rebalance.passes import (
    Choice,
    distance,
    goal_status,
    prepare,
    repair_pass,
    second_pass,
    short_of_goals,
)
from spindle.rebalance.search.core import Outcome, plan_core


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
    #: Which replica leads each partition after the plan (the preferred leaders it sets).
    leader: Any = None
    #: The partitions to run a preferred election on after the reassignment (only those
    #: whose preferred leader the plan changes), as ``kafka-leader-election`` reads them.
    election: dict[str, Any] = field(default_factory=lambda: {"partitions": []})


def make_plan(
    cluster: Cluster,
    request: Request,
    *,
    goals: Goals,
    spark: Any = None,
    detail: bool = True,
    exact_limit: int = exact.MAX_REPLICAS,
) -> PlanResult:
    """Plan one request. ``spark``: a SparkSession for the preparation stage (None: numpy).
    ``detail``: include per-broker and per-directory usage in the summary.

    The greedy plans first. On a cluster of at most ``exact_limit`` replicas (and no caps),
    when the greedy refuses the plan or leaves a soft goal unmet that some plan could meet,
    the exact planner (``exact.solve``) runs; its placement is used when it keeps the hard
    rules and meets more of the soft goals (or the greedy had refused). The summary says
    which planner's plan it is (``planner``) and why the exact one ran (``exact``).

    Raises ``PlanError`` when a hard goal cannot be met, naming what and why, and whether
    that was proven (the exact solver found the hard rules infeasible) or not (the greedy
    found no destination on a cluster too large for the exact solver).
    """
    t0 = time.perf_counter()
    scope = build_scope(cluster, request)
    prepared = prepare(cluster, scope, spark)
    t1 = time.perf_counter()
    outcome = plan_core(cluster, prepared, scope, goals=goals, request=request)
    t2 = time.perf_counter()
    choice = Choice(
        planner="greedy",
        cur_b=outcome.cur_broker,
        cur_d=outcome.cur_dir,
        leader=outcome.leader,
        core_moves=outcome.n_moves,
        refusal=_refusal(cluster, scope, goals, outcome),
    )
    if choice.refusal is None:
        choice.status, unmet = goal_status(
            cluster, scope, goals, choice.cur_b, choice.cur_d, choice.leader, outcome.capped
        )
        choice.unmet = list(outcome.unmet) + unmet
    caps = request.max_moves is not None or request.max_bytes is not None
    shortfall = [g for g, v in choice.status.items() if v["status"] == "unmet"]
    if shortfall and not caps and choice.refusal is None and request.mode == "full":
        second_pass(cluster, scope, goals, request, choice, spark)
        repair_pass(cluster, scope, goals, request, choice, spark, exact_limit=exact_limit)
        shortfall = [g for g, v in choice.status.items() if v["status"] == "unmet"]
    if cluster.n_replicas <= exact_limit and not caps and (choice.refusal is not None or shortfall):
        _try_exact(cluster, scope, goals, request, choice, shortfall)
    if choice.refusal is not None:
        _refuse(cluster, request, choice, caps=caps, exact_limit=exact_limit)
    if not caps:
        _idle_if_nothing_gained(cluster, scope, goals, choice)
    summary = _summary(cluster, scope, goals, request, choice, capped=outcome.capped)
    if detail:
        brokers, dirs = per_broker_and_dir(
            cluster,
            scope,
            (cluster.rep_broker, cluster.rep_dir),
            (choice.cur_b, choice.cur_d),
            choice.leader,
        )
        summary["perBroker"] = brokers
        summary["perDir"] = dirs
    timings = {"prepare": t1 - t0, "core": t2 - t1, "report": time.perf_counter() - t2}
    if choice.exact["ran"]:
        timings["exact"] = float(choice.exact["seconds"])
    if choice.second["ran"]:
        timings["secondPass"] = choice.second_s
    if "repair" in choice.second:
        timings["repair"] = choice.repair_s
    summary["timings"] = {k: round(v, 3) for k, v in timings.items()}
    return PlanResult(
        plan=summary.pop("_plan"),
        summary=summary,
        timings=timings,
        placement=(choice.cur_b, choice.cur_d),
        core_moves=choice.core_moves,
        core_profile=dict(outcome.profile),
        leader=cluster.rep_leader if choice.leader is None else choice.leader,
        election=build_election(cluster, choice.leader),
    )


def _idle_if_nothing_gained(cluster: Cluster, scope: Scope, goals: Goals, choice: Choice) -> None:
    """Drop a plan that brings the goals no closer (``distance``) than the snapshot already
    is, when the snapshot itself keeps the hard rules: its moves only chase bands out of
    reach (each one tried and given up), and executing them would make the next plan chase
    again. The summary's ``idle`` says so, with the moves dropped."""
    moved = (choice.cur_b != cluster.rep_broker) | (choice.cur_d != cluster.rep_dir)
    relead = choice.leader is not None and bool((choice.leader != cluster.rep_leader).any())
    if not moved.any() and not relead:
        return
    if hard_violations(cluster, scope, goals, cluster.rep_broker, cluster.rep_dir):
        return
    status, unmet = goal_status(
        cluster, scope, goals, cluster.rep_broker, cluster.rep_dir, None, False
    )
    now = distance(cluster, scope, goals, status, cluster.rep_broker, cluster.rep_dir, None)
    then = distance(cluster, scope, goals, choice.status, choice.cur_b, choice.cur_d, choice.leader)
    if then < now:
        return
    choice.idle = {
        "dropped": True,
        "moves": int(moved.sum()),
        "why": "its moves brought the goals no closer than the cluster already is",
    }
    choice.cur_b, choice.cur_d, choice.leader = cluster.rep_broker, cluster.rep_dir, None
    choice.core_moves = 0
    choice.status, choice.unmet = status, unmet


def _try_exact(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    request: Request,
    choice: Choice,
    shortfall: list[str],
) -> None:
    """Run the exact planner and take its placement into ``choice`` when it keeps the hard
    rules and meets more soft goals (or the greedy refused); raise ``PlanError`` when it
    proves the hard rules infeasible for a plan the greedy refused."""
    refusal = choice.refusal
    found = exact.solve(cluster, scope, goals)
    if found.status == "infeasible" and refusal is not None:
        # Before calling it impossible, allow what the hard rules allow and the default
        # model leaves out (a replica onto a broker its partition has left).
        found = exact.solve(cluster, scope, goals, onto_holders=True)
    note: dict[str, Any] = {
        "ran": True,
        "why": (
            "the greedy refused the plan"
            if refusal is not None
            else "the greedy left achievable soft goals unmet: " + ", ".join(shortfall)
        ),
        "status": found.status,
        "seconds": round(found.seconds, 3),
        "variables": found.variables,
        "used": False,
    }
    choice.exact = note
    if found.cur_broker is None or found.cur_dir is None:
        if refusal is not None and found.status == "infeasible":
            raise PlanError(
                f"plan refused ({request.mode}): {refusal}; the exact solver (HiGHS MIP) "
                "proved that no placement meets the hard rules"
            )
        return
    e_b, e_d = found.cur_broker, found.cur_dir
    if hard_violations(cluster, scope, goals, e_b, e_d):
        note["why"] += "; its placement broke a hard rule, so it was not used"
        return
    e_status, e_unmet = goal_status(cluster, scope, goals, e_b, e_d, None, False)
    if refusal is None and short_of_goals(e_status) >= short_of_goals(choice.status):
        return
    note["used"] = True
    choice.planner, choice.refusal = "exact", None
    choice.cur_b, choice.cur_d, choice.leader = e_b, e_d, cluster.rep_leader
    choice.core_moves = int(((e_b != cluster.rep_broker) | (e_d != cluster.rep_dir)).sum())
    choice.status = e_status
    choice.unmet = _capacity_notes(cluster, scope, goals, e_d) + e_unmet


def _refuse(
    cluster: Cluster, request: Request, choice: Choice, *, caps: bool, exact_limit: int
) -> None:
    """Raise the refusal, saying why it was not proven impossible."""
    if choice.exact["ran"]:
        why = f"the exact solver stopped without a usable placement: {choice.exact['status']}"
    elif caps:
        why = "--max-moves/--max-bytes given, so the exact solver was not tried"
    else:
        why = f"{cluster.n_replicas} replicas, above the exact solver's limit of {exact_limit}"
    raise PlanError(
        f"plan refused ({request.mode}): {choice.refusal}; the greedy planner found no "
        f"placement keeping the hard rules, and this was not proven impossible ({why})"
    )


def _summary(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    request: Request,
    choice: Choice,
    *,
    capped: bool,
) -> dict[str, Any]:
    """The summary (its keys in the order they have always been written), with the plan
    under ``_plan`` for the caller to take out."""
    cur_b, cur_d, leader = choice.cur_b, choice.cur_d, choice.leader
    plan = build_plan(cluster, cur_b, cur_d, leader)
    moved = (cur_b != cluster.rep_broker) | (cur_d != cluster.rep_dir)
    cross = moved & (cur_b != cluster.rep_broker)
    intra = moved & ~cross
    size = cluster.rep_size
    bounds = lower_bounds(cluster, scope, goals)
    bytes_moved = int(size[moved].sum())
    return {
        "_plan": plan,
        "mode": request.mode,
        "planner": choice.planner,
        "exact": choice.exact,
        "secondPass": choice.second,
        "idle": choice.idle,
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
            np.unique(cluster.rep_part[leader != cluster.rep_leader]).size
        )
        if leader is not None
        else 0,
        "bytesMoved": {
            "total": bytes_moved,
            "crossBroker": int(size[cross].sum()),
            "intraBroker": int(size[intra].sum()),
        },
        "lowerBounds": bounds,
        "bytesOverLowerBound": round(bytes_moved / bounds["bytes"], 4) if bounds["bytes"] else None,
        "before": figures(cluster, scope, goals, cluster.rep_broker, cluster.rep_dir),
        "after": figures(cluster, scope, goals, cur_b, cur_d, leader),
        "goalStatus": choice.status,
        "unmet": [_with_evidence(u, choice, cluster, request) for u in choice.unmet],
        "capped": capped and choice.planner == "greedy",
    }


def _with_evidence(
    item: dict[str, Any], choice: Choice, cluster: Cluster, request: Request
) -> dict[str, Any]:
    """An ``unmet`` goal (a band some plan could reach) with what the planner tried for
    it and why each attempt fell short, so a shortfall is never silent."""
    if item.get("status") != "unmet":
        return item
    tried: list[str] = [
        "greedy: byte phases, then counts by proposer rounds and single moves (smallest "
        "replicas, strict bands), leaders by preferred-leader changes, exchanges between two "
        "brokers"
    ]
    second = choice.second
    if second["ran"]:
        tried.append(
            f"{len(second['passes'])} more greedy pass(es), each over the previous one's "
            f"result ({second['moves']} moves in all): "
            + ("one was used" if second["used"] else f"none used, {second.get('why', '')}")
        )
    elif request.mode == "full":
        tried.append("more greedy passes: not run (caps given or the plan was refused)")
    fix = second.get("repair")
    if fix is not None:
        tried.append(
            "exact repair (HiGHS MIP) over the brokers out of band, then with their rack-mates: "
            + ", ".join(f"{t['status']} over brokers {t['brokers']}" for t in fix["tries"])
            + ("; used" if fix["used"] else "; not used: it brought the goals no closer")
        )
    ex = choice.exact
    if ex["ran"]:
        tried.append(
            f"exact MIP (HiGHS): {ex['status']} in {ex['seconds']}s, "
            + ("used" if ex["used"] else "not used: it met no more goals")
        )
    else:
        tried.append(
            f"exact MIP: not run ({cluster.n_replicas} replicas, above its limit "
            f"{exact.MAX_REPLICAS}, or caps given)"
        )
    if choice.idle["dropped"]:
        tried.append(f"dropped the plan's {choice.idle['moves']} moves: {choice.idle['why']}")
    return {**item, "tried": tried}


def _refusal(cluster: Cluster, scope: Scope, goals: Goals, outcome: Outcome) -> str | None:
    """Why the greedy's plan must be refused (the hard rules it could not keep), or None."""
    if outcome.hard_failures:
        shown = "; ".join(outcome.hard_failures[:5])
        more = len(outcome.hard_failures) - 5
        return shown + (f"; and {more} more" if more > 0 else "")
    problems = hard_violations(cluster, scope, goals, outcome.cur_broker, outcome.cur_dir)
    if problems and outcome.capped:
        # Capped: directories left to empty are reported as unmet, not refused.
        problems = [p for p in problems if "must be emptied" not in p]
    return "; ".join(problems) if problems else None


def _capacity_notes(
    cluster: Cluster, scope: Scope, goals: Goals, cur_d: np.ndarray
) -> list[dict[str, Any]]:
    """Directories left above the capacity threshold by a mode that does not fix disks (the
    exact planner's counterpart of the greedy's note)."""
    if scope.balance_disks:
        return []
    load = dir_loads(cluster, scope, cur_d)
    over = np.flatnonzero(
        scope.hosting & (load > goals.capacity_threshold * cluster.dir_total + 0.5)
    )
    return [
        {
            "goal": "capacity",
            "why": f"broker {cluster.broker_ids[cluster.dir_broker[d]]} dir {cluster.dir_path[d]} "
            f"ends above the capacity threshold {goals.capacity_threshold} (not in "
            f"{scope.mode}'s scope)",
        }
        for d in over.tolist()
    ]
