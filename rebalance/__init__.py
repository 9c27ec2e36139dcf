"""Spindle's rebalance planner: a PySpark job turning a cluster snapshot into a reassignment plan
across brokers and log directories.

The pipeline, one subpackage per stage (``pipeline.make_plan`` runs them in order):

  ``input``     the snapshot and the request: ``model`` (snapshot JSON -> validated numpy
                columns, goal settings, errors), ``scope`` (what the mode may touch: dirs
                to empty, dirs that may receive, goals in play)
  ``goals``     one module per goal (capacity, rack, broker bytes, disk bytes, replica and
                leader counts) behind one interface, and ``bands``, the band arithmetic
  ``search``    the greedy: ``prepare`` (per-replica aggregates, candidate order), ``state``
                (loads, counts, ``apply``), ``placement`` (the destination search), ``core``
                (the steps in order), the phases (``byte_phases``, ``count_phases``,
                ``leader_paths``, ``chains``, ``exchange``, ``cancel``, ``simplify``) and the
                count phases' proposer (``propose``)
  ``spark``     the same preparation and proposer as Spark jobs (``job``, ``propose``): the
                only modules that import pyspark
  ``exact``     the mixed-integer program (HiGHS) for small clusters (``mip``) and the
                repair over the brokers the greedy left out of band (``repair``)
  ``analysis``  judging a placement from the snapshot alone, sharing nothing with the
                optimiser: ``report`` (reassignment JSON, figures, hard-rule check),
                ``bound_lp`` (lower bounds), ``achievable`` (the goal status: a shortfall or a
                limit, from the goals' reachability checks, ``goals.reach``)
  ``pipeline``  ``make_plan``: the stages in order; ``passes``: the later greedy passes and
                the exact repair; ``highs``: the HiGHS row buffer ``exact`` and ``bound_lp``
                share
  ``cli``       ``spindle-rebalance plan|generate``; also the ``spark-submit`` entry point
  ``generator`` synthetic skewed clusters (shape families) for tests and the benchmarks

What may import what (import-linter keeps it): ``input`` imports nothing of the planner;
``goals`` only ``input``; ``search`` and ``exact`` only those two, not each other;
``analysis`` above them, yet only ``goals``, ``input`` (and ``highs``): a judge that shared
the optimisers' code would share their mistakes; ``spark`` also ``search``; ``pipeline`` and
``passes`` everything; nothing outside the planner imports its insides: the operator goes
through this package's names and ``api``.

This package itself re-exports the few names other packages need (the settings, the errors,
the snapshot parser, the band arithmetic) and imports nothing heavy, so a reader of
settings (the dashboard) does not load the optimiser or Spark.
"""

from spindle.rebalance.goals.bands import band_floor
from spindle.rebalance.input.model import (
    MODES,
    STATES,
    Goals,
    PlanError,
    SnapshotError,
    parse_snapshot,
)
from spindle.rebalance.input.scope import Request

__all__ = [
    "MODES",
    "STATES",
    "Goals",
    "PlanError",
    "Request",
    "SnapshotError",
    "band_floor",
    "parse_snapshot",
]
