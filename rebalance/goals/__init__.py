"""The planner's goals, one module each, behind one interface (``base.Goal``): their bands,
their violations, whether a move keeps them (``accepts``), how they rank a move's
destination, their rows in the exact model; and the registry of them all (``GOALS``).

  ``base``          the interface (``Goal``, ``SoftGoal``) and a placement's figures (``Placed``)
  ``protocol``      what goals read of the planners: the greedy's state, the exact model
  ``reach``         which bands no plan reaches: the figures each goal's ``out_of_reach`` reads
  ``bands``         the balance band ``[(2 - f) * mean, f * mean]`` every soft goal uses
  ``capacity``      hard: no directory ends above the capacity threshold
  ``rack``          hard (unless ``rack_aware`` is off): a partition's replicas spread over racks
  ``broker_bytes``  soft: each broker's utilisation within the band around the cluster mean
                    (and ``StartLoads``, the snapshot's loads the band starts from)
  ``disk_bytes``    soft: each Active directory's within the band around its broker's mean
  ``counts``        soft: replica and leader counts per broker within their bands
  ``scoring``       how a byte move's destination is ranked, from the goals' weights

Adding a goal: its module here and its class in ``GOALS``, in priority order. The planners
and the report loop over ``GOALS``: the greedy's steps run in its order, each goal naming its
own by key (``Goal.steps``; the search holds them, ``search.core.STEP_KINDS``, where a goal
with a new step registers it), the destination search asks every
soft goal's ``accepts`` (``SoftGoal.vetoes``), the count phases take their takers and
givers from every goal's ``take_room``/``give_room`` and ask a goal their hot loops do not
mirror (``search.state.MIRRORED``) through its ``accepts``, the exchanges trade over every
``CountGoal``, the exact model takes every goal's rows (``exact.mip.build``), the summary
lists every goal. Each goal says which of its brokers or directories no plan reaches (``SoftGoal.out_of_reach``,
a hard goal's ``excuses`` for the others: ``reach``), so the greedy, the exact repair and the
summary ask ``unachievable`` over ``GOALS``.

May import ``input`` only: the goals see the planners through ``protocol``, never their
modules (the planners depend on the goals, not the reverse).

The soft goals' names are the keys the summary has always used (``goalStatus``, ``balance``,
``unmet``), so operators' tooling and pinned plans keep reading the same bytes; code loops
over ``soft_goals(settings)`` or names a goal by its class, so a typo is a NameError, not a
goal that silently never matches.
"""

from __future__ import annotations

from typing import Any

from spindle.rebalance.goals import reach
from spindle.rebalance.goals.base import Goal, SoftGoal
from spindle.rebalance.goals.broker_bytes import BrokerBytes
from spindle.rebalance.goals.capacity import Capacity
from spindle.rebalance.goals.counts import CountGoal, LeaderCount, ReplicaCount
from spindle.rebalance.goals.disk_bytes import DiskBytes
from spindle.rebalance.goals.rack import Rack
from spindle.rebalance.input.model import Cluster, Goals
from spindle.rebalance.input.scope import Scope

#: Each broker's bytes over its capacity, within the band around the cluster mean.
BROKER_BYTES = BrokerBytes.name
#: Each Active directory's bytes over its capacity, within the band around its broker's mean.
DISK_BYTES = DiskBytes.name
#: Replicas per broker, within the band around the mean.
REPLICAS = ReplicaCount.name
#: Leaders per broker, within the band around the mean.
LEADERS = LeaderCount.name

#: Every goal, in priority order: the hard goals (in the order a refusal lists their
#: violations), then the soft goals (in the order the summary lists them). The planners,
#: the report and the reachability check loop over this; adding a goal is its module and
#: its class here.
GOALS: tuple[type[Goal], ...] = (Rack, Capacity, BrokerBytes, DiskBytes, ReplicaCount, LeaderCount)

#: In the order the summary lists them.
SOFT_GOALS = tuple(g.name for g in GOALS if not g.hard)


def all_goals(settings: Goals) -> tuple[Goal, ...]:
    """Every goal (``GOALS``), in priority order."""
    return tuple(cls(settings) for cls in GOALS)


def soft_goals(settings: Goals) -> tuple[SoftGoal, ...]:
    """The soft goals in the order the summary lists them."""
    return tuple(g for g in all_goals(settings) if isinstance(g, SoftGoal))


def hard_goals(settings: Goals) -> tuple[Goal, ...]:
    """The hard goals in the order a refusal lists their violations."""
    return tuple(g for g in all_goals(settings) if g.hard)


def unachievable(cluster: Cluster, scope: Scope, settings: Goals) -> dict[str, dict[Any, str]]:
    """Per soft goal, the brokers (or directories, for a goal on directories) whose band no
    plan obeying the hard rules reaches, with why: each goal's own check, over ``GOALS``
    (``reach.unachievable``)."""
    return reach.unachievable(cluster, scope, settings, all_goals(settings))


__all__ = [
    "BROKER_BYTES",
    "DISK_BYTES",
    "GOALS",
    "LEADERS",
    "REPLICAS",
    "SOFT_GOALS",
    "BrokerBytes",
    "Capacity",
    "CountGoal",
    "DiskBytes",
    "Goal",
    "LeaderCount",
    "Rack",
    "ReplicaCount",
    "SoftGoal",
    "all_goals",
    "hard_goals",
    "soft_goals",
    "unachievable",
]
