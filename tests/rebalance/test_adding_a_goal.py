"""Adding a planner goal is one module and one line, done here for real: a toy soft goal
(``NoBalancingOnto``, written as its module under ``rebalance/goals/`` would be) registered
by one line (``goals.GOALS``) is asked by the greedy's destination search, its vetoes change
the plan, and the summary has its figures and status.

Counted by doing it: a goal like this one touches 2 files, its module and the one line in
``rebalance/goals/__init__.py``. What reads the registry: the destination search
(``search.placement``: every soft goal's ``accepts`` vetoes the strict moves its ``vetoes``
names), the exact model (``exact.mip.build``: each goal's ``exact_rows`` where its
``exact_unit`` says; none here), the summary's figures and goal status (``analysis.report``,
``passes``) and the reachability check's entries (``goals.unachievable``: each goal's
``out_of_reach``; none here, so its band counts as reachable).

The greedy's steps run in the registry's order too: each goal names its steps by key
(``Goal.steps``; the search holds them, ``search.core.STEP_KINDS``, as the goals may not
import the optimiser). A goal the existing steps work on names one of them or none, still two
files; one with a step of its own also registers that step on the search side, a third.

The count phases ask it too: their proposer rounds, chains and exchanges take their takers
and givers from every goal's size-independent limits (``SoftGoal.take_room``/``give_room``)
and check the four balance goals' size-dependent bands on mirrored figures (``state.MIRRORED``,
their hot paths); a goal outside those is asked through its ``accepts`` before each count
move (``PlannerState.asked``). Measured here: the greedy's first pass sends 89 replicas onto
the new broker without the toy, 13 with it -- all 13 by the capacity relief, a hard goal's
move that no soft goal may veto (before the count phases asked it: 89 with it too).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from spindle.rebalance import goals as goal_registry
from spindle.rebalance.generator import Shape, generate
from spindle.rebalance.goals import SoftGoal
from spindle.rebalance.goals.base import Move, Placed
from spindle.rebalance.goals.protocol import State
from spindle.rebalance.input.model import Goals
from spindle.rebalance.input.scope import Request, Scope, build_scope
from spindle.rebalance.pipeline import make_plan
from spindle.rebalance.search import core, count_phases
from spindle.rebalance.search.prepare import prepare_local

SHAPE = Shape(brokers=6, disks=2, replicas=600, racks=3, new_brokers=1, seed=0)


# ---- the module a real goal would be (rebalance/goals/<name>.py) -------------------------
class NoBalancingOnto(SoftGoal):
    """Toy: the last broker (the new one here) takes no replica by a balancing move."""

    name = "toyNoBalancingOntoLastBroker"
    #: How many candidate destinations it refused (the test reads it).
    refused = 0

    def in_scope(self, scope: Scope) -> bool:
        return True

    def accepts(self, st: State, mv: Move) -> Any:
        ok = np.asarray(mv.b) != st.dir_b.max()
        NoBalancingOnto.refused += int(ok.size - np.count_nonzero(ok))
        return ok

    def _arrived(self, placed: Placed) -> int:
        c = placed.cluster
        last = c.n_brokers - 1
        return int(((placed.cur_broker == last) & (c.rep_broker != last)).sum())

    def figures(self, placed: Placed) -> dict[str, Any]:
        n = self._arrived(placed)
        return {"arrived": n, "outOfBand": int(n > 0), "met": n == 0}

    def violations(self, placed: Placed, *, limit: int) -> list[Any]:
        n = self._arrived(placed)
        bid = int(placed.cluster.broker_ids[-1])
        return [{"broker": bid, "value": n, "why": "replicas arrived"}][:limit] if n else []


# ------------------------------------------------------------------------------------------


def test_a_goal_added_by_one_line_vetoes_destinations_and_is_in_the_summary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request = Request(mode="full")
    without = make_plan(generate(SHAPE), request, goals=Goals(), exact_limit=0)
    assert NoBalancingOnto.name not in without.summary["goalStatus"]
    assert NoBalancingOnto.refused == 0

    # The one line: the goal registered after the goals it must not undo.
    monkeypatch.setattr(goal_registry, "GOALS", (*goal_registry.GOALS, NoBalancingOnto))

    with_goal = make_plan(generate(SHAPE), request, goals=Goals(), exact_limit=0)
    assert NoBalancingOnto.refused > 0  # the destination search asked it, and it said no
    assert with_goal.plan != without.plan
    assert with_goal.summary["goalStatus"][NoBalancingOnto.name]["status"] in ("met", "unmet")
    cluster = generate(SHAPE)
    cur_b, _ = with_goal.placement
    last = cluster.n_brokers - 1
    arrived = int(((cur_b == last) & (cluster.rep_broker != last)).sum())
    assert with_goal.summary["after"][NoBalancingOnto.name]["arrived"] == arrived


def test_the_greedys_steps_run_in_the_goals_order_as_they_always_ran() -> None:
    assert [st.lap for st in core.STEPS] == [
        "evacuateS",
        "fixRacksS",
        "relieveCapacityS",
        "brokerBytesS",
        "diskBytesS",
        "countsS",
        "exchangeS",
        "diskBytesS",
        "cancelS",
        "simplifyS",
    ]


def test_a_registered_goals_own_step_runs_after_the_goals_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[int] = []
    step = core.Step("toyS", (), lambda pl: True, lambda pl: ran.append(pl.n_moves))

    class WithAStep(NoBalancingOnto):
        steps = ("toyS",)  # the goal names its step; the search side registers it

    registry = goal_registry.GOALS
    after_disks = registry.index(goal_registry.DiskBytes) + 1
    # The goal's one line, placed between the byte goals and the count goals; its step.
    monkeypatch.setattr(
        goal_registry, "GOALS", (*registry[:after_disks], WithAStep, *registry[after_disks:])
    )
    monkeypatch.setitem(core.STEP_KINDS, step.lap, step)
    monkeypatch.setattr(core, "STEPS", core.goal_order_steps())
    result = make_plan(generate(SHAPE), Request(mode="full"), goals=Goals(), exact_limit=0)
    assert ran  # once a greedy pass (the later passes over its result run it again)
    assert ran[0] > 0  # in the first, after the byte phases had moved replicas
    laps = list(result.core_profile)
    assert laps.index("diskBytesS") < laps.index("toyS") < laps.index("countsS")


def _greedy_arrivals(goals: Goals) -> tuple[int, int]:
    """Replicas the greedy's first pass sends onto the last broker, and its proposer rounds."""
    cluster, request = generate(SHAPE), Request(mode="full")
    scope = build_scope(cluster, request)
    pl = core.Planner(cluster, prepare_local(cluster, scope), scope, goals=goals, request=request)
    out = pl.run()
    last = cluster.n_brokers - 1
    return int(((out.cur_broker == last) & (cluster.rep_broker != last)).sum()), pl._prop_rounds


def test_a_goal_added_by_one_line_is_kept_by_the_count_phases_rounds_and_exchanges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Proposer rounds on this small cluster too (they start at ROUND_MIN moves).
    monkeypatch.setattr(count_phases, "ROUND_MIN", 1)
    without, _ = _greedy_arrivals(Goals())
    monkeypatch.setattr(goal_registry, "GOALS", (*goal_registry.GOALS, NoBalancingOnto))
    with_goal, rounds = _greedy_arrivals(Goals())
    assert rounds > 0
    # What arrives with the goal is what the steps up to the capacity relief (a hard goal's
    # moves, which no soft goal vetoes) send: no balancing step after them sends any.
    laps = [st.lap for st in core.STEPS]
    monkeypatch.setattr(core, "STEPS", core.STEPS[: laps.index("relieveCapacityS") + 1])
    relieved, _ = _greedy_arrivals(Goals())
    assert with_goal == relieved < without
