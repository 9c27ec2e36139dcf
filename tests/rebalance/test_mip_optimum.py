"""Small clusters against the exact optimum: a MIP (HiGHS via highspy) places every replica so
that all hard rules and all soft bands hold with the fewest bytes moved. The greedy's bytes are
compared with that optimum, and the planner's lower bound must never exceed it.

The bound asserted, and why: the greedy moves, per giving directory, the largest replicas not
above what still has to leave and finishes with at most one replica more than needed; so on
top of the optimum it can spend at most about one replica per directory that must give. The
test asserts greedy <= optimum + (number of directories) x (largest replica), and reports the
actual ratios, which are far tighter.
"""

from __future__ import annotations

import math
from typing import Any

import highspy
import numpy as np
import pytest
from spindle.rebalance.generator import Shape, generate
from spindle.rebalance.model import ACTIVE, Cluster, Goals, PlanError
from spindle.rebalance.pipeline import make_plan
from spindle.rebalance.prepare import hosting_racks, rack_limits
from spindle.rebalance.scope import Request, build_scope


def optimum(cluster: Cluster, goals: Goals) -> float | None:
    """Fewest bytes moved by any placement meeting every goal of full mode, or None."""
    scope = build_scope(cluster, Request(mode="full"))
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", 60.0)
    n_d, n_b = cluster.n_dirs, cluster.n_brokers
    # Plain Python floats (numpy scalars times highspy expressions build numpy objects), in
    # units of the largest disk: products of byte counts would pass HiGHS's 1e20 "infinity".
    unit = float(cluster.dir_total.max())
    size = [float(v) / unit for v in cluster.rep_size]
    total = [float(v) / unit for v in cluster.dir_total]
    ext = [float(v) / unit for v in np.where(scope.hosting, cluster.dir_external(), 0)]
    x: dict[tuple[int, int], Any] = {}
    for r in range(cluster.n_replicas):
        d0 = int(cluster.rep_dir[r])
        for d in range(n_d):
            if scope.receivable[d] or (d == d0 and scope.hosting[d]):
                x[r, d] = h.addBinary()
    by_rep: dict[int, list[tuple[int, Any]]] = {}
    by_dir: dict[int, list[tuple[int, Any]]] = {}
    for (r, d), var in x.items():
        by_rep.setdefault(r, []).append((d, var))
        by_dir.setdefault(d, []).append((r, var))
    for r in range(cluster.n_replicas):
        if r not in by_rep:
            return None
        h.addConstr(sum(v for _, v in by_rep[r]) == 1)
    n_racks = hosting_racks(cluster, scope)
    limits = rack_limits(np.diff(cluster.part_start), n_racks)
    for p in range(cluster.n_partitions):
        lo, hi = int(cluster.part_start[p]), int(cluster.part_start[p + 1])
        for b in range(n_b):
            terms = [v for r in range(lo, hi) for d, v in by_rep[r] if cluster.dir_broker[d] == b]
            if len(terms) > 1:
                h.addConstr(sum(terms) <= 1)
        for rack in range(len(cluster.racks)):
            terms = [
                v
                for r in range(lo, hi)
                for d, v in by_rep[r]
                if cluster.broker_rack[cluster.dir_broker[d]] == rack
            ]
            if len(terms) > int(limits[p]):
                h.addConstr(sum(terms) <= int(limits[p]))

    def load(d: int) -> Any:
        return sum(size[r] * v for r, v in by_dir.get(d, [])) + ext[d]

    host_d = [d for d in range(n_d) if scope.hosting[d]]
    cap_b = np.bincount(
        cluster.dir_broker, weights=np.asarray(total) * scope.hosting, minlength=n_b
    ).tolist()
    placed = sum(size) + sum(ext)
    mean = placed / sum(cap_b)
    n_host = sum(1 for c in cap_b if c > 0)
    reps_mean = cluster.n_replicas / n_host
    leaders_mean = int(cluster.rep_leader.sum()) / n_host
    for d in host_d:
        h.addConstr(load(d) <= goals.capacity_threshold * total[d])
    for b in range(n_b):
        if cap_b[b] <= 0:
            continue
        dirs = [d for d in host_d if cluster.dir_broker[d] == b]
        lb = sum(load(d) for d in dirs)
        h.addConstr(lb <= goals.broker_balance * mean * cap_b[b])
        h.addConstr(lb >= (2 - goals.broker_balance) * mean * cap_b[b])
        active = [d for d in dirs if cluster.dir_state[d] == ACTIVE]
        a_cap = sum(total[d] for d in active)
        for d in active:
            # load_d / T_d within the band of (sum of active loads) / a_cap: linear once both
            # sides are multiplied out; coefficients merged per variable (HiGHS refuses a row
            # naming one variable twice).
            for factor, sense in ((goals.disk_balance, -1.0), (2 - goals.disk_balance, 1.0)):
                coef: dict[int, float] = {}
                var_of: dict[int, Any] = {}
                const = 0.0
                for dd in active:
                    w = -factor * total[d] + (a_cap if dd == d else 0.0)
                    const += w * ext[dd]
                    for r, v in by_dir.get(dd, []):
                        coef[v.index] = coef.get(v.index, 0.0) + w * size[r]
                        var_of[v.index] = v
                expr = sum(c * var_of[i] for i, c in coef.items() if c != 0.0)
                if isinstance(expr, int):
                    continue
                if sense < 0:
                    h.addConstr(expr <= -const)  # a_cap*load_d <= factor*T_d*a_load
                else:
                    h.addConstr(expr >= -const)
        reps = sum(v for d in dirs for _, v in by_dir.get(d, []))
        h.addConstr(reps <= math.ceil(goals.replica_balance * reps_mean))
        h.addConstr(reps >= math.floor((2 - goals.replica_balance) * reps_mean))
        leads = sum(v for d in dirs for r, v in by_dir.get(d, []) if cluster.rep_leader[r])
        h.addConstr(leads <= math.ceil(goals.leader_balance * leaders_mean))
        h.addConstr(leads >= math.floor((2 - goals.leader_balance) * leaders_mean))
    stay = sum(
        size[r] * x[r, int(cluster.rep_dir[r])]
        for r in range(cluster.n_replicas)
        if (r, int(cluster.rep_dir[r])) in x
    )
    h.maximize(stay)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    return (sum(size) - float(h.getInfo().objective_function_value)) * unit


def small_shape(seed: int) -> Shape:
    """4 brokers x 2 disks on 2 racks, 48 replicas (RF 2), every other one with a new broker."""
    return Shape(
        brokers=4,
        disks=2,
        replicas=48,
        replication=2,
        racks=2,
        hot_topics=1,
        disk_sizes=(1.0, 1.5),
        new_brokers=seed % 2,
        target_utilisation=0.45,
        seed=seed,
    )


def test_greedy_is_close_to_the_mip_optimum_and_the_lower_bound_is_below_it() -> None:
    goals = Goals()
    rows = []
    compared = 0
    for seed in range(12):
        cluster = generate(small_shape(seed))
        opt = optimum(cluster, goals)
        try:
            result = make_plan(cluster, Request(mode="full"), goals=goals, detail=False)
        except PlanError:
            rows.append((seed, opt, None, None))
            continue
        greedy = result.summary["bytesMoved"]["total"]
        bound = result.summary["lowerBounds"]["bytes"]
        if opt is not None:
            assert bound <= opt + 1, f"seed {seed}: lower bound {bound} above optimum {opt}"
        met = not [u for u in result.summary["unmet"] if u["goal"] != "caps"]
        rows.append((seed, opt, greedy, met))
        if opt is not None and met:
            compared += 1
            slack = cluster.n_dirs * float(cluster.rep_size.max())
            assert greedy <= opt + slack
    print("\nseed  optimum(bytes)  greedy(bytes)  greedy/optimum  greedy met all goals")
    for seed, opt, greedy, met in rows:
        ratio = f"{greedy / opt:.3f}" if opt and greedy is not None else "-"
        print(f"{seed:4d}  {opt!s:>14}  {greedy!s:>13}  {ratio:>14}  {met}")
    # On these tiny clusters counts are coarse (a band of +-10% around 12 replicas is one
    # replica wide) and the greedy often leaves the leader or replica count goal unmet where
    # the MIP meets it; the table above shows which. Both must meet every goal somewhere.
    assert compared >= 2, "too few instances where both found a plan meeting every goal"


def test_mip_finds_nothing_to_move_after_a_plan_that_met_every_goal(applied: Any) -> None:
    """Sanity of the MIP model itself: executing a greedy plan that met every goal gives a
    cluster whose optimum is zero bytes."""
    checked = 0
    for seed in (8, 10):  # the instances above where the greedy met every goal
        cluster = generate(small_shape(seed))
        result = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
        assert result.summary["unmet"] == []
        assert optimum(applied(cluster, result.placement), Goals()) == pytest.approx(0, abs=1)
        checked += 1
    assert checked == 2
