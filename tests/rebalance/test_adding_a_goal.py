"""Adding a planner goal is one module and one line, done here for real: a toy soft goal
(``NoBalancingOnto``, written as its module under ``rebalance/goals/`` would be) registered
by one line (``goals.GOALS``) is asked by the greedy's destination search, its vetoes change
the plan, and the summary has its figures and status.

Counted by doing it: a goal like this one touches 2 files, its module and the one line in
``rebalance/goals/__init__.py``. What reads the registry: the destination search
(``search.placement``: every soft goal's ``accepts`` vetoes the strict moves its ``vetoes``
names), the exact model (``exact.mip.build``: each goal's ``exact_rows`` where its
``exact_unit`` says; none here), the summary's figures and goal status (``analysis.report``,
``passes``) and the reachability check's entries (``analysis.achievable``).

The greedy's steps run in the registry's order too (``search.core.GOAL_STEPS``, by goal
name): a goal with a greedy step of its own adds its entry there, a third file (the step is
search code, which the goals may not import).

Not read from the registry (measured here, so the tests claim no more): the count phases'
proposer rounds, chains and exchanges check the four balance goals' bands inline on their
hot paths, so a vetoing goal is not kept by those moves (this toy: 89 replicas onto the new
broker without it, 91 with it, default settings, seed 0).
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
from spindle.rebalance.input.scope import Request, Scope
from spindle.rebalance.pipeline import make_plan
from spindle.rebalance.search import core

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
    registry = goal_registry.GOALS
    after_disks = registry.index(goal_registry.DiskBytes) + 1
    # The goal's one line, placed between the byte goals and the count goals; its step.
    monkeypatch.setattr(
        goal_registry, "GOALS", (*registry[:after_disks], NoBalancingOnto, *registry[after_disks:])
    )
    monkeypatch.setitem(core.GOAL_STEPS, NoBalancingOnto.name, (step,))
    monkeypatch.setattr(core, "STEPS", core.goal_order_steps())
    result = make_plan(generate(SHAPE), Request(mode="full"), goals=Goals(), exact_limit=0)
    assert ran  # once a greedy pass (the later passes over its result run it again)
    assert ran[0] > 0  # in the first, after the byte phases had moved replicas
    laps = list(result.core_profile)
    assert laps.index("diskBytesS") < laps.index("toyS") < laps.index("countsS")
