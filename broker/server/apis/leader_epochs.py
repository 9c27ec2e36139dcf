"""OffsetsForLeaderEpoch (API key 23; KIP-101, KIP-279, KIP-320): where a leader epoch ends in
this broker's log, as the partition's leader sees it.

Followers ask it after a leader change to find where their log parts from the new leader's;
consumers (KIP-320: the Java client, librdkafka, kafka-python) ask it after a leader change to
check that the records they already read were not truncated away.

Kafka's semantics (``KafkaApis.handleOffsetForLeaderEpochRequest``,
``ReplicaManager.lastOffsetForLeaderEpoch``, ``Partition.lastOffsetForLeaderEpoch``):

* authorisation: ClusterAction on the cluster (brokers) or Describe on the topic, else
  TOPIC_AUTHORIZATION_FAILED for that topic's partitions;
* per partition, in this order: UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does
  not have; FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a ``CurrentLeaderEpoch`` older /
  newer than this broker's (-1 skips the check); NOT_LEADER_OR_FOLLOWER unless this broker
  leads it (always: Kafka answers only from the leader, whatever the ``ReplicaId``);
  KAFKA_STORAGE_ERROR if its directory is offline;
* otherwise the end offset of the requested epoch: the log end for the leader's latest epoch,
  else the start of the next higher epoch, with the largest epoch at or below the requested
  one; ``LeaderEpoch`` -1 and ``EndOffset`` -1 when the epoch is unknown (UNDEFINED_EPOCH,
  or no epochs kept).

Versions 2-4, Kafka 4's range (0 and 1 were removed in Kafka 4.0; every client that speaks this
API sends v2 or later).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spindle.broker.common.errors import ErrorCode
from spindle.broker.common.ids import TopicPartition
from spindle.broker.protocol.apis import ApiKey, Request

from ..security.authorizer import Operation, RequestContext, ResourceType
from .base import ApiContext, Handlers, errors_into

Lookup = Callable[[TopicPartition, int, int], tuple[int, int]]
"""``lookup(tp, current_leader_epoch, leader_epoch)`` -> (leader epoch, end offset); raises
``KafkaError`` with the partition's error code."""


def build_offsets_for_leader_epoch(
    topics: Any, *, lookup: Lookup, allowed: Callable[[str], bool]
) -> dict[str, Any]:
    """The response body for the request's ``topics``; pure apart from ``lookup``."""
    results = []
    for t in topics:
        parts = []
        for p in t.partitions:
            out: dict[str, Any] = {
                "error_code": 0,
                "partition": p.partition,
                "leader_epoch": -1,
                "end_offset": -1,
            }
            if not allowed(t.topic):
                out["error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            else:
                with errors_into(out, message=False):
                    tp = TopicPartition(t.topic, p.partition)
                    epoch, end = lookup(tp, getattr(p, "current_leader_epoch", -1), p.leader_epoch)
                    out.update(leader_epoch=epoch, end_offset=end)
            parts.append(out)
        results.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": results}


async def offsets_for_leader_epoch(
    broker: ApiContext, ctx: RequestContext, req: Request
) -> dict[str, Any]:
    cluster_action = broker.allowed_on_cluster(ctx, Operation.CLUSTER_ACTION)
    return build_offsets_for_leader_epoch(
        req.body.topics,
        lookup=broker.replicas.end_offset_for_leader_epoch,
        allowed=lambda topic: (
            cluster_action or broker.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, topic)
        ),
    )


HANDLERS: Handlers = {ApiKey.OFFSET_FOR_LEADER_EPOCH: offsets_for_leader_epoch}
