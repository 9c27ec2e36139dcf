"""Metadata and cluster APIs: ApiVersions, Metadata (with auto-creation), DescribeCluster."""

from __future__ import annotations

from typing import Any

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.common.kafka_uuid import LOST_DIR, to_kafka_str
from spindle.broker.controller.model import TopicState
from spindle.broker.group.store import OFFSETS_TOPIC as INTERNAL_TOPIC
from spindle.broker.protocol.apis import ApiKey, Request, api_versions_body
from spindle.broker.protocol.constants import EndpointType

from ..security.authorizer import Operation, RequestContext, ResourceType
from .base import METADATA_WAIT_S, ApiContext, Handlers, topic_id


async def api_versions(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    return api_versions_body(req)


def _partition_metadata(broker: ApiContext, topic: TopicState) -> list[dict[str, Any]]:
    node_id = broker.node_id
    out = []
    for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
        offline = [b for b, d in zip(p.replicas, p.directories, strict=False) if d == LOST_DIR]
        if (
            node_id in p.replicas
            and node_id not in offline
            and broker.logs.is_partition_offline(TopicPartition(topic.name, p.partition))
        ):
            offline.append(node_id)
        out.append(
            {
                "error_code": 0,
                "partition_index": p.partition,
                "leader_id": p.leader,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": list(p.replicas),
                "isr_nodes": [b for b in p.isr if b not in offline],
                "offline_replicas": offline,
            }
        )
    return out


def _topic_metadata(
    broker: ApiContext, name: str, topic: TopicState | None, error: int = 0
) -> dict[str, Any]:
    if topic is None:
        return {
            "error_code": error or int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            "name": name,
            "topic_id": None,
            "is_internal": False,
            "partitions": [],
            "authorized_operations": None,
        }
    return {
        "error_code": error,
        "name": topic.name,
        "topic_id": topic_id(topic),
        "is_internal": topic.name == INTERNAL_TOPIC,
        "partitions": _partition_metadata(broker, topic),
        "authorized_operations": None,
    }


async def _auto_create(broker: ApiContext, name: str) -> tuple[TopicState | None, int]:
    """Create ``name`` with the broker's defaults: the topic (if it exists now) and the error
    code to answer (0, or why it could not be created). The answer waits until the metadata
    watch has created the local replicas (see :meth:`ApiContext.wait_applied`); if it has
    not within ``METADATA_WAIT_S``, LEADER_NOT_AVAILABLE, Kafka's answer for a topic being
    created, which clients retry."""
    s = broker.settings
    try:
        topic = await broker.controller.create_topic(
            name, s.num_partitions, s.default_replication_factor, None, {}
        )
    except KafkaError as exc:
        if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
            return None, int(exc.code)
        return broker.topics.get(name), 0
    if not await broker.wait_applied(broker.written_revision(name), METADATA_WAIT_S):
        return topic, int(ErrorCode.LEADER_NOT_AVAILABLE)
    return topic, 0


async def _requested_topic(
    broker: ApiContext,
    ctx: RequestContext,
    t: Any,
    by_id: dict[str, TopicState],
    allow_create: bool,
) -> dict[str, Any]:
    """The metadata of one requested topic (by name or id), created first if allowed."""
    name = t.name
    if name is None and t.topic_id is not None:
        found = by_id.get(to_kafka_str(t.topic_id))
        if found is None:
            return {
                **_topic_metadata(broker, "", None, int(ErrorCode.UNKNOWN_TOPIC_ID)),
                "name": None,
                "topic_id": t.topic_id,
            }
        name = found.name
    if not broker.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, name):
        # Kafka's answer whether or not the topic exists: its existence is not told either
        return _topic_metadata(broker, name, None, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    topic = broker.topics.get(name)
    error = 0
    if (
        topic is None
        and allow_create
        and name != INTERNAL_TOPIC  # created by FindCoordinator, never by Metadata
        and broker.settings.auto_create_topics_enable
    ):
        if not broker.may_create_topic(ctx, name):
            return _topic_metadata(broker, name, None, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        topic, error = await _auto_create(broker, name)
    return _topic_metadata(broker, name, topic, error)


async def metadata(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    body = req.body
    requested = body.topics
    if requested is None or (req.version == 0 and not requested):
        # every topic the principal may Describe; the others are not mentioned at all
        topics_out = [
            _topic_metadata(broker, n, broker.topics[n])
            for n in sorted(broker.topics)
            if broker.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, n)
        ]
    else:
        by_id = {t.topic_id: t for t in broker.topics.values()}
        allow_create = bool(body.allow_auto_topic_creation) if req.version >= 4 else True
        topics_out = [
            await _requested_topic(broker, ctx, t, by_id, allow_create) for t in requested
        ]
    return {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": e.node_id, "host": e.host, "port": e.port, "rack": e.rack}
            for e in broker.brokers(ctx.listener)
        ],
        "cluster_id": broker.controller.store.cluster_id,
        "controller_id": broker.controller_id,
        "topics": topics_out,
        "authorized_operations": None,
    }


async def describe_cluster(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": int(EndpointType.BROKERS),
        "cluster_id": broker.controller.store.cluster_id,
        "controller_id": broker.controller_id,
        "brokers": [
            {"broker_id": e.node_id, "host": e.host, "port": e.port, "rack": e.rack}
            for e in broker.brokers(ctx.listener)
        ],
        "authorized_operations": None,
    }


HANDLERS: Handlers = {
    ApiKey.API_VERSIONS: api_versions,
    ApiKey.METADATA: metadata,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster,
}
