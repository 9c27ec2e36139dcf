"""Committed-offset APIs: OffsetCommit, OffsetFetch (batched from v8) and OffsetDelete.

Thin translations to the group coordinator, which writes every commit to
``__consumer_offsets`` before answering. A partition of a topic that does not exist answers
UNKNOWN_TOPIC_OR_PARTITION (Kafka checks the metadata before the coordinator sees it). A commit
is answered once the in-sync replicas of its ``__consumer_offsets`` partition have it (acks=all,
as Kafka's coordinator writes), or COORDINATOR_NOT_AVAILABLE after
``offsets.commit.timeout.ms`` so the client retries.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from spindle.broker.common.errors import ErrorCode
from spindle.broker.common.ids import TopicPartition
from spindle.broker.group.coordinator import CommitEntry
from spindle.broker.group.model import OffsetAndMetadata
from spindle.broker.group.store import OFFSETS_TOPIC
from spindle.broker.protocol.apis import ApiKey, Request

from ..security.authorizer import Operation, RequestContext, ResourceType
from .base import ApiContext, Handlers


def _known(broker: ApiContext, topic: str, partition: int) -> bool:
    found = broker.topics.get(topic)
    return found is not None and partition in found.partitions


async def _replicated(broker: ApiContext, group_id: str) -> bool:
    """Wait until the group's offsets partition is committed up to its end (acks=all)."""
    tp = TopicPartition(OFFSETS_TOPIC, broker.groups.partition_of(group_id))
    end = broker.replicas.hosted_log(tp).log_end_offset
    timeout = broker.settings.offsets_commit_timeout_ms / 1000
    return not await broker.replicas.wait_committed({tp: end}, timeout)


async def offset_commit(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    b = req.body
    group_allowed = broker.allowed(ctx, Operation.READ, ResourceType.GROUP, b.group_id)
    errors: dict[tuple[str, int], ErrorCode] = {}
    entries: list[CommitEntry] = []
    for t in b.topics:
        topic_allowed = broker.allowed(ctx, Operation.READ, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if not group_allowed:
                errors[key] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            elif not topic_allowed:
                errors[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not _known(broker, t.name, p.partition_index):
                errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                epoch = p.committed_leader_epoch if req.version >= 6 else -1
                entries.append(
                    CommitEntry(
                        t.name, p.partition_index, p.committed_offset, epoch, p.committed_metadata
                    )
                )
    if entries:
        written = broker.groups.commit_offsets(
            b.group_id,
            b.member_id if req.version >= 1 else "",
            b.group_instance_id if req.version >= 7 else None,
            b.generation_id_or_member_epoch if req.version >= 1 else -1,
            entries,
        )
        if ErrorCode.NONE in written.values() and not await _replicated(broker, b.group_id):
            written = {
                k: ErrorCode.COORDINATOR_NOT_AVAILABLE if e is ErrorCode.NONE else e
                for k, e in written.items()
            }
        errors.update(written)
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": int(errors[(t.name, p.partition_index)]),
                    }
                    for p in t.partitions
                ],
            }
            for t in b.topics
        ],
    }


def _partition(index: int, om: OffsetAndMetadata | None, error: ErrorCode) -> dict[str, Any]:
    return {
        "partition_index": index,
        "committed_offset": om.offset if om else -1,
        "committed_leader_epoch": om.leader_epoch if om else -1,
        "metadata": om.metadata if om else "",
        "error_code": int(error),
    }


def _fetch_group(
    broker: ApiContext, ctx: RequestContext, group_id: str, topics: Any
) -> tuple[ErrorCode, list[dict[str, Any]]]:
    """(group error, topics) of one group; ``topics`` None = every committed offset."""
    if not broker.allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    error, found = broker.groups.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (topic, partition), om in sorted(found.items()):
        if wanted is None and not broker.allowed(
            ctx, Operation.DESCRIBE, ResourceType.TOPIC, topic
        ):
            continue
        by_topic[topic].append(_partition(partition, om, ErrorCode.NONE))
    if error is not ErrorCode.NONE and wanted is not None:
        for topic, partition in wanted:
            by_topic[topic].append(_partition(partition, None, error))
    return error, [{"name": n, "partitions": ps} for n, ps in by_topic.items()]


async def offset_fetch(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    b = req.body
    if req.version >= 8:
        groups = []
        for g in b.groups:
            error, topics = _fetch_group(broker, ctx, g.group_id, g.topics)
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": int(error)})
        return {"throttle_time_ms": 0, "groups": groups}
    error, topics = _fetch_group(broker, ctx, b.group_id, b.topics)
    return {"throttle_time_ms": 0, "topics": topics, "error_code": int(error)}


async def offset_delete(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    b = req.body
    if not broker.allowed(ctx, Operation.DELETE, ResourceType.GROUP, b.group_id):
        return {
            "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
            "throttle_time_ms": 0,
            "topics": [],
        }
    wanted = [(t.name, p.partition_index) for t in b.topics for p in t.partitions]
    top, per = broker.groups.delete_offsets(b.group_id, wanted)
    return {
        "error_code": int(top),
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": int(per.get((t.name, p.partition_index), ErrorCode.NONE)),
                    }
                    for p in t.partitions
                ],
            }
            for t in b.topics
        ]
        if top is ErrorCode.NONE
        else [],
    }


HANDLERS: Handlers = {
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.OFFSET_DELETE: offset_delete,
}
