"""What the LogManager reports and decides from: DescribeLogDirs answers, move progress, and
the placement rule for new replicas. Pure data and one pure function; no I/O here."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from spindle.broker.common.errors import ErrorCode, KafkaStorageError
from spindle.broker.common.ids import TopicPartition


@dataclass(frozen=True, slots=True)
class MoveStatus:
    """Progress of one replica move between log directories."""

    tp: TopicPartition
    source: str
    destination: str
    bytes_copied: int
    bytes_total: int
    offset_lag: int


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One replica in a DescribeLogDirs answer."""

    tp: TopicPartition
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log directory in a DescribeLogDirs (v4) answer; offline → error, -1 bytes."""

    path: str
    directory_id: uuid.UUID | None
    error: ErrorCode
    total_bytes: int
    usable_bytes: int
    partitions: list[PartitionDescription] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DirLoad:
    """What the placement rule knows about one online directory."""

    path: str
    replicas: int
    usable_bytes: int


def choose_log_dir(candidates: list[DirLoad]) -> str:
    """Placement (pure): fewest replicas, then most usable bytes, then configuration order."""
    if not candidates:
        raise KafkaStorageError("no online log directory to place a replica in")
    best = min(enumerate(candidates), key=lambda ic: (ic[1].replicas, -ic[1].usable_bytes, ic[0]))
    return best[1].path
