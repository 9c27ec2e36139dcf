"""Where new replicas go: brokers by Kafka's striped, rack-aware placer, directories by load,
and KIP-1066's cordoned directories. Pure functions, no I/O; randomness is injected.

Broker placement follows Kafka's ``StripedReplicaPlacer`` (KRaft): racks are walked round-robin
from a random starting rack, and brokers inside a rack round-robin from a random offset, both
advancing by one per partition, so replicas spread evenly over racks first, then over brokers,
and consecutive partitions form the characteristic stripes (A0 B0 C0 / B1 C1 A1 / C2 A2 B2).
Unfenced brokers are used before fenced ones; a leader (first replica) is never fenced; once as
many partitions as unfenced brokers were placed, racks and brokers are reshuffled so the same
sets do not repeat. The replication factor may not exceed the number of usable brokers.

Directories (KIP-858/1066): a broker is usable for new replicas only if at least one of its
directories is online and not cordoned; inside a broker the least-loaded such directory is
chosen (Kafka: fewest logs); AlterReplicaLogDirs into a cordoned directory is refused with
INVALID_REPLICA_ASSIGNMENT.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from spindle.broker.common.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class UsableBroker:
    node_id: int
    rack: str | None
    fenced: bool


def usable_brokers(
    brokers: Mapping[int, tuple[str | None, Collection[str]]],
    *,
    fenced: Collection[int],
    offline_dirs: Mapping[int, Collection[str]],
    cordoned_dirs: Mapping[int, Collection[str]],
) -> list[UsableBroker]:
    """Brokers that may receive new replicas: registered (``brokers``: id -> (rack, dir ids))
    with at least one directory neither offline nor cordoned (KIP-1066)."""
    out: list[UsableBroker] = []
    for node_id, (rack, dirs) in sorted(brokers.items()):
        bad = set(offline_dirs.get(node_id, ())) | set(cordoned_dirs.get(node_id, ()))
        if dirs and all(d in bad for d in dirs):
            continue
        out.append(UsableBroker(node_id, rack, node_id in fenced))
    return out


@dataclass
class _Cycle:
    """A sorted broker list walked round-robin from an offset (Kafka's BrokerList)."""

    brokers: list[int] = field(default_factory=list)
    index: int = 0
    offset: int = 0
    epoch: int = 0

    def next(self, epoch: int) -> int | None:
        if not self.brokers:
            return None
        if self.epoch != epoch:
            self.epoch, self.index = epoch, 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return None
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


@dataclass
class _Rack:
    unfenced: _Cycle = field(default_factory=_Cycle)
    fenced: _Cycle = field(default_factory=_Cycle)

    def next(self, epoch: int) -> int | None:
        found = self.unfenced.next(epoch)
        return found if found is not None else self.fenced.next(epoch)


class _RackList:
    def __init__(self, brokers: Sequence[UsableBroker], rng: random.Random) -> None:
        self.rng = rng
        self.racks: dict[str | None, _Rack] = {}
        for b in brokers:
            rack = self.racks.setdefault(b.rack, _Rack())
            (rack.fenced if b.fenced else rack.unfenced).brokers.append(b.node_id)
        for rack in self.racks.values():
            for cycle in (rack.unfenced, rack.fenced):
                cycle.brokers.sort()
                cycle.offset = rng.randrange(len(cycle.brokers)) if cycle.brokers else 0
        # Kafka sorts rack names with "no rack" first.
        self.names = sorted(self.racks, key=lambda r: (r is not None, r or ""))
        self.total = len(brokers)
        self.unfenced = sum(not b.fenced for b in brokers)
        self.epoch = 0
        self.offset = rng.randrange(len(self.names)) if self.names else 0

    def _shuffle(self) -> None:
        self.rng.shuffle(self.names)
        for rack in self.racks.values():
            self.rng.shuffle(rack.unfenced.brokers)
            self.rng.shuffle(rack.fenced.brokers)

    def place(self, replication_factor: int) -> list[int]:
        if self.epoch == self.unfenced and self.unfenced > 1:
            self._shuffle()
            self.epoch = 0
        if self.offset == len(self.names):
            self.offset = 0
        # The leader: the first unfenced broker from the starting rack on.
        first_rack = self.offset
        while True:
            leader = self.racks[self.names[first_rack]].unfenced.next(self.epoch)
            if leader is not None:
                break
            first_rack = (first_rack + 1) % len(self.names)
        chosen = [leader]
        rack_index = self.offset
        skip: int | None = first_rack
        while len(chosen) < replication_factor:
            found: int | None = None
            while found is None:
                if rack_index == skip:
                    skip = None  # the leader's rack already gave one this round
                else:
                    found = self.racks[self.names[rack_index]].next(self.epoch)
                rack_index = (rack_index + 1) % len(self.names)
            chosen.append(found)
        self.epoch += 1
        self.offset += 1
        return chosen


def place_striped(
    num_partitions: int,
    replication_factor: int,
    brokers: Sequence[UsableBroker],
    *,
    rng: random.Random,
) -> list[list[int]]:
    """Replica lists (leader first) for ``num_partitions`` new partitions (module docstring).

    INVALID_REPLICATION_FACTOR if the factor is not positive, exceeds the usable brokers, or
    every broker is fenced.
    """
    if replication_factor <= 0:
        raise KafkaError(
            f"invalid replication factor {replication_factor}: it must be positive",
            ErrorCode.INVALID_REPLICATION_FACTOR,
        )
    if num_partitions <= 0:
        raise KafkaError(
            f"number of partitions must be at least 1, got {num_partitions}",
            ErrorCode.INVALID_PARTITIONS,
        )
    racks = _RackList(brokers, rng)
    if racks.unfenced == 0:
        raise KafkaError("all brokers are currently fenced", ErrorCode.INVALID_REPLICATION_FACTOR)
    if replication_factor > racks.total:
        raise KafkaError(
            f"the target replication factor of {replication_factor} cannot be reached because "
            f"only {racks.total} broker(s) are registered",
            ErrorCode.INVALID_REPLICATION_FACTOR,
        )
    return [racks.place(replication_factor) for _ in range(num_partitions)]


def choose_log_dir(
    replica_counts: Mapping[str, int],
    *,
    offline: Collection[str] = (),
    cordoned: Collection[str] = (),
) -> str:
    """The directory for a new replica on one broker: the one with the fewest replicas among
    those online and not cordoned (ties: the first in ``replica_counts`` order, i.e. log.dirs
    order). KAFKA_STORAGE_ERROR when none is left."""
    usable = [d for d in replica_counts if d not in offline and d not in cordoned]
    if not usable:
        raise KafkaError(
            "no log directory is online and uncordoned for a new replica",
            ErrorCode.KAFKA_STORAGE_ERROR,
        )
    return min(usable, key=lambda d: replica_counts[d])


def check_move_target(directory: str, *, cordoned: Collection[str]) -> None:
    """KIP-1066: AlterReplicaLogDirs may not move a replica into a cordoned directory."""
    if directory in cordoned:
        raise KafkaError(
            f"log directory {directory} is cordoned (cordoned.log.dirs): no new replicas",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )
