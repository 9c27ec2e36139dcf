"""The replica manager's two request paths, as the Produce and Fetch handlers call them:
``append_records(entries, acks, timeout)`` answers every partition in its own entry (one bad
partition never fails the others), acks=all is refused before writing while the ISR is short
and fails after writing when it shrank meanwhile, or when the wait times out; ``fetch_records``
long-polls until an append brings data, answers an error at once, and leaves large record sets
in the file.

Real storage (a LogManager on a temporary directory), the metadata a plain object the test
changes as the etcd watch would, real time with short waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from spindle.broker.common.errors import ErrorCode
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch
from spindle.broker.replication.replica_manager import ReplicaManager
from spindle.broker.replication.requests import AppendEntry, FetchParams, FetchPartition
from spindle.broker.storage import LogManager, StorageSettings

from .fake_metadata import Assigner, Metadata, Part, Topic

ME, OTHER = 2, 1
TP = TopicPartition("t", 0)


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    settings = StorageSettings.model_validate({"log.dirs": [str(tmp_path / "d0")]})
    manager = LogManager.open(settings, cluster_id="c", node_id=ME, background=False)
    try:
        yield manager
    finally:
        manager.close()


def _metadata(*, isr: list[int], min_isr: int = 1, replicas: list[int] | None = None) -> Metadata:
    replicas = replicas or [ME, OTHER]
    part = Part(0, replicas, [""] * len(replicas), ME, 0, isr)
    return Metadata({"t": Topic("t", {0: part}, {"min.insync.replicas": str(min_isr)})})


@pytest.fixture
async def alone(logs: LogManager) -> AsyncIterator[tuple[ReplicaManager, Metadata]]:
    """This broker the partition's only replica and leader."""
    md = _metadata(isr=[ME], replicas=[ME])
    replicas = ReplicaManager(
        node_id=ME, logs=logs, metadata=md, assigner=Assigner(), static_configs={}
    )
    await replicas.start()
    try:
        yield replicas, md
    finally:
        await replicas.close()


@pytest.fixture
async def with_follower(logs: LogManager) -> AsyncIterator[tuple[ReplicaManager, Metadata]]:
    """This broker leads; a follower (never fetching) is in the ISR; min.insync.replicas=2."""
    md = _metadata(isr=[ME, OTHER], min_isr=2)
    replicas = ReplicaManager(
        node_id=ME, logs=logs, metadata=md, assigner=Assigner(), static_configs={}
    )
    await replicas.start()
    try:
        yield replicas, md
    finally:
        await replicas.close()


def _batch(value: bytes = b"v") -> bytes:
    """One record, as the leader stores it (stamped with its leader epoch, 0)."""
    return build_batch([value], partition_leader_epoch=0)


def _fetch(*partitions: FetchPartition, max_wait_ms: int = 0, min_bytes: int = 1) -> FetchParams:
    return FetchParams(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        partitions=list(partitions),
    )


async def test_each_partition_of_a_produce_gets_its_own_answer(
    alone: tuple[ReplicaManager, Metadata],
) -> None:
    replicas, _ = alone
    entries = [
        AppendEntry(TP, _batch(b"a")),
        AppendEntry(TopicPartition("t", 7), _batch(b"b")),  # no such partition
        AppendEntry(TP, None),  # no records
        AppendEntry(TP, _batch(b"c")),
    ]
    await replicas.append_records(entries, 1, 1.0)
    assert [(e.error, e.base_offset) for e in entries] == [
        (0, 0),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        (ErrorCode.CORRUPT_MESSAGE, -1),
        (0, 1),
    ]
    assert entries[1].message == "unknown partition t-7"


async def test_invalid_acks_refuse_every_partition_and_write_nothing(
    alone: tuple[ReplicaManager, Metadata], logs: LogManager
) -> None:
    replicas, _ = alone
    entries = [AppendEntry(TP, _batch()), AppendEntry(TP, _batch())]
    await replicas.append_records(entries, 2, 1.0)
    assert [e.error for e in entries] == [ErrorCode.INVALID_REQUIRED_ACKS] * 2
    found = logs.get_log(TP)
    assert found is not None
    assert found.log_end_offset == 0


async def test_acks_all_with_a_short_isr_is_refused_before_anything_is_written(
    with_follower: tuple[ReplicaManager, Metadata], logs: LogManager
) -> None:
    replicas, md = with_follower
    md.topics["t"].partitions[0].isr = [ME]
    entry = AppendEntry(TP, _batch())
    await replicas.append_records([entry], -1, 1.0)
    assert entry.error == ErrorCode.NOT_ENOUGH_REPLICAS
    found = logs.get_log(TP)
    assert found is not None
    assert found.log_end_offset == 0
    # acks=1 does not ask for the ISR.
    await replicas.append_records([acked := AppendEntry(TP, _batch())], 1, 1.0)
    assert (acked.error, acked.base_offset) == (0, 0)


async def test_acks_all_committed_by_a_shrunk_isr_is_not_enough_replicas_after_append(
    with_follower: tuple[ReplicaManager, Metadata],
) -> None:
    replicas, md = with_follower
    entry = AppendEntry(TP, _batch())
    produce = asyncio.create_task(replicas.append_records([entry], -1, 30.0))
    await asyncio.sleep(0.05)
    assert not produce.done()  # the follower has not fetched it
    md.topics["t"].partitions[0].isr = [ME]  # the follower leaves the ISR
    await replicas.apply_metadata({"t"})  # the high watermark moves to the leader's end
    await asyncio.wait_for(produce, 10)
    assert (entry.error, entry.base_offset) == (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 0)


async def test_acks_all_that_the_followers_never_fetch_times_out(
    with_follower: tuple[ReplicaManager, Metadata],
) -> None:
    replicas, _ = with_follower
    entry = AppendEntry(TP, _batch())
    started = time.monotonic()
    await replicas.append_records([entry], -1, 0.2)
    assert 0.15 < time.monotonic() - started < 5
    assert (entry.error, entry.base_offset) == (ErrorCode.REQUEST_TIMED_OUT, 0)


async def test_acks_all_is_answered_once_the_follower_has_fetched_the_records(
    with_follower: tuple[ReplicaManager, Metadata],
) -> None:
    replicas, _ = with_follower
    entry = AppendEntry(TP, _batch())
    produce = asyncio.create_task(replicas.append_records([entry], -1, 30.0))
    await asyncio.sleep(0.05)
    assert not produce.done()
    follower = FetchParams(
        replica_id=OTHER,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        partitions=[FetchPartition(TP, 1, 1 << 20)],  # it has offset 0: it asks from 1
    )
    await replicas.fetch_records(follower)
    await asyncio.wait_for(produce, 10)
    assert (entry.error, entry.base_offset) == (0, 0)


async def test_a_long_poll_is_answered_by_the_next_append(
    alone: tuple[ReplicaManager, Metadata],
) -> None:
    replicas, _ = alone
    fp = FetchPartition(TP, 0, 1 << 20)
    fetch = asyncio.create_task(replicas.fetch_records(_fetch(fp, max_wait_ms=30_000)))
    await asyncio.sleep(0.05)
    assert not fetch.done()
    await replicas.append_records([AppendEntry(TP, _batch(b"news"))], 1, 1.0)
    await asyncio.wait_for(fetch, 10)
    assert (fp.error, fp.high_watermark, fp.log_start_offset) == (0, 1, 0)
    assert fp.records == _batch(b"news")


async def test_a_long_poll_without_data_ends_at_its_max_wait_empty(
    alone: tuple[ReplicaManager, Metadata],
) -> None:
    replicas, _ = alone
    fp = FetchPartition(TP, 0, 1 << 20)
    started = time.monotonic()
    await replicas.fetch_records(_fetch(fp, max_wait_ms=200))
    assert 0.15 < time.monotonic() - started < 5
    assert (fp.error, fp.records, fp.high_watermark) == (0, b"", 0)


async def test_an_error_ends_the_long_poll_at_once(
    alone: tuple[ReplicaManager, Metadata],
) -> None:
    replicas, _ = alone
    fenced = FetchPartition(TP, 0, 1 << 20, current_leader_epoch=5)  # this broker's is 0
    unknown = FetchPartition(TopicPartition("gone", 0), 0, 1 << 20)
    started = time.monotonic()
    await replicas.fetch_records(_fetch(fenced, unknown, max_wait_ms=30_000))
    assert time.monotonic() - started < 5
    assert fenced.error == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert unknown.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_an_offset_beyond_the_log_is_out_of_range_with_the_leaders_log_start(
    alone: tuple[ReplicaManager, Metadata],
) -> None:
    replicas, _ = alone
    await replicas.append_records([AppendEntry(TP, _batch())], 1, 1.0)
    fp = FetchPartition(TP, 5, 1 << 20)
    await replicas.fetch_records(_fetch(fp, max_wait_ms=30_000))
    assert (fp.error, fp.log_start_offset, fp.high_watermark) == (
        ErrorCode.OFFSET_OUT_OF_RANGE,
        0,
        -1,
    )


async def test_large_record_sets_come_back_as_file_ranges_the_caller_owns(
    alone: tuple[ReplicaManager, Metadata],
) -> None:
    replicas, _ = alone
    batch = _batch(b"x" * 10_000)
    await replicas.append_records([AppendEntry(TP, batch)], 1, 1.0)
    fp = FetchPartition(TP, 0, 1 << 20)
    params = _fetch(fp)
    params.file_range_min_bytes = 4096
    await replicas.fetch_records(params)
    assert fp.records == b""
    assert fp.file is not None
    try:
        assert fp.file.read() == batch
    finally:
        fp.file.close()


async def test_a_wait_for_a_metadata_revision_ends_when_the_watch_has_applied_it(
    alone: tuple[ReplicaManager, Metadata],
) -> None:
    """What a handler waits for after a controller write: the revision marked applied by the
    broker's metadata listener, or its timeout."""
    replicas, _ = alone
    replicas.mark_applied(5)
    assert await replicas.wait_applied(5, 0)
    waiting = asyncio.create_task(replicas.wait_applied(7, 30))
    await asyncio.sleep(0.02)
    replicas.mark_applied(6)
    await asyncio.sleep(0.02)
    assert not waiting.done()
    replicas.mark_applied(8)
    assert await asyncio.wait_for(waiting, 10)
    assert not await replicas.wait_applied(9, 0.05)
    replicas.mark_applied(3)  # an older revision never moves it back
    assert replicas.applied_revision == 8
