"""Exact repair over a neighbourhood: an achievable band the greedy's passes leave out of
band, settled by a mixed-integer program over the few brokers outside it.

Why: a band can need several replicas to move at once. Combined seed 19 at 2000 replicas
(racks of 3, 6 and 9 brokers, RF 2 and 3): two of rack-1's brokers sit 29 and 35 replicas
above the replica band's top; rack 2 holds a replica of every partition already, so rack 1
can only give RF-2 replicas to rack 0, whose brokers sit at the top of their byte bands or
count bands; every single move, and every exchange between two brokers, breaks some band,
and five greedy passes left the goal "unmet" although a plan meeting it exists (this module
finds one, moving 18 % fewer bytes). The exact planner (``exact.solve``) settles such cases
over the whole cluster, but only up to ``exact.MAX_REPLICAS`` replicas; here its model is
restricted to a neighbourhood of the greedy's placement (``exact.Near``): replicas on, or
planned onto, the out-of-band brokers may end anywhere the mode allows (their snapshot place
included, which cancels a move); every other replica keeps its planned place or moves onto
those brokers. Every band a plan can reach is a hard row, so bands the greedy met stay met;
bands out of reach (``goals.unachievable``) are left out, and so are the leader bands
when leadership moves by preferred-leader changes (the greedy pass the pipeline runs over the
result balances them without moving bytes). The objective is the bytes moved against the
snapshot. When the out-of-band brokers alone admit no solution, their rack-mates that may
not receive are added, then their whole racks: rack awareness ties what one rack holds to
its other brokers (violations seed 5 at 2000 replicas, RF 3 on 3 racks: broker 12, an
Offline dir, shed 61 replicas for its disk band where fewer, larger ones would do, and left
its rack-mate broker 9 above the replica band; the two together are enough).

Deterministic: the exact planner's solver settings (one thread, a fixed seed, a node limit);
a solve stopped by the time backstop is not used.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from spindle.rebalance.exact.mip import ExactResult, Model, Near, build, mip_solver, read_result
from spindle.rebalance.goals import DISK_BYTES, CountGoal, Goal, unachievable
from spindle.rebalance.input.model import Cluster, Goals
from spindle.rebalance.input.scope import Scope

#: Largest cluster (replicas) repaired: the model's columns are built replica by replica and
#: the root LP grows with them. Measured (two shared cores): 2000-8000 replicas, 9-25 s a
#: solve, nearly all of it the root LP (combined seed 19 at 2000: 27,769 columns, one node).
MAX_REPLICAS = 10_000
#: Branch-and-bound nodes per solve (deterministic, unlike the time backstop).
NODE_LIMIT = 500
#: Backstop for one solve (seconds), far above the measured solves so that the node limit,
#: not the machine's load, decides: a solve it stops is not used. (At 30 s, on a loaded
#: machine, combined seed 19 at 2000 replicas was stopped in its first plan and solved in
#: the re-plan, which then moved 13 % of the partitions.)
TIME_LIMIT = 120.0
#: Relative optimality gap at which a solve stops (violations seed 20 at 4000 replicas: 1 %
#: took over 30 s, 5 % 25 s, for the same placement).
REL_GAP = 5e-2


def offender_brokers(cluster: Cluster, status: dict[str, Any]) -> np.ndarray:
    """Per broker: whether it holds an offender some plan could bring into band (a broker
    offender, or the broker of a directory offender) of a goal left unmet."""
    ids = {int(b): i for i, b in enumerate(cluster.broker_ids.tolist())}
    out = np.zeros(cluster.n_brokers, bool)
    for v in status.values():
        if v["status"] != "unmet":
            continue
        for o in v["offenders"]:
            if o["achievable"]:
                out[ids[int(o["broker"])]] = True
    return out


def repair(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    planned_dir: np.ndarray,
    status: dict[str, Any],
) -> tuple[ExactResult | None, list[dict[str, Any]]]:
    """A placement near ``planned_dir`` meeting every band a plan can reach, or None; and,
    per neighbourhood tried (the out-of-band brokers; with their rack-mates that may not
    receive, whose shedding sets what the rest of the rack holds; their racks), its brokers
    (ids) and the solve's status (no seconds: the summary is deterministic)."""
    inside = offender_brokers(cluster, status)
    tries: list[dict[str, Any]] = []
    if not inside.any():
        return None, tries
    excused = unachievable(cluster, scope, goals)
    racks = np.isin(cluster.broker_rack, cluster.broker_rack[inside])
    closed = np.ones(cluster.n_brokers, bool)
    closed[cluster.dir_broker[scope.receivable]] = False
    wider: list[np.ndarray] = []
    for brokers in (inside, inside | (racks & closed), racks):
        if not any((brokers == w).all() for w in wider):
            wider.append(brokers)
    for brokers in wider:
        near = Near(planned_dir=planned_dir, brokers=brokers)
        found = solve_near(cluster, scope, goals, near, excused)
        tries.append(
            {
                "brokers": cluster.broker_ids[brokers].tolist(),
                "status": found.status,
            }
        )
        if found.cur_dir is not None:
            return found, tries
        if found.status != "infeasible":
            break  # stopped by a limit: a wider neighbourhood is a harder search
    return None, tries


def solve_near(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    near: Near,
    excused: dict[str, dict[Any, str]],
) -> ExactResult:
    """The fewest bytes moved within ``near`` with every band not ``excused`` met."""
    t0 = time.perf_counter()
    model = Model(
        cluster,
        scope,
        goals,
        elastic=False,
        onto_holders=False,
        near=near,
        excused_dirs=frozenset(excused[DISK_BYTES]),
    )
    if model.uncovered:
        return ExactResult(status="infeasible", seconds=time.perf_counter() - t0)
    h = mip_solver(time_limit=TIME_LIMIT, node_limit=NODE_LIMIT, rel_gap=REL_GAP)

    def keep(goal: Goal, b: int) -> bool:
        if isinstance(goal, CountGoal) and goal.leaders and goals.leader_reorder:
            return False  # left to preferred-leader changes (``search.core.reordered_leaders``)
        # Directory goals' out-of-reach entries are directories: the model's excused_dirs.
        return goal.offends != "broker" or b not in excused.get(goal.name, {})

    build(h, model, goals, keep)
    h.run()
    return read_result(h, model, time.perf_counter() - t0)
