"""Partition placement APIs: AlterPartitionReassignments and ListPartitionReassignments
(KIP-455), and ElectLeaders (KIP-460: preferred or unclean). The controller validates and
records the target replicas or the new leader; on one broker a log-dir-only plan completes at
once and every partition already has its preferred leader."""

from __future__ import annotations

from typing import Any

from spindle.broker.common.errors import ErrorCode
from spindle.broker.common.ids import TopicPartition
from spindle.broker.protocol.apis import ApiKey, Request

from ..security.authorizer import Operation, RequestContext
from .base import ApiContext, Handlers, error_of


async def _alter_partition(broker: ApiContext, name: str, p: Any) -> dict[str, Any]:
    code, msg = 0, None
    try:
        target = list(p.replicas) if p.replicas is not None else None
        await broker.controller.alter_reassignment(TopicPartition(name, p.partition_index), target)
    except Exception as exc:
        code, msg = error_of(exc)
    return {"partition_index": p.partition_index, "error_code": code, "error_message": msg}


async def alter_partition_reassignments(
    broker: ApiContext, ctx: RequestContext, req: Request
) -> dict[str, Any]:
    refused = broker.cluster_refusal(
        ctx, Operation.ALTER, error_message="not allowed", responses=[]
    )
    if refused is not None:
        return refused
    responses = []
    for t in req.body.topics:
        parts = [await _alter_partition(broker, t.name, p) for p in t.partitions]
        responses.append({"name": t.name, "partitions": parts})
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "responses": responses,
    }


async def list_partition_reassignments(
    broker: ApiContext, ctx: RequestContext, req: Request
) -> dict[str, Any]:
    refused = broker.cluster_refusal(
        ctx, Operation.DESCRIBE, error_message="not allowed", topics=[]
    )
    if refused is not None:
        return refused
    topics = []
    wanted = (
        {t.name: set(t.partition_indexes) for t in req.body.topics}
        if req.body.topics is not None
        else None
    )
    for name, topic in sorted(broker.topics.items()):
        if wanted is not None and name not in wanted:
            continue
        parts = [
            {
                "partition_index": p.partition,
                "replicas": list(p.replicas),
                "adding_replicas": list(p.adding),
                "removing_replicas": list(p.removing),
            }
            for p in topic.partitions.values()
            if (p.adding or p.removing) and (wanted is None or p.partition in wanted[name])
        ]
        if parts:
            topics.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": topics}


async def elect_leaders(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    """``kafka-leader-election``: per partition, the controller's election or Kafka's error
    (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE).
    All partitions when none are named; then the ones needing no election are left out."""
    body = req.body
    unclean = req.version >= 1 and body.election_type == 1
    refused = broker.cluster_refusal(ctx, Operation.ALTER, replica_election_results=[])
    if refused is not None:
        return refused
    everything = body.topic_partitions is None
    wanted = (
        [(name, sorted(t.partitions)) for name, t in sorted(broker.topics.items())]
        if everything
        else [(t.topic, list(t.partitions)) for t in body.topic_partitions]
    )
    results = []
    for name, partitions in wanted:
        out = []
        for p in partitions:
            code, msg = 0, None
            try:
                await broker.controller.elect_leader(TopicPartition(name, p), unclean=unclean)
            except Exception as exc:
                code, msg = error_of(exc)
            if everything and code == ErrorCode.ELECTION_NOT_NEEDED:
                continue
            out.append({"partition_id": p, "error_code": code, "error_message": msg})
        if out or not everything:
            results.append({"topic": name, "partition_result": out})
    return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": results}


HANDLERS: Handlers = {
    ApiKey.ELECT_LEADERS: elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments,
}
