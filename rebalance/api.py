"""The planner's facade: one call from a snapshot to a plan, for every caller outside the
planner (the CLI, the planner Job's program, the operator's remediation, the benchmarks).

    result = plan(snapshot, Request(mode="full"), Goals())
    result.plan        # the reassignment JSON (kafka-reassign-partitions --execute)
    result.election    # the partitions whose preferred leader changes
    result.summary     # figures before/after, goal status, bounds, what was tried

Why a facade: the planner's insides (``input``, ``goals``, ``search``, ``exact``,
``analysis``, ``spark``) may be rearranged without touching its callers; an import-linter
contract keeps the operator to this module and the package's own names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spindle.rebalance.exact.mip import MAX_REPLICAS
from spindle.rebalance.input.model import Cluster, Goals, parse_snapshot
from spindle.rebalance.input.scope import Request
from spindle.rebalance.pipeline import PlanResult, make_plan

__all__ = ["PlanResult", "plan", "plan_command"]


def plan(
    snapshot: Cluster | Mapping[str, Any],
    request: Request,
    goals: Goals,
    spark: Any = None,
    *,
    detail: bool = True,
    exact_limit: int = MAX_REPLICAS,
) -> PlanResult:
    """Plan one request over ``snapshot`` (a parsed ``Cluster``, or the snapshot document
    ``spindle-rebalance plan --snapshot`` reads). ``spark``: a SparkSession for the
    preparation stage and the proposer rounds (None: numpy, in-process). ``detail``: the
    summary lists per-broker and per-directory usage. ``exact_limit``: the largest cluster
    (replicas) the exact planner may take over on (0: the greedy only).

    Raises ``PlanError`` when a hard goal cannot be met, ``SnapshotError`` for a snapshot
    that does not parse."""
    cluster = snapshot if isinstance(snapshot, Cluster) else parse_snapshot(snapshot)
    return make_plan(
        cluster, request, goals=goals, spark=spark, detail=detail, exact_limit=exact_limit
    )


def plan_command(argv: list[str]) -> dict[str, Any]:
    """``spindle-rebalance plan ...`` in-process (``argv``: ``["plan", "--snapshot", ...]``):
    reads the snapshot and goals files, writes the plan, summary and election files it
    names, returns the summary. What a program that hands the planner files runs."""
    from spindle.rebalance import cli

    args = cli._parser().parse_args(argv)
    if args.command != "plan":
        raise ValueError(f"plan_command runs the plan command, not {args.command!r}")
    return cli.run_plan(args)
