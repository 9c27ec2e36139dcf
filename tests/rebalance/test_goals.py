"""Goals as units: each goal answers for itself (its scope, its score, its rows in the exact
model), and the summary lists the goal objects rather than names typed out again."""

from __future__ import annotations

import numpy as np
from spindle.rebalance.exact.mip import Model
from spindle.rebalance.generator import Shape, generate
from spindle.rebalance.goals import (
    BrokerBytes,
    Capacity,
    DiskBytes,
    LeaderCount,
    ReplicaCount,
    soft_goals,
)
from spindle.rebalance.goals.counts import dir_score, taker_score
from spindle.rebalance.input.model import Goals
from spindle.rebalance.input.scope import Request, build_scope
from spindle.rebalance.pipeline import make_plan

SMALL = Shape(brokers=4, disks=2, replicas=120, racks=2, new_brokers=1, seed=2)


def test_the_summary_lists_the_soft_goal_objects_in_their_order() -> None:
    result = make_plan(generate(SMALL), Request(mode="full"), goals=Goals(), detail=False)
    names = [goal.name for goal in soft_goals(Goals())]
    assert list(result.summary["goalStatus"]) == names
    assert [k for k in result.summary["after"] if k in names] == names


def test_a_count_taker_with_fewer_replicas_wins_whatever_its_bytes_and_dirs_only_break_ties() -> (
    None
):
    assert taker_score(9, 10, 1.0) < taker_score(10, 10, 0.0)
    assert taker_score(9, 10, 0.2) < taker_score(9, 10, 0.3)
    assert dir_score(taker_score(9, 10, 0.2), 1.0) < dir_score(taker_score(9, 10, 0.3), 0.0)
    assert dir_score(taker_score(9, 10, 0.2), 0.1) < dir_score(taker_score(9, 10, 0.2), 0.2)


def _rows_added(mode: str) -> dict[str, int]:
    """Rows each soft goal adds to the exact model of SMALL in ``mode``, over every broker."""
    cluster = generate(SMALL)
    model = Model(
        cluster,
        build_scope(cluster, Request(mode=mode)),
        Goals(),
        elastic=True,
        onto_holders=False,
    )
    model.add_loads([Capacity(Goals())])  # the L_d columns the bands name
    added: dict[str, int] = {}
    for goal in (
        BrokerBytes(Goals()),
        ReplicaCount(Goals()),
        LeaderCount(Goals()),
        DiskBytes(Goals()),
    ):
        before = len(model.rows.lo)
        for b in np.flatnonzero(model.b_cap > 0).tolist():  # as add_bands does
            goal.exact_rows(model, b)
        added[goal.name] = len(model.rows.lo) - before
    return added


def test_a_goal_outside_the_modes_scope_adds_no_rows_to_the_exact_model() -> None:
    full = _rows_added("full")
    assert all(n > 0 for n in full.values()), full
    intra = _rows_added("intra-broker")  # disks only: brokers and counts are not in scope
    assert intra[DiskBytes.name] > 0
    assert intra[BrokerBytes.name] == intra[ReplicaCount.name] == intra[LeaderCount.name] == 0
