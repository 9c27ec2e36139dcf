"""The goal status of a plan: ``classify`` tells a planner shortfall from a real limit, from
the bands no plan reaches (``unachievable``).

Which bands those are is each goal's own check (``SoftGoal.out_of_reach``, a hard goal's
``excuses``), with the figures they share in ``goals.reach``: the greedy and the exact repair
ask it too, and sit below the analysis, so it lives with the goals. ``unachievable``,
``rack_keeps`` and ``blocked_disk_mean`` are named here as well for the callers that judge a
plan (the report, the tests, ``bench/plan_hashes``).
"""

from __future__ import annotations

from typing import Any

from spindle.rebalance.goals import GOALS, unachievable
from spindle.rebalance.goals.reach import blocked_disk_mean, rack_keeps
from spindle.rebalance.input.model import Cluster

__all__ = ["blocked_disk_mean", "classify", "rack_keeps", "unachievable"]


def classify(
    goal: str, offenders: list[dict[str, Any]], impossible: dict[Any, str], cluster: Cluster
) -> tuple[str, list[dict[str, Any]]]:
    """Status of one goal from its offenders after the plan: ``met`` (none), ``unachievable``
    (every offender is one no plan can fix; each carries the reason) or ``unmet`` (at least
    one offender was fixable: a planner shortfall). Offenders gain ``achievable``."""
    if not offenders:
        return "met", offenders
    ids = cluster.broker_ids.tolist()
    on_dirs = any(g.name == goal and g.offends == "dir" for g in GOALS)
    for o in offenders:
        if on_dirs:
            key = next(
                (
                    d
                    for d in impossible
                    if ids[int(cluster.dir_broker[d])] == o["broker"]
                    and cluster.dir_path[d] == o["path"]
                ),
                None,
            )
        else:
            key = next((b for b in impossible if ids[b] == o["broker"]), None)
        o["achievable"] = key is None
        if key is not None:
            o["why"] = impossible[key]
    status = "unmet" if any(o["achievable"] for o in offenders) else "unachievable"
    return status, offenders
