"""Group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ListGroups,
DescribeGroups and DeleteGroups (the committed-offset APIs are in :mod:`.group_offsets`).

Thin translations between the wire and the group coordinator (``spindle.broker.group``).
FindCoordinator answers with the leader of the group's ``__consumer_offsets`` partition,
creating the topic on first use as Kafka does (``offsets.topic.num.partitions``, compacted).
"""

from __future__ import annotations

import logging
from typing import Any

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.group.membership import JoinRequest
from spindle.broker.group.model import GroupState
from spindle.broker.group.store import OFFSETS_TOPIC
from spindle.broker.protocol.apis import ApiKey, Request

from ..security.authorizer import Operation, RequestContext, ResourceType
from .base import METADATA_WAIT_S, ApiContext, Handlers

log = logging.getLogger(__name__)

KEY_TYPE_GROUP = 0
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer"}


async def ensure_offsets_topic(broker: ApiContext) -> bool:
    """Create ``__consumer_offsets`` if missing (Kafka creates it on the first FindCoordinator)
    and start coordinating the partitions this broker leads. False if this broker created it
    but its metadata watch has not created the local replicas within ``METADATA_WAIT_S``
    (see :meth:`ApiContext.wait_applied`): the coordinators are not available yet."""
    if OFFSETS_TOPIC not in broker.topics:
        s = broker.settings
        rf = min(s.offsets_topic_replication_factor, max(len(broker.brokers()), 1))
        configs = {**OFFSETS_TOPIC_CONFIGS, "segment.bytes": str(s.offsets_topic_segment_bytes)}
        try:
            topic = await broker.controller.create_topic(
                OFFSETS_TOPIC, s.offsets_topic_num_partitions, rf, None, configs
            )
            log.info("created %s with %d partitions", OFFSETS_TOPIC, len(topic.partitions))
        except KafkaError as exc:
            if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        else:
            revision = broker.written_revision(OFFSETS_TOPIC)
            if not await broker.wait_applied(revision, METADATA_WAIT_S):
                log.warning("%s created; its replicas are not up here yet", OFFSETS_TOPIC)
                return False
    # Replicas created elsewhere are picked up by the replica manager's metadata sync.
    broker.groups.sync_leadership(led_offsets_partitions(broker))
    return True


def led_offsets_partitions(broker: ApiContext) -> list[int]:
    topic = broker.topics.get(OFFSETS_TOPIC)
    if topic is None:
        return []
    return [p.partition for p in topic.partitions.values() if p.leader == broker.node_id]


def _coordinator(
    broker: ApiContext, ctx: RequestContext, key: str, key_type: int, ready: bool = True
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "key": key,
        "error_code": 0,
        "error_message": None,
        "node_id": -1,
        "host": "",
        "port": -1,
    }
    if key_type != KEY_TYPE_GROUP:
        out["error_code"] = int(ErrorCode.INVALID_REQUEST)
        out["error_message"] = f"coordinator key type {key_type} is not served (groups only)"
        return out
    if not broker.allowed(ctx, Operation.DESCRIBE, ResourceType.GROUP, key):
        out["error_code"] = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return out
    if not ready:
        out["error_code"] = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return out
    topic = broker.topics.get(OFFSETS_TOPIC)
    partition = broker.groups.partition_of(key)
    leader = topic.partitions[partition].leader if topic and partition in topic.partitions else -1
    endpoint = next((e for e in broker.brokers(ctx.listener) if e.node_id == leader), None)
    if endpoint is None:
        out["error_code"] = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return out
    out.update(node_id=endpoint.node_id, host=endpoint.host, port=endpoint.port)
    return out


async def find_coordinator(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    body = req.body
    keys = list(body.coordinator_keys or []) if req.version >= 4 else [body.key]
    key_type = body.key_type if req.version >= 1 else KEY_TYPE_GROUP
    ready = key_type != KEY_TYPE_GROUP or await ensure_offsets_topic(broker)
    found = [_coordinator(broker, ctx, k, key_type, ready) for k in keys]
    if req.version >= 4:
        return {"throttle_time_ms": 0, "coordinators": found}
    one = found[0] if found else _coordinator(broker, ctx, "", key_type, ready)
    return {
        "throttle_time_ms": 0,
        "error_code": one["error_code"],
        "error_message": one["error_message"],
        "node_id": one["node_id"],
        "host": one["host"],
        "port": one["port"],
    }


def _group_allowed(broker: ApiContext, ctx: RequestContext, group_id: str, op: Operation) -> bool:
    return broker.allowed(ctx, op, ResourceType.GROUP, group_id)


async def join_group(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    b = req.body
    out: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None if req.version >= 7 else "",
        "leader": "",
        "skip_assignment": False,
        "member_id": b.member_id or "",
        "members": [],
    }
    if not _group_allowed(broker, ctx, b.group_id, Operation.READ):
        out["error_code"] = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return out
    result = await broker.groups.join_group(
        JoinRequest(
            group_id=b.group_id,
            member_id=b.member_id or "",
            group_instance_id=b.group_instance_id if req.version >= 5 else None,
            protocol_type=b.protocol_type,
            protocols=[(p.name, bytes(p.metadata or b"")) for p in b.protocols],
            session_timeout_ms=b.session_timeout_ms,
            rebalance_timeout_ms=b.rebalance_timeout_ms
            if req.version >= 1
            else b.session_timeout_ms,
            client_id=ctx.client_id or "",
            client_host="/" + ctx.client_address.rsplit(":", 1)[0],
            require_known_member_id=req.version >= 4,
        )
    )
    out.update(
        error_code=int(result.error),
        generation_id=result.generation,
        protocol_type=result.protocol_type,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            {"member_id": m, "group_instance_id": i, "metadata": meta}
            for m, i, meta in result.members
        ],
    )
    if result.protocol is not None or req.version >= 7:
        out["protocol_name"] = result.protocol
    return out


async def sync_group(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    b = req.body
    out: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "protocol_type": None,
        "protocol_name": None,
        "assignment": b"",
    }
    if not _group_allowed(broker, ctx, b.group_id, Operation.READ):
        out["error_code"] = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return out
    result = await broker.groups.sync_group(
        b.group_id,
        b.member_id,
        b.group_instance_id if req.version >= 3 else None,
        b.generation_id,
        b.protocol_type if req.version >= 5 else None,
        b.protocol_name if req.version >= 5 else None,
        {a.member_id: bytes(a.assignment or b"") for a in b.assignments or []},
    )
    out.update(
        error_code=int(result.error),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol,
        assignment=result.assignment,
    )
    return out


async def heartbeat(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    b = req.body
    if not _group_allowed(broker, ctx, b.group_id, Operation.READ):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
    error = broker.groups.heartbeat(
        b.group_id,
        b.member_id,
        b.group_instance_id if req.version >= 3 else None,
        b.generation_id,
    )
    return {"throttle_time_ms": 0, "error_code": int(error)}


async def leave_group(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    b = req.body
    if req.version >= 3:
        leaving = [(m.member_id or "", m.group_instance_id) for m in b.members]
    else:
        leaving = [(b.member_id, None)]
    if not _group_allowed(broker, ctx, b.group_id, Operation.READ):
        return {
            "throttle_time_ms": 0,
            "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
            "members": [],
        }
    top, errors = broker.groups.leave_group(b.group_id, leaving)
    if req.version < 3 and top is ErrorCode.NONE and errors:
        top = errors[0]
    return {
        "throttle_time_ms": 0,
        "error_code": int(top),
        "members": [
            {"member_id": m, "group_instance_id": i, "error_code": int(e)}
            for (m, i), e in zip(leaving, errors, strict=False)
        ],
    }


async def list_groups(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    b = req.body
    states = set(b.states_filter or []) if req.version >= 4 else set()
    types = {t.lower() for t in (b.types_filter or [])} if req.version >= 5 else set()
    groups = [] if types and "classic" not in types else broker.groups.list_groups(states)
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type or "",
                "group_state": g.state.value,
                "group_type": "classic",
            }
            for g in groups
            if _group_allowed(broker, ctx, g.group_id, Operation.DESCRIBE)
        ],
    }


def _described(
    broker: ApiContext, ctx: RequestContext, group_id: str, version: int
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "error_code": 0,
        "error_message": None,
        "group_id": group_id,
        "group_state": GroupState.DEAD.value,
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": None,  # not requested (the schema encodes INT32_MIN)
    }
    if not _group_allowed(broker, ctx, group_id, Operation.DESCRIBE):
        out["error_code"] = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return out
    error, group = broker.groups.describe_group(group_id)
    if error is not ErrorCode.NONE:
        out["error_code"] = int(error)
        return out
    if group is None:
        if version >= 6:
            out["error_code"] = int(ErrorCode.GROUP_ID_NOT_FOUND)
            out["error_message"] = f"group {group_id} not found"
        return out
    stable = group.is_(GroupState.STABLE)
    out.update(
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol or "") if stable else "",
        members=[
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata_for(group.protocol) if stable else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ],
    )
    return out


async def describe_groups(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "groups": [_described(broker, ctx, g, req.version) for g in req.body.groups],
    }


async def delete_groups(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    names = list(req.body.groups_names)
    allowed = [n for n in names if _group_allowed(broker, ctx, n, Operation.DELETE)]
    results = broker.groups.delete_groups(allowed)
    return {
        "throttle_time_ms": 0,
        "results": [
            {
                "group_id": n,
                "error_code": int(results.get(n, ErrorCode.GROUP_AUTHORIZATION_FAILED)),
            }
            for n in names
        ],
    }


HANDLERS: Handlers = {
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.JOIN_GROUP: join_group,
    ApiKey.SYNC_GROUP: sync_group,
    ApiKey.HEARTBEAT: heartbeat,
    ApiKey.LEAVE_GROUP: leave_group,
    ApiKey.LIST_GROUPS: list_groups,
    ApiKey.DESCRIBE_GROUPS: describe_groups,
    ApiKey.DELETE_GROUPS: delete_groups,
}
