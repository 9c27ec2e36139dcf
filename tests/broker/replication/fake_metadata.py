"""The cluster metadata as a plain object a test changes, as the etcd watch would (it fits
``spindle.broker.replication.metadata``'s protocols), and a directory assigner that records
nothing: the replica manager's parts run on real storage without etcd or a controller."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spindle.broker.common.ids import TopicPartition


@dataclass
class Part:
    partition: int
    replicas: list[int]
    directories: list[str]
    leader: int
    leader_epoch: int
    isr: list[int]


@dataclass
class Topic:
    name: str
    partitions: dict[int, Part]
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class Metadata:
    topics: dict[str, Topic]
    cluster_id: str | None = "c"
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)

    async def load(self) -> None:
        return None


class Assigner:
    async def assign_replica_dirs(
        self, node_id: int, assignments: Mapping[TopicPartition, str]
    ) -> None:
        return None
