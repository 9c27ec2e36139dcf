"""One plan, end to end: scope → preparation (Spark or numpy) → greedy → checks → plan and
summary. The CLI and the benchmark call ``make_plan``; nothing here parses flags or writes
files.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from spindle.rebalance import exact, repair
from spindle.rebalance.achievable import classify, unachievable
from spindle.rebalance.core import Outcome, plan_core
from spindle.rebalance.goals import soft_goals
from spindle.rebalance.goals.base import dir_loads
from spindle.rebalance.model import Cluster, Goals, PlanError, executed
from spindle.rebalance.prepare import Prepared, prepare_local
from spindle.rebalance.report import (
    build_election,
    build_plan,
    figures,
    hard_violations,
    lower_bounds,
    offenders,
    per_broker_and_dir,
)
from spindle.rebalance.scope import Request, Scope, build_scope


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


@dataclass
class _Choice:
    """The placement a plan is built from, and what is known about it so far: the greedy's
    at first, the exact planner's if that one is used instead."""

    planner: str
    cur_b: np.ndarray
    cur_d: np.ndarray
    leader: np.ndarray | None
    core_moves: int
    #: Why the placement must be refused (hard rules it breaks), or None.
    refusal: str | None
    status: dict[str, Any] = field(default_factory=dict)
    unmet: list[dict[str, Any]] = field(default_factory=list)
    exact: dict[str, Any] = field(default_factory=lambda: {"ran": False})
    #: The greedy's second pass over its own result: whether it ran, and whether it was used.
    second: dict[str, Any] = field(default_factory=lambda: {"ran": False})
    #: Its seconds (wall-clock: in the timings, not in the summary's pinned part).
    second_s: float = 0.0
    #: The exact repair's seconds (wall-clock: in the timings only).
    repair_s: float = 0.0
    #: Whether the plan was dropped for moving replicas that improve no goal's figures.
    idle: dict[str, Any] = field(default_factory=lambda: {"dropped": False})


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
    prepared = _prepare(cluster, scope, spark)
    t1 = time.perf_counter()
    outcome = plan_core(cluster, prepared, scope, goals=goals, request=request)
    t2 = time.perf_counter()
    choice = _Choice(
        planner="greedy",
        cur_b=outcome.cur_broker,
        cur_d=outcome.cur_dir,
        leader=outcome.leader,
        core_moves=outcome.n_moves,
        refusal=_refusal(cluster, scope, goals, outcome),
    )
    if choice.refusal is None:
        choice.status, unmet = _goal_status(
            cluster, scope, goals, choice.cur_b, choice.cur_d, choice.leader, outcome.capped
        )
        choice.unmet = list(outcome.unmet) + unmet
    caps = request.max_moves is not None or request.max_bytes is not None
    shortfall = [g for g, v in choice.status.items() if v["status"] == "unmet"]
    if shortfall and not caps and choice.refusal is None and request.mode == "full":
        _second_pass(cluster, scope, goals, request, choice, spark)
        _repair(cluster, scope, goals, request, choice, spark, exact_limit=exact_limit)
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


def _prepare(cluster: Cluster, scope: Scope, spark: Any) -> Prepared:
    """The preparation stage: Spark when given a session, numpy otherwise."""
    if spark is not None:
        from spindle.rebalance.spark_job import prepare_spark

        return prepare_spark(spark, cluster, scope)
    return prepare_local(cluster, scope)


#: Greedy passes at most (the first included) on clusters up to ``BIG`` replicas, and above.
#: Each later pass plans the previous one's result; passes stop once ``PATIENCE`` in a row
#: bring the goals no closer than the best so far. Counted, not timed: plans stay
#: deterministic.
MAX_PASSES = 5
MAX_PASSES_BIG = 2
BIG = 200_000
PATIENCE = 2


def _second_pass(
    cluster: Cluster, scope: Scope, goals: Goals, request: Request, choice: _Choice, spark: Any
) -> None:
    """Plan the greedy's own result again and compose the two, when the first pass left an
    achievable goal unmet: a later pass starts from balanced bytes, so its moves go to what
    is left (a count band, a broker the count moves pushed just over its byte band) and may
    re-target a replica an earlier pass moved, which one pass never does (a replica moves at
    most once per pass; composed, it still moves once). Passes continue from each result
    (used or not) until ``PATIENCE`` in a row bring the goals no closer (``_distance``);
    the closest placement keeping every hard rule against the snapshot is used. Re-planning
    that placement repeats those last passes, so it finds nothing closer either (stable).
    ``secondPass`` in the summary lists each pass: its moves and whether it was used."""
    t0 = time.perf_counter()
    limit = MAX_PASSES if cluster.n_replicas <= BIG else MAX_PASSES_BIG
    best = _distance(
        cluster, scope, goals, choice.status, choice.cur_b, choice.cur_d, choice.leader
    )
    base = (choice.cur_b, choice.cur_d, choice.leader)
    passes: list[dict[str, Any]] = []
    choice.second = {"ran": True, "moves": 0, "used": False, "passes": passes}
    since_best = 0
    for _ in range(limit - 1):
        step = _one_pass(cluster, scope, goals, request, base, spark)
        if step is None:
            passes.append({"moves": 0, "used": False, "why": "its composition broke a hard rule"})
            break
        (cur_b, cur_d, leader), out_moves, status, unmet = step
        note: dict[str, Any] = {"moves": out_moves, "used": False}
        passes.append(note)
        dist = _distance(cluster, scope, goals, status, cur_b, cur_d, leader)
        if dist < best:
            best, since_best = dist, 0
            note["used"] = True
            choice.second["used"] = True
            choice.cur_b, choice.cur_d, choice.leader = cur_b, cur_d, leader
            choice.core_moves = int(
                ((cur_b != cluster.rep_broker) | (cur_d != cluster.rep_dir)).sum()
            )
            choice.status, choice.unmet = status, unmet
        else:
            note["why"] = "it brought the goals no closer than the best pass"
            since_best += 1
        if out_moves == 0 or since_best >= PATIENCE or not _shortfall(choice.status)[0]:
            break
        base = (cur_b, cur_d, leader)
    choice.second["moves"] = sum(int(p["moves"]) for p in passes)
    if not choice.second["used"]:
        choice.second["why"] = "no later pass met more goals than the first"
    choice.second_s = time.perf_counter() - t0


def _repair(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    request: Request,
    choice: _Choice,
    spark: Any,
    *,
    exact_limit: int,
) -> None:
    """When the greedy's passes leave an achievable goal unmet: the exact repair over the
    brokers out of band (``repair``), its leaders by the greedy's preferred-leader changes
    (which the repair leaves to them), and one greedy pass over that; the closer of the
    two (``_distance``) is used when it is closer than the greedy's placement. Noted as
    ``secondPass.repair``: the neighbourhoods tried, and whether it was used. Run above
    the exact planner's limit (below it, that one solves the whole cluster) and up to
    ``repair.MAX_REPLICAS`` replicas."""
    if not _shortfall(choice.status)[0]:
        return
    if not exact_limit < cluster.n_replicas <= repair.MAX_REPLICAS:
        return
    t0 = time.perf_counter()
    found, tries = repair.repair(cluster, scope, goals, choice.cur_d, choice.status)
    note: dict[str, Any] = {"tries": tries, "used": False}
    choice.second["repair"] = note
    if found is not None and found.cur_broker is not None and found.cur_dir is not None:
        lead = cluster.rep_leader if choice.leader is None else choice.leader
        if goals.leader_reorder:
            placed = (found.cur_broker, found.cur_dir)
            lead = repair.reordered_leaders(cluster, request, goals, placed, lead)
        base = (found.cur_broker, found.cur_dir, lead)
        best = _distance(
            cluster, scope, goals, choice.status, choice.cur_b, choice.cur_d, choice.leader
        )
        options: list[tuple[tuple[np.ndarray, np.ndarray, np.ndarray | None], Any, Any]] = []
        if not hard_violations(cluster, scope, goals, base[0], base[1]):
            status, unmet = _goal_status(cluster, scope, goals, *base, False)
            options.append((base, status, unmet))
        step = _one_pass(cluster, scope, goals, request, base, spark)
        if step is not None:
            options.append((step[0], step[2], step[3]))
        for (cur_b, cur_d, leader), status, unmet in options:
            dist = _distance(cluster, scope, goals, status, cur_b, cur_d, leader)
            if dist < best:
                best, note["used"] = dist, True
                choice.cur_b, choice.cur_d, choice.leader = cur_b, cur_d, leader
                choice.status, choice.unmet = status, unmet
        if note["used"]:
            moved = (choice.cur_b != cluster.rep_broker) | (choice.cur_d != cluster.rep_dir)
            choice.core_moves = int(moved.sum())
    choice.repair_s = time.perf_counter() - t0


def _one_pass(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    request: Request,
    base: tuple[np.ndarray, np.ndarray, np.ndarray | None],
    spark: Any,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray | None], int, dict[str, Any], list[Any]] | None:
    """One greedy pass over ``base``'s result, composed with it: the placement, the pass's
    moves, and the goals' status; None when the composition breaks a hard rule."""
    after = executed(cluster, (base[0], base[1]), base[2])
    scope2 = build_scope(after, request)
    out = plan_core(after, _prepare(after, scope2, spark), scope2, goals=goals, request=request)
    cur_b, cur_d = out.cur_broker.copy(), out.cur_dir.copy()
    leader = _hand_back(cluster, cur_b, cur_d, out.leader, after.rep_leader)
    # What is left of those moves goes back where the previous result put them.
    onto = np.flatnonzero(cur_b != cluster.rep_broker)
    back = onto[_held_in_snapshot(cluster, onto, cur_b[onto]) & (cur_b[onto] != base[0][onto])]
    cur_b[back], cur_d[back] = base[0][back], base[1][back]
    if out.hard_failures or hard_violations(cluster, scope, goals, cur_b, cur_d):
        return None
    status, unmet = _goal_status(cluster, scope, goals, cur_b, cur_d, leader, False)
    return (cur_b, cur_d, leader), out.n_moves, status, list(out.unmet) + unmet


def _held_in_snapshot(cluster: Cluster, reps: np.ndarray, brokers: np.ndarray) -> np.ndarray:
    """Per replica of ``reps``: whether its partition had a replica on ``brokers`` (one
    each) in the snapshot. A partition's replicas are contiguous and few, so one comparison
    per replica slot does it (``np.isin`` over partition-broker keys hashed the million
    keys: 0.3 s a call on 1M replicas)."""
    start = cluster.part_start[cluster.rep_part[reps]]
    size = cluster.part_start[cluster.rep_part[reps] + 1] - start
    out = np.zeros(len(reps), bool)
    for k in range(int(size.max()) if len(reps) else 0):
        slot = np.flatnonzero(k < size)
        out[slot] |= cluster.rep_broker[start[slot] + k] == brokers[slot]
    return out


def _hand_back(
    cluster: Cluster,
    cur_b: np.ndarray,
    cur_d: np.ndarray,
    leader: np.ndarray | None,
    kept: np.ndarray,
) -> np.ndarray | None:
    """Undo (``cur_b``, ``cur_d`` in place; the leaders returned, ``kept`` where the pass
    kept them: None) composed moves onto a broker that held the partition in the snapshot
    by swapping the two replicas' places: a later pass knows only the previous result, so
    it may put replica r back on the broker that replica q of the same partition left
    earlier. Composed, q stays on that broker (in the directory the pass chose) and r goes
    where q went; the partition keeps the same brokers, directories and leader, so every
    band and hard rule reads the same, and Kafka sees one move fewer. Reverting r to where
    the previous result put it instead (what the pass did before) could put two replicas
    of the partition on one rack, and the whole pass was then dropped (combined seed 5 at
    2000 replicas: the pass that met every achievable goal, dropped for two such moves)."""
    start = cluster.part_start
    for _ in range(4):
        onto = np.flatnonzero(cur_b != cluster.rep_broker)
        bad = onto[_held_in_snapshot(cluster, onto, cur_b[onto])]
        if not len(bad):
            break
        if leader is None:
            leader = kept.copy()
        for r in bad.tolist():
            p = int(cluster.rep_part[r])
            for q in range(int(start[p]), int(start[p + 1])):
                if q != r and cluster.rep_broker[q] == cur_b[r]:
                    cur_b[r], cur_b[q] = cur_b[q], cur_b[r]
                    cur_d[r], cur_d[q] = cur_d[q], cur_d[r]
                    leader[r], leader[q] = leader[q], leader[r]
                    break
    return leader


def _distance(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    status: dict[str, Any],
    cur_b: np.ndarray,
    cur_d: np.ndarray,
    leader: np.ndarray | None,
) -> tuple[int, int, int]:
    """How far a placement is from its goals, smaller is closer: achievable goals unmet,
    their fixable offenders, then brokers and directories out of band over every soft goal
    in scope (achievable or not)."""
    after = figures(cluster, scope, goals, cur_b, cur_d, leader)
    out = sum(
        int(after[g.name].get("outOfBand", 0)) for g in soft_goals(goals) if g.in_scope(scope)
    )
    return (*_shortfall(status), out)


def _idle_if_nothing_gained(cluster: Cluster, scope: Scope, goals: Goals, choice: _Choice) -> None:
    """Drop a plan that brings the goals no closer (``_distance``) than the snapshot already
    is, when the snapshot itself keeps the hard rules: its moves only chase bands out of
    reach (each one tried and given up), and executing them would make the next plan chase
    again. The summary's ``idle`` says so, with the moves dropped."""
    moved = (choice.cur_b != cluster.rep_broker) | (choice.cur_d != cluster.rep_dir)
    relead = choice.leader is not None and bool((choice.leader != cluster.rep_leader).any())
    if not moved.any() and not relead:
        return
    if hard_violations(cluster, scope, goals, cluster.rep_broker, cluster.rep_dir):
        return
    status, unmet = _goal_status(
        cluster, scope, goals, cluster.rep_broker, cluster.rep_dir, None, False
    )
    now = _distance(cluster, scope, goals, status, cluster.rep_broker, cluster.rep_dir, None)
    then = _distance(
        cluster, scope, goals, choice.status, choice.cur_b, choice.cur_d, choice.leader
    )
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
    choice: _Choice,
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
    e_status, e_unmet = _goal_status(cluster, scope, goals, e_b, e_d, None, False)
    if refusal is None and _shortfall(e_status) >= _shortfall(choice.status):
        return
    note["used"] = True
    choice.planner, choice.refusal = "exact", None
    choice.cur_b, choice.cur_d, choice.leader = e_b, e_d, cluster.rep_leader
    choice.core_moves = int(((e_b != cluster.rep_broker) | (e_d != cluster.rep_dir)).sum())
    choice.status = e_status
    choice.unmet = _capacity_notes(cluster, scope, goals, e_d) + e_unmet


def _refuse(
    cluster: Cluster, request: Request, choice: _Choice, *, caps: bool, exact_limit: int
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
    choice: _Choice,
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
    item: dict[str, Any], choice: _Choice, cluster: Cluster, request: Request
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


def _goal_status(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    cur_b: np.ndarray,
    cur_d: np.ndarray,
    leader: np.ndarray | None,
    capped: bool,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Each soft goal's status for a placement (met / unmet / unachievable / notInScope), and
    the summary's ``unmet`` entries for the goals left out of band."""
    after = figures(cluster, scope, goals, cur_b, cur_d, leader)
    impossible = unachievable(cluster, scope, goals)
    status: dict[str, Any] = {}
    unmet: list[dict[str, Any]] = []
    for goal in soft_goals(goals):
        key = goal.name
        if not goal.in_scope(scope):
            status[key] = {"status": "notInScope"}
            continue
        found = (
            []
            if after[key]["met"]
            else offenders(
                cluster, scope, goals, cur_b, cur_d, key, leader=leader, limit=cluster.n_dirs
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
        elif capped:
            why += " (the caps stopped planning)"
        unmet.append({"goal": key, "status": state, "why": why, "offenders": found[:10]})
    return status, unmet


def _shortfall(status: dict[str, Any]) -> tuple[int, int]:
    """How far a placement is from "every achievable soft goal met": goals unmet, then
    offenders that some plan could bring into band (smaller is better)."""
    goals = [v for v in status.values() if v["status"] == "unmet"]
    fixable = sum(1 for v in goals for o in v["offenders"] if o["achievable"])
    return len(goals), fixable


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
