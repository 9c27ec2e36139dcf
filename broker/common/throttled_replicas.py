"""The value of Kafka's topic configs ``leader.replication.throttled.replicas`` and
``follower.replication.throttled.replicas``: which replicas of a topic the replication
throttles apply to. Pure; shared by the controller (validation) and replication (enforcement).

Format (Kafka's ``ThrottledReplicaListValidator``)::

    *                          every replica of the topic
    0:101,0:102,1:101          partition:broker pairs, comma-separated, blanks allowed

``kafka-reassign-partitions --execute --throttle`` writes the leader list with the current
replicas of each moving partition and the follower list with its adding replicas; a broker
throttles a partition when an entry names that partition and the broker itself.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


@dataclass(frozen=True)
class ThrottledReplicas:
    """A parsed list: ``every`` (``*``) or the (partition, broker) pairs named."""

    every: bool
    pairs: frozenset[tuple[int, int]]

    def covers(self, partition: int, broker: int) -> bool:
        return self.every or (partition, broker) in self.pairs


NONE = ThrottledReplicas(False, frozenset())


@functools.lru_cache(maxsize=4096)
def parse_throttled_replicas(value: str) -> ThrottledReplicas:
    """Parse a config value; ``ValueError`` naming the first bad entry."""
    text = value.strip()
    if text == "*":
        return ThrottledReplicas(True, frozenset())
    pairs: set[tuple[int, int]] = set()
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        partition, sep, broker = entry.partition(":")
        try:
            if not sep:
                raise ValueError(entry)
            pair = int(partition.strip()), int(broker.strip())
        except ValueError:
            raise ValueError(
                f"{entry!r} is not partition:broker (the value must be '*' or a "
                "comma-separated list of partition:broker pairs, e.g. 0:101,1:102)"
            ) from None
        if pair[0] < 0 or pair[1] < 0:
            raise ValueError(f"{entry!r}: partition and broker must not be negative")
        pairs.add(pair)
    return ThrottledReplicas(False, frozenset(pairs))
