"""Topic APIs: CreateTopics, DeleteTopics, CreatePartitions.

The controller validates and records the change; the answer waits (up to the request's
``timeout_ms``) until this broker's metadata watch has applied it -- the watch, not the
handler, creates or deletes the local replicas -- so a topic is usable here as soon as its
answer is sent. A change the watch has not applied in time is answered REQUEST_TIMED_OUT (it
stands, as in Kafka).
"""

from __future__ import annotations

from typing import Any

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.kafka_uuid import to_kafka_str
from spindle.broker.protocol.apis import ApiKey, Request
from spindle.broker.protocol.constants import ConfigSource

from ..security.authorizer import Operation, RequestContext, ResourceType
from .base import (
    ApiContext,
    Handlers,
    answer_when_applied,
    config_entry,
    errors_into,
    not_authorized,
    request_wait_s,
    topic_id,
)

CREATED_CONFIG_FIELDS = ("name", "value", "read_only", "config_source", "is_sensitive")
"""The fields of a config entry that CreateTopics answers (a subset of DescribeConfigs')."""


async def _create_topic(
    broker: ApiContext, t: Any, validate_only: bool, res: dict[str, Any]
) -> int | None:
    """Create one topic of a CreateTopics request and describe it in ``res``; the revision
    of the write (None for validate_only)."""
    assignments = (
        [list(a.broker_ids) for a in sorted(t.assignments, key=lambda a: a.partition_index)]
        if t.assignments
        else None
    )
    if assignments and (t.num_partitions != -1 or t.replication_factor != -1):
        raise KafkaError(
            "both assignments and a partition count or replication factor were given",
            ErrorCode.INVALID_REQUEST,
        )
    s = broker.settings
    n = t.num_partitions if t.num_partitions != -1 else s.num_partitions
    rf = t.replication_factor if t.replication_factor != -1 else s.default_replication_factor
    configs = {c.name: c.value for c in t.configs or []}
    topic = await broker.controller.create_topic(
        t.name, n, rf, assignments, configs, validate_only=validate_only
    )
    res.update(
        topic_id=topic_id(topic),
        num_partitions=len(topic.partitions),
        replication_factor=len(next(iter(topic.partitions.values())).replicas),
        configs=[
            {f: e[f] for f in CREATED_CONFIG_FIELDS}
            for e in (
                config_entry(k, v, ConfigSource.TOPIC_CONFIG)
                for k, v in sorted(topic.configs.items())
            )
        ],
    )
    return None if validate_only else broker.written_revision(t.name)


async def create_topics(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    body = req.body
    out = []
    written: list[tuple[dict[str, Any], int]] = []
    for t in body.topics:
        res: dict[str, Any] = {
            "name": t.name,
            "topic_id": None,
            "error_code": 0,
            "error_message": None,
            "topic_config_error_code": 0,
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": [],
        }
        with errors_into(res):
            if not broker.may_create_topic(ctx, t.name):
                raise not_authorized(Operation.CREATE, ResourceType.TOPIC, t.name)
            revision = await _create_topic(broker, t, bool(body.validate_only), res)
            if revision is not None:
                written.append((res, revision))
        out.append(res)
    await answer_when_applied(broker, written, request_wait_s(body.timeout_ms))
    return {"throttle_time_ms": 0, "topics": out}


async def delete_topics(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    body = req.body
    if req.version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(n, None) for n in body.topic_names]
    by_id = {t.topic_id: t.name for t in broker.topics.values()}
    out = []
    written: list[tuple[dict[str, Any], int]] = []
    for name, tid in wanted:
        res: dict[str, Any] = {
            "name": name,
            "topic_id": tid,
            "error_code": 0,
            "error_message": None,
        }
        with errors_into(res):
            if name is None and tid is not None:
                name = by_id.get(to_kafka_str(tid))
                if name is None:
                    raise KafkaError(f"no topic has id {tid}", ErrorCode.UNKNOWN_TOPIC_ID)
                res["name"] = name
            broker.authorize(ctx, Operation.DELETE, ResourceType.TOPIC, name)
            topic = await broker.controller.delete_topic(name)
            res["topic_id"] = topic_id(topic)
            written.append((res, broker.written_revision(name)))
        out.append(res)
    await answer_when_applied(broker, written, request_wait_s(body.timeout_ms))
    return {"throttle_time_ms": 0, "responses": out}


async def create_partitions(
    broker: ApiContext, ctx: RequestContext, req: Request
) -> dict[str, Any]:
    body = req.body
    out = []
    written: list[tuple[dict[str, Any], int]] = []
    for t in body.topics:
        res: dict[str, Any] = {"name": t.name, "error_code": 0, "error_message": None}
        with errors_into(res):
            broker.authorize(ctx, Operation.ALTER, ResourceType.TOPIC, t.name)
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
            await broker.controller.create_partitions(
                t.name, t.count, assignments, validate_only=bool(body.validate_only)
            )
            if not body.validate_only:
                written.append((res, broker.written_revision(t.name)))
        out.append(res)
    await answer_when_applied(broker, written, request_wait_s(body.timeout_ms))
    return {"throttle_time_ms": 0, "results": out}


HANDLERS: Handlers = {
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.CREATE_PARTITIONS: create_partitions,
}
