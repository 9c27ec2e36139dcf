"""The data path's requests and answers, as the replica manager takes and fills them (Kafka's
``appendRecords`` entries and ``PartitionResponse``, ``FetchParams`` and ``FetchPartitionData``).

The request handlers translate wire messages into these and back; nothing here knows the wire.
Each entry carries its partition's request and, once served, its answer, so one object per
partition is made per request and a long poll's later rounds make none: the produce and fetch
paths are per-request hot paths (several per megabyte moved).

Pure data (and the one rule for answering an error that is not a KafkaError); no I/O here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from spindle.broker.common.errors import ErrorCode
from spindle.broker.common.ids import TopicPartition
from spindle.broker.storage import FileRange

from .leader_epochs import NO_EPOCH, EpochEnd

log = logging.getLogger(__name__)

RecordsView = bytes | bytearray | memoryview
"""Record batches as a request carries them (a produce request's are views of its frame)."""


@dataclass(slots=True)
class AppendEntry:
    """One partition of a produce: its records, then its answer (``error`` a Kafka code, 0 if
    appended; ``base_offset``/``log_start_offset`` -1 unless known)."""

    tp: TopicPartition
    records: RecordsView | None
    error: int = 0
    message: str | None = None
    base_offset: int = -1
    log_start_offset: int = -1


@dataclass(slots=True)
class FetchPartition:
    """One partition of a fetch (Kafka's ``FetchRequest.PartitionData``), then its answer.

    The answer fields are written by every read round: ``error`` (a Kafka code, 0 if read),
    the leader's ``high_watermark`` and ``log_start_offset`` (-1 when unknown), the records
    either copied (``records``) or left in the segment file (``file``: a range the receiver
    owns and must close), or ``diverging`` -- the epoch and end offset a follower's log
    parts from this one at, answered instead of records. The last stable offset is the high
    watermark (no transactions yet).
    """

    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH
    error: int = 0
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    file: FileRange | None = None
    diverging: EpochEnd | None = None


@dataclass(slots=True)
class FetchParams:
    """One fetch (Kafka's ``FetchParams``): who asks (``replica_id`` >= 0 for a follower, -1
    for a consumer), how long it may wait for how many bytes, the most bytes of the whole
    answer (positive), and from what size record sets are left in the file as ranges (None:
    always copied)."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: list[FetchPartition]
    file_range_min_bytes: int | None = None


@dataclass(slots=True)
class ListOffsetsPartition:
    """One partition of a ListOffsets (Kafka's ``ListOffsetsPartition``), then its answer:
    ``error`` (a Kafka code, 0 if found), the ``offset`` and its record's ``found_timestamp``
    (-1 when none is that new, or for EARLIEST/LATEST), the current ``leader_epoch``."""

    tp: TopicPartition
    timestamp: int
    """The query: a timestamp in ms, or an ``OffsetSpec`` (-2 earliest, -1 latest, -3 max)."""
    current_leader_epoch: int = NO_EPOCH
    error: int = 0
    offset: int = -1
    found_timestamp: int = -1
    leader_epoch: int = -1


@dataclass(slots=True)
class DeleteRecordsPartition:
    """One partition of a DeleteRecords: the new log start ``offset`` (-1 = the high
    watermark), then its answer: ``error`` (0 if moved) and the ``low_watermark`` (the log
    start offset after it; -1 on error)."""

    tp: TopicPartition
    offset: int
    error: int = 0
    low_watermark: int = -1


def unexpected_error(exc: BaseException) -> tuple[int, str]:
    """UNKNOWN_SERVER_ERROR and a message for an error that is not a KafkaError (a bug),
    logged with its traceback; the other partitions of the request are still served."""
    log.exception("unexpected error on the data path")
    return int(ErrorCode.UNKNOWN_SERVER_ERROR), f"{type(exc).__name__}: {exc}"
