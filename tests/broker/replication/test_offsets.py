"""ListOffsets' and DeleteRecords' work on the leader replicas (``replication.offsets``), as
the handlers call it through the replica manager: every partition answered in its own entry
(one bad partition never fails the others), EARLIEST / LATEST / MAX (KIP-734) / by time with
the record's own timestamp, a request on another leader epoch fenced, DeleteRecords moving
the log start (-1 = to the high watermark) and refusing a bad offset.

Real storage (a LogManager on a temporary directory); the metadata a plain object.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from spindle.broker.common.errors import ErrorCode
from spindle.broker.common.ids import TopicPartition
from spindle.broker.protocol.constants import OffsetSpec
from spindle.broker.records.batch import build_batch
from spindle.broker.replication.replica_manager import ReplicaManager
from spindle.broker.replication.requests import (
    AppendEntry,
    DeleteRecordsPartition,
    ListOffsetsPartition,
)
from spindle.broker.storage import LogManager, StorageSettings

from .fake_metadata import Assigner, Metadata, Part, Topic

ME = 2
TP = TopicPartition("t", 0)
MISSING = TopicPartition("gone", 0)


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    settings = StorageSettings.model_validate({"log.dirs": [str(tmp_path / "d0")]})
    manager = LogManager.open(settings, cluster_id="c", node_id=ME, background=False)
    try:
        yield manager
    finally:
        manager.close()


@pytest.fixture
async def replicas(logs: LogManager) -> AsyncIterator[ReplicaManager]:
    """This broker leads t-0 alone (leader epoch 3), holding offsets 0-3: one record at
    time 100, two at 300, one at 200."""
    part = Part(0, [ME], [""], ME, 3, [ME])
    md = Metadata({"t": Topic("t", {0: part}, {})})
    manager = ReplicaManager(
        node_id=ME, logs=logs, metadata=md, assigner=Assigner(), static_configs={}
    )
    await manager.start()
    try:
        for values, ts in (([b"a"], 100), ([b"b", b"c"], 300), ([b"d"], 200)):
            batch = build_batch(values, timestamp_ms=ts, partition_leader_epoch=3)
            entry = AppendEntry(TP, batch)
            await manager.append_records([entry], 1, 1.0)
            assert entry.error == 0
        yield manager
    finally:
        await manager.close()


def _answers(entries: list[ListOffsetsPartition]) -> list[tuple[int, int, int, int]]:
    return [(e.error, e.offset, e.found_timestamp, e.leader_epoch) for e in entries]


async def test_list_offsets_answers_each_query_with_the_records_own_timestamp(
    replicas: ReplicaManager,
) -> None:
    entries = [
        ListOffsetsPartition(TP, OffsetSpec.EARLIEST_TIMESTAMP),
        ListOffsetsPartition(TP, OffsetSpec.LATEST_TIMESTAMP),
        ListOffsetsPartition(TP, OffsetSpec.MAX_TIMESTAMP),
        ListOffsetsPartition(TP, 250),  # the first record at or after 250: offset 1, at 300
        ListOffsetsPartition(TP, 301),  # none is that new
        ListOffsetsPartition(MISSING, OffsetSpec.LATEST_TIMESTAMP),
    ]
    replicas.list_offsets(entries)
    assert _answers(entries) == [
        (0, 0, -1, 3),
        (0, 4, -1, 3),
        (0, 1, 300, 3),  # KIP-734: the first record of the largest timestamp
        (0, 1, 300, 3),
        (0, -1, -1, 3),
        (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), -1, -1, -1),
    ]


async def test_list_offsets_fences_a_request_on_another_leader_epoch(
    replicas: ReplicaManager,
) -> None:
    entries = [
        ListOffsetsPartition(TP, OffsetSpec.LATEST_TIMESTAMP, current_leader_epoch=2),
        ListOffsetsPartition(TP, OffsetSpec.LATEST_TIMESTAMP, current_leader_epoch=4),
        ListOffsetsPartition(TP, OffsetSpec.LATEST_TIMESTAMP, current_leader_epoch=3),
    ]
    replicas.list_offsets(entries)
    assert [e.error for e in entries] == [
        int(ErrorCode.FENCED_LEADER_EPOCH),
        int(ErrorCode.UNKNOWN_LEADER_EPOCH),
        0,
    ]


async def test_delete_records_moves_the_log_start_and_refuses_bad_offsets(
    replicas: ReplicaManager,
) -> None:
    first = [DeleteRecordsPartition(TP, 2), DeleteRecordsPartition(MISSING, 1)]
    replicas.delete_records(first)
    assert [(e.error, e.low_watermark) for e in first] == [
        (0, 2),
        (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), -1),
    ]
    bad = [DeleteRecordsPartition(TP, 9), DeleteRecordsPartition(TP, -5)]
    replicas.delete_records(bad)
    assert [(e.error, e.low_watermark) for e in bad] == [
        (int(ErrorCode.OFFSET_OUT_OF_RANGE), -1),  # beyond the high watermark (4)
        (int(ErrorCode.OFFSET_OUT_OF_RANGE), -1),
    ]
    to_end = [DeleteRecordsPartition(TP, -1)]  # -1: up to the high watermark
    replicas.delete_records(to_end)
    assert [(e.error, e.low_watermark) for e in to_end] == [(0, 4)]
    earliest = [ListOffsetsPartition(TP, OffsetSpec.EARLIEST_TIMESTAMP)]
    replicas.list_offsets(earliest)
    assert _answers(earliest) == [(0, 4, -1, 3)]
