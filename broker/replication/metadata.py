"""The cluster metadata as replication reads it: protocols the controller's ``MetadataStore``,
``TopicState``/``PartitionState`` and ``Controller`` fit, so this package never imports the
controller (a sibling layer)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from spindle.broker.common.ids import TopicPartition


class PartitionView(Protocol):
    """What replication reads of one partition's metadata."""

    @property
    def partition(self) -> int: ...
    @property
    def replicas(self) -> Sequence[int]: ...
    @property
    def directories(self) -> Sequence[str]: ...
    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def isr(self) -> Sequence[int]: ...


class TopicView(Protocol):
    """What replication reads of one topic's metadata."""

    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Mapping[int, PartitionView]: ...
    @property
    def configs(self) -> Mapping[str, str]: ...


class MetadataView(Protocol):
    """The cluster metadata as this broker last loaded it (the controller's store)."""

    @property
    def topics(self) -> Mapping[str, TopicView]: ...
    @property
    def cluster_id(self) -> str | None: ...
    @property
    def broker_configs(self) -> Mapping[str, Mapping[str, str]]: ...

    async def load(self) -> None: ...


class DirectoryAssigner(Protocol):
    """Records which directory holds a broker's replica (the controller's
    AssignReplicasToDirs)."""

    async def assign_replica_dirs(
        self, node_id: int, assignments: Mapping[TopicPartition, str]
    ) -> None: ...


def find_partition(
    metadata: MetadataView, tp: TopicPartition
) -> tuple[TopicView, PartitionView] | None:
    """The metadata of ``tp`` with its topic's, or None if the metadata has no such partition."""
    topic = metadata.topics.get(tp.topic)
    part = topic.partitions.get(tp.partition) if topic is not None else None
    return None if topic is None or part is None else (topic, part)
