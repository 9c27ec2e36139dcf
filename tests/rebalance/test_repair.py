"""The exact repair (``repair``): a mixed-integer program over the brokers the greedy's
passes leave out of an achievable band, restricted to a neighbourhood of the greedy's
placement. Real HiGHS solves, no mocks."""

from __future__ import annotations

import numpy as np
from spindle.rebalance.analysis.achievable import unachievable
from spindle.rebalance.analysis.report import hard_violations
from spindle.rebalance.exact import repair
from spindle.rebalance.exact.mip import Near
from spindle.rebalance.generator import generate, small_shape
from spindle.rebalance.input.model import Goals
from spindle.rebalance.input.scope import Request, build_scope
from spindle.rebalance.pipeline import make_plan


def test_a_neighbourhood_solve_moves_only_replicas_on_or_onto_its_brokers() -> None:
    cluster = generate(small_shape(2))
    request = Request(mode="full")
    scope = build_scope(cluster, request)
    goals = Goals()
    planned = make_plan(cluster, request, goals=goals, detail=False, exact_limit=0)
    _, planned_d = planned.placement
    inside = np.zeros(cluster.n_brokers, bool)
    inside[[0, 3]] = True
    found = repair.solve_near(
        cluster,
        scope,
        goals,
        Near(planned_dir=planned_d, brokers=inside),
        unachievable(cluster, scope, goals),
    )
    assert found.status == "optimal"
    assert found.cur_dir is not None
    assert found.cur_broker is not None
    assert hard_violations(cluster, scope, goals, found.cur_broker, found.cur_dir) == []
    planned_b = cluster.dir_broker[planned_d]
    touches = inside[cluster.rep_broker] | inside[planned_b] | inside[found.cur_broker]
    assert (found.cur_dir[~touches] == planned_d[~touches]).all()
    # The greedy's placement is in the neighbourhood: the optimum moves no more bytes.
    assert found.bytes_moved <= planned.summary["bytesMoved"]["total"]
