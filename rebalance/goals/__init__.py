"""The planner's goals, one module each, behind one interface (``base.Goal``): their bands,
their violations, how they rank a move's destination, their rows in the exact model.

  ``base``          the interface (``Goal``, ``SoftGoal``) and a placement's figures (``Placed``)
  ``capacity``      hard: no directory ends above the capacity threshold
  ``rack``          hard (unless ``rack_aware`` is off): a partition's replicas spread over racks
  ``broker_bytes``  soft: each broker's utilisation within the band around the cluster mean
                    (and ``StartLoads``, the snapshot's loads the band starts from)
  ``disk_bytes``    soft: each Active directory's within the band around its broker's mean
  ``counts``        soft: replica and leader counts per broker within their bands
  ``scoring``       how a byte move's destination is ranked, from the goals' weights

The soft goals' names are the keys the summary has always used (``goalStatus``, ``balance``,
``unmet``), so operators' tooling and pinned plans keep reading the same bytes; code loops
over ``soft_goals(settings)`` or names a goal by its class, so a typo is a NameError, not a
goal that silently never matches.
"""

from __future__ import annotations

from spindle.rebalance.goals.base import Goal, SoftGoal
from spindle.rebalance.goals.broker_bytes import BrokerBytes
from spindle.rebalance.goals.capacity import Capacity
from spindle.rebalance.goals.counts import CountGoal, LeaderCount, ReplicaCount
from spindle.rebalance.goals.disk_bytes import DiskBytes
from spindle.rebalance.goals.rack import Rack
from spindle.rebalance.input.model import Goals

#: Each broker's bytes over its capacity, within the band around the cluster mean.
BROKER_BYTES = BrokerBytes.name
#: Each Active directory's bytes over its capacity, within the band around its broker's mean.
DISK_BYTES = DiskBytes.name
#: Replicas per broker, within the band around the mean.
REPLICAS = ReplicaCount.name
#: Leaders per broker, within the band around the mean.
LEADERS = LeaderCount.name

#: In the order the summary lists them.
SOFT_GOALS = (BROKER_BYTES, DISK_BYTES, REPLICAS, LEADERS)


def soft_goals(settings: Goals) -> tuple[SoftGoal, ...]:
    """The soft goals in the order the summary lists them."""
    return (
        BrokerBytes(settings),
        DiskBytes(settings),
        ReplicaCount(settings),
        LeaderCount(settings),
    )


def hard_goals(settings: Goals) -> tuple[Goal, ...]:
    """The hard goals in the order a refusal lists their violations."""
    return (Rack(settings), Capacity(settings))


__all__ = [
    "BROKER_BYTES",
    "DISK_BYTES",
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
    "hard_goals",
    "soft_goals",
]
