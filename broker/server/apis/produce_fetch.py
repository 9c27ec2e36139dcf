"""Data APIs: Produce, Fetch (long poll, zero-copy record sets), ListOffsets and DeleteRecords.

The log manager's calls are synchronous (page-cache writes and reads); they run on the event
loop thread, which keeps the per-connection request order trivially and avoids a thread hop
per request. Moves and other long disk work run on the storage engine's own threads.
"""

from __future__ import annotations

import warnings
from typing import Any

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.protocol.apis import ApiKey, Request
from spindle.broker.protocol.constants import OffsetSpec
from spindle.broker.replication.producer_state import DuplicateBatch

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch

from ..security.authorizer import Operation, RequestContext, ResourceType
from ..zerocopy import FileRegion, close_regions
from .base import ApiContext, Handlers, error_of, errors_into, not_authorized

SENDFILE_MIN_BYTES = 65536
"""Record sets at least this large are sent from the segment file (see ``zerocopy``); smaller
ones are copied, which is cheaper than a descriptor and a ``sendfile`` call."""
DEFAULT_FETCH_MAX_BYTES = 52428800
"""``fetch.max.bytes`` when a request sets no positive limit (Kafka's default, 50 MiB)."""


def _produce_partition(
    broker: ApiContext, tp: TopicPartition, pd: Any, acks: int, allowed: bool
) -> tuple[dict[str, Any], bool, int | None]:
    """Append one partition's batch: its response, whether anything was appended, and the
    offset the batch ends at (None if refused). With acks=all the ISR must hold
    ``min.insync.replicas`` first (NOT_ENOUGH_REPLICAS). A retried idempotent batch already
    written ends where its original does: acks=all waits for that to be committed too, since
    the original may not be yet (Kafka's DelayedProduce waits on the duplicate's offsets)."""
    base, start, code, msg = -1, -1, 0, None
    appended = False
    end: int | None = None
    try:
        if not allowed:
            raise not_authorized(Operation.WRITE, ResourceType.TOPIC, str(tp))
        if acks not in (-1, 0, 1):
            raise KafkaError(f"acks={acks} is not -1, 0 or 1", ErrorCode.INVALID_REQUIRED_ACKS)
        if acks == -1:
            broker.replicas.check_min_isr(tp)
        base, start = broker.replicas.append(tp, pd.records)
        appended = True
        end = broker.replicas.hosted_log(tp).log_end_offset
    except DuplicateBatch as dup:
        base = dup.meta.base_offset
        end = dup.meta.last_offset + 1
    except Exception as exc:
        code, msg = error_of(exc)
    response = {
        "index": pd.index,
        "error_code": code,
        "base_offset": base,
        "log_append_time_ms": -1,
        "log_start_offset": start,
        "record_errors": [],
        "error_message": msg,
    }
    return response, appended, end


async def produce(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any] | None:
    body = req.body
    acks = body.acks
    responses = []
    appended = False
    ends: dict[TopicPartition, tuple[int, dict[str, Any]]] = {}
    for td in body.topic_data:
        parts = []
        allowed = broker.allowed(ctx, Operation.WRITE, ResourceType.TOPIC, td.name)
        for pd in td.partition_data:
            tp = TopicPartition(td.name, pd.index)
            part, did_append, end = _produce_partition(broker, tp, pd, acks, allowed)
            appended = appended or did_append
            if end is not None and acks == -1:
                ends[tp] = (end, part)
            parts.append(part)
        responses.append({"name": td.name, "partition_responses": parts})
    if appended:
        broker.replicas.appended()
    if ends:
        # acks=all: answer once every in-sync replica has the records (the high watermark
        # passed them): REQUEST_TIMED_OUT after the request's timeout, or
        # NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas.
        failed = await broker.replicas.wait_committed(
            {tp: end for tp, (end, _) in ends.items()}, max(body.timeout_ms, 0) / 1000
        )
        for tp, exc in failed.items():
            ends[tp][1].update(error_code=int(exc.code), error_message=str(exc))
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}


async def fetch(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    body = req.body
    deadline = broker.clock.monotonic() + body.max_wait_ms / 1000.0
    min_bytes = max(body.min_bytes, 0)
    due: float | None = None
    while True:
        responses, total, any_error, held = _read_fetch(broker, ctx, body, due)
        due = None
        now = broker.clock.monotonic()
        remaining = deadline - now
        if total >= min_bytes or any_error or remaining <= 0 or min_bytes == 0:
            break
        _close_fetch_regions(responses)
        if held:
            # A throttled partition was left out: read again once the leader quota allows,
            # and count what is read then from that moment (a late wake-up costs no rate).
            wait = max(broker.replicas.leader_throttle_delay(), 0.001)
            due = now + wait
            remaining = min(remaining, wait)
        await broker.replicas.appends.wait(remaining)
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": responses,
    }


def _fetch_partition(
    broker: ApiContext,
    tp: TopicPartition,
    p: Any,
    budget: int,
    allowed: bool,
    replica_id: int = -1,
    quota_exceeded: bool = False,
    due: float | None = None,
) -> tuple[dict[str, Any], int, bool]:
    """Read one partition of a fetch: its response, the bytes it carries and whether the
    replication throttle held its data back. Errors are answered in ``error_code`` (and end
    a long poll); a ``currentLeaderEpoch`` other than this broker's is fenced. A follower's
    fetch (``replica_id`` >= 0) records its position with the leader and reads up to the log
    end, not the high watermark (Kafka's replica fetch) -- or, if its log diverges from the
    leader's, gets the ``divergingEpoch`` and no records; a throttled partition's data is left
    out when the leader quota was exceeded as the request was read (``quota_exceeded``; the
    fetch is not failed) and what is sent counts against the quota."""
    out: dict[str, Any] = {
        "partition_index": p.partition,
        "error_code": 0,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }
    size = 0
    held = False
    partition_log = None
    with errors_into(out, message=False):
        if not allowed:
            raise not_authorized(Operation.READ, ResourceType.TOPIC, str(tp))
        partition_log, diverging = broker.replicas.fetch_log(
            tp,
            replica_id,
            p.fetch_offset,
            current_leader_epoch=getattr(p, "current_leader_epoch", -1),  # v9+
            last_fetched_epoch=getattr(p, "last_fetched_epoch", -1),  # v12+
        )
        if diverging is not None:
            out.update(
                high_watermark=partition_log.high_watermark,
                last_stable_offset=partition_log.high_watermark,
                log_start_offset=partition_log.log_start_offset,
                diverging_epoch={"epoch": diverging[0], "end_offset": diverging[1]},
            )
            return out, 0, False
        if replica_id >= 0:
            hw = partition_log.log_end_offset
            if quota_exceeded and broker.replicas.leader_throttles(tp, replica_id):
                held = True
                budget = 0
            elif (cap := broker.replicas.leader_read_cap(tp, replica_id)) is not None:
                budget = min(budget, cap)
        else:
            hw = partition_log.high_watermark
        # KIP-74: storage returns at least one whole batch for a positive limit, so the first
        # non-empty partition answers even if its batch exceeds the limits.
        limit = max(min(p.partition_max_bytes, budget), 0)
        got = partition_log.read(
            p.fetch_offset, limit, max_offset=hw, file_range_min_bytes=SENDFILE_MIN_BYTES
        )
        out.update(
            high_watermark=got.high_watermark,
            last_stable_offset=got.high_watermark,
            log_start_offset=got.log_start_offset,
            records=got.records if got.file is None else FileRegion(got.file),
        )
        size = got.size
        if replica_id >= 0:
            broker.replicas.leader_sent(tp, size, at=due)
    if out["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE and partition_log is not None:
        # Kafka answers -1 here and its follower asks ListOffsets next; a Spindle follower
        # reads the leader's log start from this answer instead (one round trip fewer).
        out["log_start_offset"] = partition_log.log_start_offset
    return out, size, held


def _read_fetch(
    broker: ApiContext, ctx: RequestContext, body: Any, due: float | None = None
) -> tuple[list[dict[str, Any]], int, bool, bool]:
    """(responses, bytes, whether any partition failed, whether the replication throttle
    held any partition's data back). ``due``: when a follower fetch held back before was
    due to be read again (the time its bytes count from)."""
    has_limit = body.max_bytes is not None and body.max_bytes > 0
    budget = body.max_bytes if has_limit else DEFAULT_FETCH_MAX_BYTES
    responses = []
    total = 0
    any_error = False
    any_held = False
    replica_id = getattr(body, "replica_id", -1)
    # Kafka decides per response: while the leader quota is not exceeded, every partition of
    # this follower fetch gets its data (and the bytes are counted), so one response is the
    # most the quota can be overrun by.
    quota_exceeded = replica_id >= 0 and broker.replicas.leader_quota_exceeded()
    for t in body.topics:
        allowed = broker.allowed(ctx, Operation.READ, ResourceType.TOPIC, t.topic)
        parts = []
        for p in t.partitions:
            out, size, held = _fetch_partition(
                broker,
                TopicPartition(t.topic, p.partition),
                p,
                budget,
                allowed,
                replica_id,
                quota_exceeded,
                due,
            )
            total += size
            budget -= size
            # An error or a divergingEpoch answers at once, as Kafka's fetch does.
            any_error = any_error or out["error_code"] != 0 or "diverging_epoch" in out
            any_held = any_held or held
            parts.append(out)
        responses.append({"topic": t.topic, "partitions": parts})
    return responses, total, any_error, any_held


def _close_fetch_regions(responses: list[dict[str, Any]]) -> None:
    """Release the file ranges of a fetch answer that will not be sent (long poll retries)."""
    for t in responses:
        close_regions(p["records"] for p in t["partitions"])


def _list_offset(broker: ApiContext, tp: TopicPartition, p: Any, out: dict[str, Any]) -> None:
    """Fill ``out`` with the offset ListOffsets answers for ``p``'s timestamp."""
    broker.replicas.check_leader_epoch(tp, getattr(p, "current_leader_epoch", -1))  # v4+
    partition_log = broker.replicas.hosted_log(tp)
    leader_epoch = broker.topics[tp.topic].partitions[tp.partition].leader_epoch
    if p.timestamp == OffsetSpec.EARLIEST_TIMESTAMP:
        offset = partition_log.log_start_offset
    elif p.timestamp == OffsetSpec.LATEST_TIMESTAMP:
        offset = partition_log.high_watermark
    elif p.timestamp == OffsetSpec.MAX_TIMESTAMP:
        offset, out["timestamp"] = _max_timestamp(partition_log)
    else:
        found = partition_log.offset_for_timestamp(p.timestamp)
        offset = -1  # Kafka's answer when no record is that new: offset -1, timestamp -1
        if found is not None:
            offset, out["timestamp"] = found  # the found record's timestamp, as Kafka answers
    out.update(offset=offset, leader_epoch=leader_epoch)


def _max_timestamp(partition_log: Any) -> tuple[int, int]:
    """KIP-734: (offset, timestamp) of the record with the largest timestamp, the first such
    record if several share it; (-1, -1) for an empty log. The time index names its batch;
    the batch's records give the exact offset."""
    found = partition_log.max_timestamp_batch()
    if found is None:
        return -1, -1
    timestamp, last_offset = found
    chunk = partition_log.read(max(last_offset, partition_log.log_start_offset), 1)
    for offset, ts in _record_times(chunk.records):
        if ts == timestamp:
            return offset, timestamp
    return last_offset, timestamp


def _record_times(data: bytes) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record of the first batch in ``data``."""
    if len(data) < 12:
        return []
    size = int.from_bytes(data[8:12], "big") + 12
    batch = DefaultRecordBatch(data[:size])
    return [(r.offset, r.timestamp) for r in batch]


async def delete_records(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    """Move each partition's log start offset up (``-1`` = to the high watermark); segments
    wholly below it are deleted. OFFSET_OUT_OF_RANGE beyond the high watermark."""
    topics = []
    for t in req.body.topics:
        allowed = broker.allowed(ctx, Operation.DELETE, ResourceType.TOPIC, t.name)
        parts = []
        for p in t.partitions:
            out: dict[str, Any] = {
                "partition_index": p.partition_index,
                "low_watermark": -1,
                "error_code": 0,
            }
            with errors_into(out, message=False):
                tp = TopicPartition(t.name, p.partition_index)
                if not allowed:
                    raise not_authorized(Operation.DELETE, ResourceType.TOPIC, str(tp))
                partition_log = broker.replicas.hosted_log(tp)
                target = partition_log.high_watermark if p.offset == -1 else p.offset
                if target < 0:
                    raise KafkaError(
                        f"offset {p.offset} is not valid", ErrorCode.OFFSET_OUT_OF_RANGE
                    )
                partition_log.advance_log_start_offset(target)
                out["low_watermark"] = partition_log.log_start_offset
            parts.append(out)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


async def list_offsets(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    topics = []
    for t in req.body.topics:
        allowed = broker.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, t.name)
        parts = []
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            out = {
                "partition_index": p.partition_index,
                "error_code": 0,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            with errors_into(out, message=False):
                if not allowed:
                    raise not_authorized(Operation.DESCRIBE, ResourceType.TOPIC, str(tp))
                _list_offset(broker, tp, p, out)
            parts.append(out)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


HANDLERS: Handlers = {
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.DELETE_RECORDS: delete_records,
}
