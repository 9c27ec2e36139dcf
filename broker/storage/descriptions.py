"""What the LogManager reports and decides from: DescribeLogDirs answers, move progress, and
the placement rule for new replicas. Pure data and pure functions; no I/O here."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spindle.broker.common.errors import ErrorCode, KafkaStorageError
from spindle.broker.common.ids import TopicPartition

if TYPE_CHECKING:
    from spindle.broker.storage.log import Log


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


def describe_replicas(
    replicas: Sequence[tuple[Log, bool]],
    lives: Mapping[TopicPartition, Log],
    topics: Collection[TopicPartition] | None,
    copying: Mapping[TopicPartition, int] | None = None,
) -> list[PartitionDescription]:
    """DescribeLogDirs' replicas of one directory: ``replicas`` are (log, is_future) pairs in
    it, ``lives`` every live replica (a future's lag is behind its live log; a live one's
    behind the high watermark), ``topics`` the selection (None = all), ``copying`` the bytes
    a running move has put in each future replica's files so far (the future log counts a
    segment only once it is whole: without this a move's size jumps to the total at its end,
    where Kafka's DescribeLogDirs shows the future replica growing while it copies)."""
    parts = []
    for lg, is_future in replicas:
        if topics is not None and lg.tp not in topics:
            continue
        leo = lg.log_end_offset
        size = lg.size
        if is_future:
            live = lives.get(lg.tp)
            lag = max((live.log_end_offset if live else leo) - leo, 0)
            size = max(size, (copying or {}).get(lg.tp, 0))
        else:
            lag = max(lg.high_watermark - leo, 0)
        parts.append(PartitionDescription(lg.tp, size, lag, is_future))
    parts.sort(key=lambda p: (p.tp, p.is_future))
    return parts
