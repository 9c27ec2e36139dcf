"""Where the coordinator's records live: partitions of ``__consumer_offsets``.

:class:`OffsetsLog` is what the coordinator needs (append records to a partition, read a
partition back when loading it). :class:`PartitionLogs` implements it over two callables the
server hands in: the leader's append path (the replica manager's, so the high watermark follows
the ISR like any produce and storage's failure channel sees every write) and the local
partition log to read back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from spindle.broker.common.clock import Clock
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.records.batch import iter_batches
from spindle.broker.storage import Log

from .records import build_records_batch, iter_records

OFFSETS_TOPIC = "__consumer_offsets"
READ_CHUNK_BYTES = 4 << 20

Record = tuple[bytes, bytes | None]


class OffsetsLog(Protocol):
    def append(self, partition: int, records: list[Record]) -> None:
        """Append records (one batch) durably enough to acknowledge; KafkaError if not."""
        ...

    def read_all(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        """Every (key, value) of the partition, oldest first (blocking: run in a thread)."""
        ...


class PartitionLogs:
    """:class:`OffsetsLog` over this broker's replicas of ``__consumer_offsets``."""

    def __init__(
        self,
        log_for: Callable[[int], Log],
        append: Callable[[int, bytes], object],
        *,
        clock: Clock,
    ) -> None:
        self._log_for = log_for
        self._append = append
        self._clock = clock

    def append(self, partition: int, records: list[Record]) -> None:
        self._append(partition, build_records_batch(records, timestamp_ms=self._clock.wall_ms()))

    def read_all(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        log = self._log_for(partition)
        out: list[tuple[bytes | None, bytes | None]] = []
        offset = log.log_start_offset
        end = log.log_end_offset
        while offset < end:
            chunk = log.read(offset, READ_CHUNK_BYTES)
            if not chunk.records:
                break
            last = offset
            for header in iter_batches(chunk.records, check_crc=False):
                last = header.next_offset
            out += [(k, v) for _, k, v in iter_records(chunk.records)]
            offset = max(last, offset + 1)
        return out


def store_error(exc: BaseException, *, for_commit: bool) -> ErrorCode:
    """The error a client gets when writing to ``__consumer_offsets`` failed (Kafka's
    ``GroupMetadataManager`` mapping: the client retries or finds the new coordinator)."""
    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code is ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return ErrorCode.NOT_COORDINATOR
    if code in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return (
            ErrorCode.INVALID_COMMIT_OFFSET_SIZE if for_commit else ErrorCode.UNKNOWN_SERVER_ERROR
        )
    return ErrorCode.UNKNOWN_SERVER_ERROR
