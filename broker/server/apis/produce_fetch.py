"""Data APIs: Produce, Fetch (long poll, zero-copy record sets), ListOffsets and DeleteRecords.

The handlers only translate: the wire message becomes the replica manager's entries
(:mod:`spindle.broker.replication.requests`), one ``append_records``, ``fetch_records``,
``list_offsets`` or ``delete_records`` call serves it -- checks, appends, reads, throttles and waits all live there -- and the filled
entries become the answer. What stays here is what belongs to the wire: authorisation per
topic, Kafka's default ``fetch.max.bytes``, and sending large record sets from the file
(``sendfile``, :mod:`..zerocopy`).

The log manager's calls are synchronous (page-cache writes and reads); they run on the event
loop thread, which keeps the per-connection request order trivially and avoids a thread hop
per request. Moves and other long disk work run on the storage engine's own threads.
"""

from __future__ import annotations

from typing import Any

from spindle.broker.common.ids import TopicPartition
from spindle.broker.protocol.apis import ApiKey, Request
from spindle.broker.replication.requests import (
    AppendEntry,
    DeleteRecordsPartition,
    FetchParams,
    FetchPartition,
    ListOffsetsPartition,
)

from ..security.authorizer import Operation, RequestContext, ResourceType
from ..zerocopy import FileRegion
from .base import ApiContext, Handlers, authorization_failed, not_authorized

SENDFILE_MIN_BYTES = 65536
"""Record sets at least this large are sent from the segment file (see ``zerocopy``); smaller
ones are copied, which is cheaper than a descriptor and a ``sendfile`` call."""
DEFAULT_FETCH_MAX_BYTES = 52428800
"""``fetch.max.bytes`` when a request sets no positive limit (Kafka's default, 50 MiB)."""


def _produce_refused(topic: str, index: int) -> dict[str, Any]:
    """The answer for a partition of a topic the client may not write to."""
    exc = not_authorized(Operation.WRITE, ResourceType.TOPIC, f"{topic}-{index}")
    return {
        "index": index,
        "error_code": int(exc.code),
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": str(exc),
    }


async def produce(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any] | None:
    """Produce: the batches of the topics the client may write to go to the replica manager
    (:meth:`~spindle.broker.replication.replica_manager.ReplicaManager.append_records`, which
    checks acks, min.insync.replicas, producer state, and waits for acks=all); the others are
    answered TOPIC_AUTHORIZATION_FAILED. acks=0 gets no answer."""
    body = req.body
    acks = body.acks
    entries: list[AppendEntry] = []
    topics: list[tuple[Any, list[AppendEntry] | None]] = []
    for td in body.topic_data:
        if broker.allowed(ctx, Operation.WRITE, ResourceType.TOPIC, td.name):
            name = td.name
            parts = [
                AppendEntry(TopicPartition(name, pd.index), pd.records) for pd in td.partition_data
            ]
            entries += parts
            topics.append((td, parts))
        else:
            topics.append((td, None))
    throttle = 0
    if entries:
        await broker.replicas.append_records(entries, acks, max(body.timeout_ms, 0) / 1000)
        if broker.client_quotas.active:
            nbytes = sum(len(e.records) for e in entries if e.error == 0 and e.records)
            throttle = broker.client_quotas.record_produce(ctx, nbytes)
    if acks == 0:
        return None
    responses = []
    for td, appended in topics:
        if appended is None:
            answers = [_produce_refused(td.name, pd.index) for pd in td.partition_data]
        else:
            answers = [
                {
                    "index": e.tp.partition,
                    "error_code": e.error,
                    "base_offset": e.base_offset,
                    "log_append_time_ms": -1,
                    "log_start_offset": e.log_start_offset,
                    "record_errors": [],
                    "error_message": e.message,
                }
                for e in appended
            ]
        responses.append({"name": td.name, "partition_responses": answers})
    return {"responses": responses, "throttle_time_ms": throttle}


async def fetch(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    """Fetch: the partitions of the topics the client may read go to the replica manager
    (:meth:`~spindle.broker.replication.replica_manager.ReplicaManager.fetch_records`: reads,
    follower positions, leader throttles, the long poll); the others are answered
    TOPIC_AUTHORIZATION_FAILED. Record sets of at least ``SENDFILE_MIN_BYTES`` come back as
    file ranges and are sent from the file (:class:`~..zerocopy.FileRegion`)."""
    body = req.body
    partitions: list[FetchPartition] = []
    refused = False
    allowed: list[bool] = []
    replica_id = getattr(body, "replica_id", -1)
    # a follower needs ClusterAction on the cluster for everything; a consumer Read per topic
    follower_ok = replica_id >= 0 and broker.allowed_on_cluster(ctx, Operation.CLUSTER_ACTION)
    for t in body.topics:
        ok = follower_ok or (
            replica_id < 0 and broker.allowed(ctx, Operation.READ, ResourceType.TOPIC, t.topic)
        )
        allowed.append(ok)
        if not ok:
            refused = True
            continue
        name = t.topic
        for p in t.partitions:
            partitions.append(
                FetchPartition(
                    TopicPartition(name, p.partition),
                    p.fetch_offset,
                    p.partition_max_bytes,
                    getattr(p, "current_leader_epoch", -1),  # v9+
                    getattr(p, "last_fetched_epoch", -1),  # v12+
                )
            )
    has_limit = body.max_bytes is not None and body.max_bytes > 0
    max_bytes = body.max_bytes if has_limit else DEFAULT_FETCH_MAX_BYTES
    cap = (
        broker.client_quotas.fetch_cap(ctx)
        if replica_id < 0 and broker.client_quotas.active
        else None
    )
    if cap is not None:
        max_bytes = min(max_bytes, cap)
    params = FetchParams(
        replica_id=replica_id,
        # A refused partition is an error, and an error answers at once.
        max_wait_ms=0 if refused else body.max_wait_ms,
        min_bytes=max(body.min_bytes, 0),
        max_bytes=max_bytes,
        partitions=partitions,
        file_range_min_bytes=SENDFILE_MIN_BYTES,
    )
    await broker.replicas.fetch_records(params)
    throttle = _fetch_throttle(broker, ctx, replica_id, partitions)
    if throttle > 0:
        # over its quota: answered empty, as Kafka does (the bytes were not counted)
        return {"throttle_time_ms": throttle, "error_code": 0, "session_id": 0, "responses": []}
    responses = []
    read = iter(partitions)
    for t, ok in zip(body.topics, allowed, strict=True):
        if not ok:
            answers = [_fetch_refused(p.partition) for p in t.partitions]
            responses.append({"topic": t.topic, "partitions": answers})
            continue
        answers = []
        for _ in t.partitions:
            fp = next(read)
            out: dict[str, Any] = {
                "partition_index": fp.tp.partition,
                "error_code": fp.error,
                "high_watermark": fp.high_watermark,
                "last_stable_offset": fp.high_watermark,  # no transactions: LSO = HW
                "log_start_offset": fp.log_start_offset,
                "aborted_transactions": None,
                "preferred_read_replica": -1,
                "records": fp.records if fp.file is None else FileRegion(fp.file),
            }
            if fp.diverging is not None:
                out["diverging_epoch"] = {"epoch": fp.diverging[0], "end_offset": fp.diverging[1]}
            answers.append(out)
        responses.append({"topic": t.topic, "partitions": answers})
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": responses,
    }


def _fetch_throttle(
    broker: ApiContext, ctx: RequestContext, replica_id: int, partitions: list[FetchPartition]
) -> int:
    """A consumer's throttle time for the bytes read (followers have no client quota); the
    file ranges of a throttled answer are closed here, as it sends none of them."""
    if replica_id >= 0 or not broker.client_quotas.active:
        return 0
    nbytes = sum(fp.file.length if fp.file is not None else len(fp.records) for fp in partitions)
    throttle = broker.client_quotas.record_fetch(ctx, nbytes)
    if throttle > 0:
        for fp in partitions:
            if fp.file is not None:
                fp.file.close()
    return throttle


def _fetch_refused(partition: int) -> dict[str, Any]:
    """The answer for a partition of a topic the client may not read."""
    return {
        "partition_index": partition,
        "error_code": int(authorization_failed(ResourceType.TOPIC)),
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }


async def list_offsets(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    """ListOffsets: the partitions of the topics the client may describe go to the replica
    manager (:meth:`~spindle.broker.replication.replica_manager.ReplicaManager.list_offsets`);
    the others are answered TOPIC_AUTHORIZATION_FAILED."""
    topics = []
    for t in req.body.topics:
        if not broker.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, t.name):
            refused = int(authorization_failed(ResourceType.TOPIC))
            entries = [
                ListOffsetsPartition(TopicPartition(t.name, p.partition_index), -1)
                for p in t.partitions
            ]
            for e in entries:
                e.error = refused
        else:
            entries = [
                ListOffsetsPartition(
                    TopicPartition(t.name, p.partition_index),
                    p.timestamp,
                    getattr(p, "current_leader_epoch", -1),  # v4+
                )
                for p in t.partitions
            ]
            broker.replicas.list_offsets(entries)
        parts = [
            {
                "partition_index": e.tp.partition,
                "error_code": e.error,
                "timestamp": e.found_timestamp,
                "offset": e.offset,
                "leader_epoch": e.leader_epoch,
            }
            for e in entries
        ]
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


async def delete_records(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    """DeleteRecords: the partitions of the topics the client may delete from go to the
    replica manager (:meth:`~spindle.broker.replication.replica_manager.ReplicaManager.delete_records`:
    each log start offset moves up, -1 = to the high watermark); the others are answered
    TOPIC_AUTHORIZATION_FAILED."""
    topics = []
    for t in req.body.topics:
        entries = [
            DeleteRecordsPartition(TopicPartition(t.name, p.partition_index), p.offset)
            for p in t.partitions
        ]
        if broker.allowed(ctx, Operation.DELETE, ResourceType.TOPIC, t.name):
            broker.replicas.delete_records(entries)
        else:
            for e in entries:
                e.error = int(authorization_failed(ResourceType.TOPIC))
        parts = [
            {
                "partition_index": e.tp.partition,
                "low_watermark": e.low_watermark,
                "error_code": e.error,
            }
            for e in entries
        ]
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


HANDLERS: Handlers = {
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.DELETE_RECORDS: delete_records,
}
