"""The passes after a plan's first greedy pass, and the goal status that judges them: more
greedy passes over the previous result (``second_pass``), the exact repair over the brokers
left out of band (``repair_pass``), and the placement every pass and planner writes its
result to (``Choice``). ``pipeline.make_plan`` runs them; they live here so that each module
stays one reading's worth.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from spindle.rebalance.analysis.achievable import classify, unachievable
from spindle.rebalance.analysis.report import figures, hard_violations, offenders
from spindle.rebalance.exact import repair
from spindle.rebalance.goals import soft_goals
from spindle.rebalance.input.model import Cluster, Goals, executed
from spindle.rebalance.input.scope import Request, Scope, build_scope
from spindle.rebalance.search.core import plan_core, reordered_leaders
from spindle.rebalance.search.prepare import Prepared, prepare_local


@dataclass
class Choice:
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


def prepare(cluster: Cluster, scope: Scope, spark: Any) -> Prepared:
    """The preparation stage: Spark when given a session, numpy otherwise."""
    if spark is not None:
        from spindle.rebalance.spark.job import prepare_spark

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


def second_pass(
    cluster: Cluster, scope: Scope, goals: Goals, request: Request, choice: Choice, spark: Any
) -> None:
    """Plan the greedy's own result again and compose the two, when the first pass left an
    achievable goal unmet: a later pass starts from balanced bytes, so its moves go to what
    is left (a count band, a broker the count moves pushed just over its byte band) and may
    re-target a replica an earlier pass moved, which one pass never does (a replica moves at
    most once per pass; composed, it still moves once). Passes continue from each result
    (used or not) until ``PATIENCE`` in a row bring the goals no closer (``distance``);
    the closest placement keeping every hard rule against the snapshot is used. Re-planning
    that placement repeats those last passes, so it finds nothing closer either (stable).
    ``secondPass`` in the summary lists each pass: its moves and whether it was used."""
    t0 = time.perf_counter()
    limit = MAX_PASSES if cluster.n_replicas <= BIG else MAX_PASSES_BIG
    best = distance(cluster, scope, goals, choice.status, choice.cur_b, choice.cur_d, choice.leader)
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
        dist = distance(cluster, scope, goals, status, cur_b, cur_d, leader)
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
        if out_moves == 0 or since_best >= PATIENCE or not short_of_goals(choice.status)[0]:
            break
        base = (cur_b, cur_d, leader)
    choice.second["moves"] = sum(int(p["moves"]) for p in passes)
    if not choice.second["used"]:
        choice.second["why"] = "no later pass met more goals than the first"
    choice.second_s = time.perf_counter() - t0


def repair_pass(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    request: Request,
    choice: Choice,
    spark: Any,
    *,
    exact_limit: int,
) -> None:
    """When the greedy's passes leave an achievable goal unmet: the exact repair over the
    brokers out of band (``repair``), its leaders by the greedy's preferred-leader changes
    (which the repair leaves to them), and one greedy pass over that; the closer of the
    two (``distance``) is used when it is closer than the greedy's placement. Noted as
    ``secondPass.repair``: the neighbourhoods tried, and whether it was used. Run above
    the exact planner's limit (below it, that one solves the whole cluster) and up to
    ``repair.MAX_REPLICAS`` replicas."""
    if not short_of_goals(choice.status)[0]:
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
            lead = reordered_leaders(cluster, request, goals, placed, lead)
        base = (found.cur_broker, found.cur_dir, lead)
        best = distance(
            cluster, scope, goals, choice.status, choice.cur_b, choice.cur_d, choice.leader
        )
        options: list[tuple[tuple[np.ndarray, np.ndarray, np.ndarray | None], Any, Any]] = []
        if not hard_violations(cluster, scope, goals, base[0], base[1]):
            status, unmet = goal_status(cluster, scope, goals, *base, False)
            options.append((base, status, unmet))
        step = _one_pass(cluster, scope, goals, request, base, spark)
        if step is not None:
            options.append((step[0], step[2], step[3]))
        for (cur_b, cur_d, leader), status, unmet in options:
            dist = distance(cluster, scope, goals, status, cur_b, cur_d, leader)
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
    out = plan_core(after, prepare(after, scope2, spark), scope2, goals=goals, request=request)
    cur_b, cur_d = out.cur_broker.copy(), out.cur_dir.copy()
    leader = _hand_back(cluster, cur_b, cur_d, out.leader, after.rep_leader)
    # What is left of those moves goes back where the previous result put them.
    onto = np.flatnonzero(cur_b != cluster.rep_broker)
    back = onto[_held_in_snapshot(cluster, onto, cur_b[onto]) & (cur_b[onto] != base[0][onto])]
    cur_b[back], cur_d[back] = base[0][back], base[1][back]
    if out.hard_failures or hard_violations(cluster, scope, goals, cur_b, cur_d):
        return None
    status, unmet = goal_status(cluster, scope, goals, cur_b, cur_d, leader, False)
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


def distance(
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
    return (*short_of_goals(status), out)


def goal_status(
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


def short_of_goals(status: dict[str, Any]) -> tuple[int, int]:
    """How far a placement is from "every achievable soft goal met": goals unmet, then
    offenders that some plan could bring into band (smaller is better)."""
    goals = [v for v in status.values() if v["status"] == "unmet"]
    fixable = sum(1 for v in goals for o in v["offenders"] if o["achievable"])
    return len(goals), fixable
