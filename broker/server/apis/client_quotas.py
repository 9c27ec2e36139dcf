"""Client quota APIs: DescribeClientQuotas (48) and AlterClientQuotas (49), as
``kafka-configs --entity-type users|clients|ips`` uses them.

Quotas are records in the metadata store (``security/quotas/<id>``, one per entity), read by
every broker from its metadata view; the rules (entities, keys, precedence, rates) are
:mod:`..quotas`'. Kafka's permissions: DescribeConfigs on the cluster to describe, AlterConfigs
on it to alter.
"""

from __future__ import annotations

from typing import Any

from spindle.broker.common.errors import ErrorCode
from spindle.broker.protocol.apis import ApiKey, Request

from ..quotas import (
    QUOTA_RECORDS,
    Component,
    Entity,
    InvalidQuota,
    apply_ops,
    check_value,
    describe,
    entity_of,
    quota_record,
    quotas_from_records,
)
from ..security.authorizer import Operation, RequestContext
from .base import ApiContext, Handlers, error_of


def _quotas(broker: ApiContext) -> dict[Entity, dict[str, float]]:
    return quotas_from_records(broker.controller.store.security.get(QUOTA_RECORDS, {}))


def _entity_out(entity: Entity) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity]


async def describe_client_quotas(
    broker: ApiContext, ctx: RequestContext, req: Request
) -> dict[str, Any]:
    answer: dict[str, Any] = {"throttle_time_ms": 0, "entries": None}
    if not broker.allowed_on_cluster(ctx, Operation.DESCRIBE_CONFIGS):
        code = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return {**answer, "error_code": code, "error_message": "not allowed to describe quotas"}
    components = [Component(c.entity_type, c.match_type, c.match) for c in req.body.components]
    try:
        found = describe(_quotas(broker), components, bool(req.body.strict))
    except InvalidQuota as exc:
        return {**answer, "error_code": int(ErrorCode.INVALID_REQUEST), "error_message": str(exc)}
    answer["entries"] = [
        {
            "entity": _entity_out(entity),
            "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
        }
        for entity, values in found
    ]
    return {**answer, "error_code": 0, "error_message": None}


def _checked(e: Any) -> tuple[Entity, list[tuple[str, float, bool]]]:
    """One AlterClientQuotas entry's entity and ops, refused as Kafka refuses them."""
    entity = entity_of((p.entity_type, p.entity_name) for p in e.entity)
    ops = [(op.key, float(op.value), bool(op.remove)) for op in e.ops]
    for key, value, remove in ops:
        if not remove:
            check_value(entity, key, value)
    return entity, ops


async def alter_client_quotas(
    broker: ApiContext, ctx: RequestContext, req: Request
) -> dict[str, Any]:
    entries = list(req.body.entries)
    results: list[dict[str, Any]] = []
    if not broker.allowed_on_cluster(ctx, Operation.ALTER_CONFIGS):
        code = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        for e in entries:
            raw = [{"entity_type": p.entity_type, "entity_name": p.entity_name} for p in e.entity]
            results.append({"error_code": code, "error_message": "not allowed", "entity": raw})
        return {"throttle_time_ms": 0, "entries": results}
    current = _quotas(broker)
    puts: dict[str, bytes] = {}
    deletes: set[str] = set()
    for e in entries:
        raw = [{"entity_type": p.entity_type, "entity_name": p.entity_name} for p in e.entity]
        result: dict[str, Any] = {"error_code": 0, "error_message": None, "entity": raw}
        results.append(result)
        try:
            entity, ops = _checked(e)
        except InvalidQuota as exc:
            result.update(error_code=int(ErrorCode.INVALID_REQUEST), error_message=str(exc))
            continue
        values = apply_ops(current.get(entity, {}), ops)
        current[entity] = values
        record_id, value = quota_record(entity, values)
        if values:
            puts[record_id] = value
            deletes.discard(record_id)
        else:
            puts.pop(record_id, None)
            deletes.add(record_id)
    if not req.body.validate_only and (puts or deletes):
        try:
            await broker.controller.store.put_security_records(
                QUOTA_RECORDS, puts, frozenset(deletes)
            )
        except Exception as exc:
            code, msg = error_of(exc)
            for r in results:
                if not r["error_code"]:
                    r.update(error_code=code, error_message=msg)
        # this broker enforces its own write at once (the others through the watch)
        broker.client_quotas.set_quotas(broker.controller.store.security.get(QUOTA_RECORDS, {}))
    return {"throttle_time_ms": 0, "entries": results}


HANDLERS: Handlers = {
    ApiKey.DESCRIBE_CLIENT_QUOTAS: describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: alter_client_quotas,
}
