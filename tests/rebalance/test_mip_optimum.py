"""Small clusters against the exact optimum: the package's MIP (``exact.solve``, HiGHS via
highspy) with every soft band hard places every replica so that all hard rules and all soft
bands hold with the fewest bytes moved. The planner (greedy, with the exact fallback on
small clusters) must meet every goal wherever that optimum exists, its bytes are compared
with it, and the planner's lower bound must never exceed it.

The bound asserted, and why: the greedy moves, per giving directory, the largest replicas not
above what still has to leave and finishes with at most one replica more than needed; so on
top of the optimum it can spend at most about one replica per directory that must give. The
test asserts plan <= optimum + (number of directories) x (largest replica), and reports the
actual ratios, with whether the greedy alone met every goal and which planner's plan it is.
"""

from __future__ import annotations

from typing import Any

import pytest
from spindle.rebalance.exact import mip as exact
from spindle.rebalance.generator import generate, small_shape
from spindle.rebalance.input.model import Cluster, Goals, PlanError
from spindle.rebalance.input.scope import Request, build_scope
from spindle.rebalance.pipeline import make_plan


def optimum(cluster: Cluster, goals: Goals) -> float | None:
    """Fewest bytes moved by any placement meeting every goal of full mode (the package's
    exact model with every soft band hard), or None when there is none."""
    scope = build_scope(cluster, Request(mode="full"))
    found = exact.solve(
        cluster, scope, goals, elastic=False, node_limit=2_000, rel_gap=1e-3, time_limit=60.0
    )
    if found.cur_broker is None:
        return None
    return found.bytes_moved


def _met_all(summary: dict[str, Any]) -> bool:
    return not [u for u in summary["unmet"] if u["goal"] != "caps"]


def test_planner_meets_every_goal_where_the_mip_does_and_the_lower_bound_is_below_it() -> None:
    goals = Goals()
    rows = []
    compared = 0
    for seed in range(12):
        cluster = generate(small_shape(seed))
        opt = optimum(cluster, goals)
        # The greedy alone (exact fallback off), for the table.
        try:
            alone = make_plan(
                cluster, Request(mode="full"), goals=goals, detail=False, exact_limit=0
            )
            greedy_met: bool | None = _met_all(alone.summary)
        except PlanError:
            greedy_met = None
        try:
            result = make_plan(cluster, Request(mode="full"), goals=goals, detail=False)
        except PlanError:
            assert opt is None, f"seed {seed}: refused although the MIP places every replica"
            rows.append((seed, opt, None, None, greedy_met, "-"))
            continue
        moved = result.summary["bytesMoved"]["total"]
        bound = result.summary["lowerBounds"]["bytes"]
        if opt is not None:
            assert bound <= opt + 1, f"seed {seed}: lower bound {bound} above optimum {opt}"
        met = _met_all(result.summary)
        rows.append((seed, opt, moved, met, greedy_met, result.summary["planner"]))
        if opt is not None:
            # Where some plan meets every goal, the planner (greedy, else exact) does too.
            assert met, f"seed {seed}: the MIP meets every goal, the planner did not"
            compared += 1
            slack = cluster.n_dirs * float(cluster.rep_size.max())
            assert moved <= opt + slack
    print("\nseed  optimum(bytes)  plan(bytes)  plan/optimum  met all  greedy alone met  planner")
    for seed, opt, moved, met, greedy_met, planner in rows:
        ratio = f"{moved / opt:.3f}" if opt and moved is not None else "-"
        print(
            f"{seed:4d}  {opt!s:>14}  {moved!s:>11}  {ratio:>12}  {met!s:>7}  "
            f"{greedy_met!s:>16}  {planner}"
        )
    assert compared >= 2, "too few instances where the MIP meets every goal"


def test_mip_finds_nothing_to_move_after_a_plan_that_met_every_goal(applied: Any) -> None:
    """Sanity of the MIP model itself: executing a plan that met every goal gives a cluster
    whose optimum is zero bytes."""
    checked = 0
    for seed in (8, 10):  # instances above where the planner meets every goal
        cluster = generate(small_shape(seed))
        result = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
        assert result.summary["unmet"] == []
        assert optimum(applied(cluster, result.placement), Goals()) == pytest.approx(0, abs=1)
        checked += 1
    assert checked == 2
