"""Replicas passed between two brokers both ways stay put (``cancel``), last, where both
brokers' bands stay no worse."""

from __future__ import annotations

import numpy as np
from spindle.rebalance.generator import family_shape, generate
from spindle.rebalance.input.model import Cluster, Goals
from spindle.rebalance.input.scope import Request
from spindle.rebalance.pipeline import PlanResult, make_plan
from spindle.rebalance.search import core

from .test_hard_rules import check_hard_rules


def _plan(
    family: str, seed: int, replicas: int, *, cancel: bool = True
) -> tuple[Cluster, PlanResult]:
    cluster = generate(family_shape(family, seed, replicas))
    saved = core.STEPS
    if not cancel:
        core.STEPS = tuple(st for st in saved if st.lap != "cancelS")
    try:
        return cluster, make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
    finally:
        core.STEPS = saved


def _both_ways(cluster: Cluster, result: PlanResult) -> int:
    """Broker pairs with replicas moved from each to the other."""
    to = np.asarray(result.placement[0])
    moved = to != cluster.rep_broker
    pairs = set(zip(cluster.rep_broker[moved].tolist(), to[moved].tolist(), strict=True))
    return sum(1 for a, b in pairs if a < b and (b, a) in pairs)


def test_a_draining_directory_is_emptied_onto_its_own_broker_instead_of_round_trips() -> None:
    # violations, 2K replicas, seed 0 (issue 15's sweep: 1.443x its bound): broker 6's
    # draining directory went to rack-mates 0 and 3, which sent replicas back so broker 6
    # stayed in its count band -- 1320 GB in all. A replica sent back and one of the
    # draining ones now stay on broker 6 instead (the draining one in the directory the
    # other had landed on): 1101 GB, 1.20x the bound, every goal still met.
    cluster, result = _plan("violations", 0, 2_000)
    s = result.summary
    assert s["bytesMoved"]["total"] <= 1.11e12
    assert s["bytesOverLowerBound"] <= 1.25
    assert all(v["status"] != "unmet" for v in s["goalStatus"].values())
    check_hard_rules(cluster, Request(mode="full"), result, Goals())


def test_count_phase_churn_between_two_brokers_is_cancelled_where_bands_allow() -> None:
    # combined, 16K replicas, seed 7 (issue 15's sweep: 1.309x its bound): an aged broker
    # over its count band took large replicas to give away small ones, and the exchange
    # phase shipped large ones back out. 7.24 TB before, 6.84 TB (1.24x) now.
    cluster, result = _plan("combined", 7, 16_000)
    s = result.summary
    assert s["bytesOverLowerBound"] <= 1.25
    assert all(v["status"] != "unmet" for v in s["goalStatus"].values())
    check_hard_rules(cluster, Request(mode="full"), result, Goals())


def test_cancelling_leaves_every_goal_as_it_was_for_fewer_bytes_and_fewer_round_trips() -> None:
    cluster, result = _plan("violations", 0, 2_000)
    _, plain = _plan("violations", 0, 2_000, cancel=False)
    assert result.summary["bytesMoved"]["total"] < plain.summary["bytesMoved"]["total"]
    assert result.summary["moves"]["total"] < plain.summary["moves"]["total"]
    assert _both_ways(cluster, result) < _both_ways(cluster, plain)
    for goal, status in plain.summary["goalStatus"].items():
        assert result.summary["goalStatus"][goal]["status"] == status["status"]
