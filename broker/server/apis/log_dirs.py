"""The JBOD APIs: DescribeLogDirs (35) and AlterReplicaLogDirs (34), KIP-113 and KIP-858.

Both act on this broker's storage only; moves run on the storage engine's mover threads, so
AlterReplicaLogDirs answers as soon as a move has started.

Spindle extension: AlterReplicaLogDirs for a replica whose directory is offline (Kafka:
KAFKA_STORAGE_ERROR) re-homes it live -- an empty replica in the requested directory (online,
not cordoned), recorded with the controller and refetched from the leader until it rejoins the
ISR (:mod:`spindle.broker.replication.rehome`). Kafka gets there only by restarting the broker
without the directory (KIP-858). Refused (KAFKA_STORAGE_ERROR) while this broker still leads
the partition; INVALID_REPLICA_ASSIGNMENT into a cordoned directory; the reason of each
refusal is in the broker's log.
"""

from __future__ import annotations

from typing import Any

from spindle.broker.common.errors import ErrorCode
from spindle.broker.common.ids import TopicPartition
from spindle.broker.protocol.apis import ApiKey, Request
from spindle.broker.replication.rehome import rehome_offline_replica
from spindle.broker.storage import LogDirDescription

from ..security.authorizer import Operation, RequestContext, ResourceType
from .base import ApiContext, Handlers, authorization_failed, error_of


def _describe_dir(d: LogDirDescription) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for p in d.partitions:
        by_topic.setdefault(p.tp.topic, []).append(
            {
                "partition_index": p.tp.partition,
                "partition_size": p.size,
                "offset_lag": p.offset_lag,
                "is_future_key": p.is_future,
            }
        )
    return {
        "error_code": int(d.error),
        "log_dir": d.path,
        "topics": [{"name": n, "partitions": ps} for n, ps in sorted(by_topic.items())],
        "total_bytes": d.total_bytes,
        "usable_bytes": d.usable_bytes,
    }


async def describe_log_dirs(
    broker: ApiContext, ctx: RequestContext, req: Request
) -> dict[str, Any]:
    refused = broker.cluster_refusal(ctx, Operation.DESCRIBE, results=[])
    if refused is not None:
        return refused
    selection = None
    if req.body.topics is not None:
        # A topic named twice: its last entry counts.
        wanted = {t.topic: list(t.partitions) for t in req.body.topics}
        selection = [TopicPartition(t, p) for t, ps in wanted.items() for p in ps]
    results = [_describe_dir(d) for d in broker.logs.describe_dirs(topics=selection)]
    return {"throttle_time_ms": 0, "error_code": 0, "results": results}


def _change_dir(broker: ApiContext, tp: TopicPartition, path: str) -> ErrorCode:
    """Start moving ``tp`` to ``path``: storage's code, or UNKNOWN_TOPIC_OR_PARTITION for a
    topic the metadata does not know."""
    try:
        # Storage remembers the destination of a replica it does not host yet, so a topic
        # created later is placed there (Kafka does the same).
        code = broker.logs.change_replica_dir(tp, path)
    except Exception as exc:
        code = ErrorCode(error_of(exc)[0])
    if tp.topic not in broker.topics and code is ErrorCode.REPLICA_NOT_AVAILABLE:
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return code


async def alter_replica_log_dirs(
    broker: ApiContext, ctx: RequestContext, req: Request
) -> dict[str, Any]:
    allowed = broker.allowed_on_cluster(ctx, Operation.ALTER)
    results: dict[str, list[dict[str, Any]]] = {}
    for d in req.body.dirs:
        for t in d.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p)
                if allowed and broker.logs.is_partition_offline(tp):
                    code = await rehome_offline_replica(broker.replicas, tp, d.path)
                elif allowed:
                    code = _change_dir(broker, tp, d.path)
                else:
                    code = authorization_failed(ResourceType.CLUSTER)
                results.setdefault(t.name, []).append(
                    {"partition_index": p, "error_code": int(code)}
                )
    return {
        "throttle_time_ms": 0,
        "results": [{"topic_name": n, "partitions": ps} for n, ps in results.items()],
    }


HANDLERS: Handlers = {
    ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: alter_replica_log_dirs,
}
