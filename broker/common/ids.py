"""Identifiers shared by every layer: topic-partitions."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """One partition of one topic; orders by topic, then partition (Kafka's mover order)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
