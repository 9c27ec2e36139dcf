"""Offsets of the replicas led here: ListOffsets and DeleteRecords (Kafka's
``ReplicaManager.fetchOffset`` / ``Partition.fetchOffsetForTimestamp`` and
``ReplicaManager.deleteRecords``).

:func:`list_offsets` answers each partition's query -- the log start (EARLIEST), the high
watermark (LATEST), the record with the largest timestamp (MAX, KIP-734) or the first record
at or after a timestamp -- after fencing a request on another leader epoch.
:func:`delete_records` moves each partition's log start offset up (-1 = to the high
watermark); segments wholly below it are deleted by storage. Both serve only replicas this
broker leads (:meth:`.lifecycle.ReplicaLifecycle.hosted_log`) and answer per partition, so one
bad partition never fails the others; the handlers authorise and translate the wire.

Task safety: event loop only (not thread-safe); the storage calls are synchronous.
"""

from __future__ import annotations

from collections.abc import Sequence

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.protocol.constants import OffsetSpec
from spindle.broker.records.batch import first_record_at_or_after
from spindle.broker.storage import Log

from .lifecycle import ReplicaLifecycle
from .requests import DeleteRecordsPartition, ListOffsetsPartition, unexpected_error


def list_offsets(lifecycle: ReplicaLifecycle, entries: Sequence[ListOffsetsPartition]) -> None:
    """Answer each ListOffsets entry in place (see module docstring)."""
    for entry in entries:
        try:
            _list_offset(lifecycle, entry)
        except KafkaError as exc:
            entry.error = int(exc.code)
        except Exception as exc:  # a bug: answered for this partition, logged
            entry.error = unexpected_error(exc)[0]


def _list_offset(lifecycle: ReplicaLifecycle, entry: ListOffsetsPartition) -> None:
    tp = entry.tp
    lifecycle.check_leader_epoch(tp, entry.current_leader_epoch)
    partition_log = lifecycle.hosted_log(tp)
    leader_epoch = lifecycle.leader_epoch_of(tp)
    if entry.timestamp == OffsetSpec.EARLIEST_TIMESTAMP:
        offset = partition_log.log_start_offset
    elif entry.timestamp == OffsetSpec.LATEST_TIMESTAMP:
        offset = partition_log.high_watermark
    elif entry.timestamp == OffsetSpec.MAX_TIMESTAMP:
        offset, entry.found_timestamp = _max_timestamp(partition_log)
    else:
        found = partition_log.offset_for_timestamp(entry.timestamp)
        offset = -1  # Kafka's answer when no record is that new: offset -1, timestamp -1
        if found is not None:
            offset, entry.found_timestamp = found  # the found record's, as Kafka answers
    entry.offset, entry.leader_epoch = offset, leader_epoch


def _max_timestamp(partition_log: Log) -> tuple[int, int]:
    """KIP-734: (offset, timestamp) of the record with the largest timestamp, the first such
    record if several share it; (-1, -1) for an empty log. The time index names its batch;
    the batch's records give the exact offset."""
    found = partition_log.max_timestamp_batch()
    if found is None:
        return -1, -1
    timestamp, last_offset = found
    data = partition_log.read(max(last_offset, partition_log.log_start_offset), 1).records
    if len(data) >= 12:
        # The first batch of the read: its length field (bytes 8-12) plus offset and length.
        first = memoryview(data)[: int.from_bytes(data[8:12], "big") + 12]
        record = first_record_at_or_after(first, timestamp, 0)  # none is newer: the first max
        if record is not None:
            return record
    return last_offset, timestamp


def delete_records(lifecycle: ReplicaLifecycle, entries: Sequence[DeleteRecordsPartition]) -> None:
    """Answer each DeleteRecords entry in place (see module docstring): OFFSET_OUT_OF_RANGE
    for a negative offset other than -1 (storage refuses one beyond the high watermark)."""
    for entry in entries:
        try:
            partition_log = lifecycle.hosted_log(entry.tp)
            target = partition_log.high_watermark if entry.offset == -1 else entry.offset
            if target < 0:
                raise KafkaError(
                    f"offset {entry.offset} is not valid", ErrorCode.OFFSET_OUT_OF_RANGE
                )
            partition_log.advance_log_start_offset(target)
            entry.low_watermark = partition_log.log_start_offset
        except KafkaError as exc:
            entry.error = int(exc.code)
        except Exception as exc:  # a bug: answered for this partition, logged
            entry.error = unexpected_error(exc)[0]
