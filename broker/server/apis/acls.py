"""ACL APIs: DescribeAcls (29), CreateAcls (30), DeleteAcls (31), as ``kafka-acls`` and the
admin clients use them.

ACLs are records in the metadata store (``security/acls/<id>``); every broker's watch turns
them into the authorizer's :class:`~..security.acls.AclSet`, so an ACL written through any
broker takes effect on all of them. This family only translates: the rules are
:mod:`..security.acls`'. Kafka's permissions: DescribeAcls needs Describe on the cluster,
CreateAcls and DeleteAcls need Alter on it. Without an authorizer (``authorizer.class.name``
empty) the three answer SECURITY_DISABLED, as Kafka does, rather than store ACLs nothing
would enforce.
"""

from __future__ import annotations

from typing import Any

from spindle.broker.common.errors import ErrorCode
from spindle.broker.protocol.apis import ApiKey, Request

from ..security.acls import (
    ACL_RECORDS,
    AclBinding,
    AclFilter,
    AclOperation,
    AclResourceType,
    InvalidAcl,
    PatternType,
    Permission,
    StandardAuthorizer,
    acl_record,
    acls_from_records,
    check_filter,
    validate_new_acl,
)
from ..security.authorizer import Operation, RequestContext
from .base import ApiContext, Handlers, error_of

_NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _enum(kind: type[Any], code: int) -> Any:
    """``kind(code)``, or its UNKNOWN member for a code Kafka does not define (refused later
    with Kafka's message rather than as a parse failure)."""
    try:
        return kind(code)
    except ValueError:
        return kind.UNKNOWN


def _filter(f: Any) -> AclFilter:
    return AclFilter(
        _enum(AclResourceType, f.resource_type_filter),
        f.resource_name_filter,
        _enum(PatternType, f.pattern_type_filter),
        f.principal_filter,
        f.host_filter,
        _enum(AclOperation, f.operation),
        _enum(Permission, f.permission_type),
    )


def _binding(c: Any) -> AclBinding:
    return AclBinding(
        _enum(AclResourceType, c.resource_type),
        c.resource_name,
        _enum(PatternType, c.resource_pattern_type),
        c.principal,
        c.host,
        _enum(AclOperation, c.operation),
        _enum(Permission, c.permission_type),
    )


def _acls(broker: ApiContext) -> Any:
    return acls_from_records(broker.controller.store.security.get(ACL_RECORDS, {}))


def _refresh(broker: ApiContext) -> None:
    """This broker's authorizer sees its own write at once (the others through the watch)."""
    if isinstance(broker.authorizer, StandardAuthorizer):
        broker.authorizer.acls = _acls(broker)


def _refusal(broker: ApiContext, ctx: RequestContext, op: Operation) -> tuple[int, str] | None:
    if not broker.settings.acls_enabled:
        return int(ErrorCode.SECURITY_DISABLED), _NO_AUTHORIZER
    if not broker.allowed_on_cluster(ctx, op):
        return int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "not allowed to manage ACLs"
    return None


async def describe_acls(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    answer: dict[str, Any] = {"throttle_time_ms": 0, "resources": []}
    refused = _refusal(broker, ctx, Operation.DESCRIBE)
    if refused is not None:
        return {**answer, "error_code": refused[0], "error_message": refused[1]}
    f = _filter(req.body)
    try:
        check_filter(f)
    except InvalidAcl as exc:
        return {**answer, "error_code": int(ErrorCode.INVALID_REQUEST), "error_message": str(exc)}
    by_resource: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for acl in _acls(broker).matching(f):
        by_resource.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            {
                "principal": acl.principal,
                "host": acl.host,
                "operation": int(acl.operation),
                "permission_type": int(acl.permission),
            }
        )
    answer["resources"] = [
        {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": entries}
        for (t, n, p), entries in sorted(by_resource.items())
    ]
    return {**answer, "error_code": 0, "error_message": None}


async def create_acls(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    creations = list(req.body.creations)
    refused = _refusal(broker, ctx, Operation.ALTER)
    if refused is not None:
        result = {"error_code": refused[0], "error_message": refused[1]}
        return {"throttle_time_ms": 0, "results": [dict(result) for _ in creations]}
    results: list[dict[str, Any]] = []
    records: dict[str, bytes] = {}
    for c in creations:
        try:
            acl = _binding(c)
            validate_new_acl(acl)
        except InvalidAcl as exc:
            results.append(
                {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": str(exc)}
            )
            continue
        record_id, value = acl_record(acl)
        records[record_id] = value
        results.append({"error_code": 0, "error_message": None})
    if records:
        try:
            await broker.controller.store.put_security_records(ACL_RECORDS, records)
        except Exception as exc:
            code, msg = error_of(exc)
            results = [
                r if r["error_code"] else {"error_code": code, "error_message": msg}
                for r in results
            ]
        _refresh(broker)
    return {"throttle_time_ms": 0, "results": results}


def _matching_acl(acl: AclBinding, code: int = 0, msg: str | None = None) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": msg,
        "resource_type": int(acl.resource_type),
        "resource_name": acl.resource_name,
        "pattern_type": int(acl.pattern_type),
        "principal": acl.principal,
        "host": acl.host,
        "operation": int(acl.operation),
        "permission_type": int(acl.permission),
    }


async def delete_acls(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    filters = list(req.body.filters)
    refused = _refusal(broker, ctx, Operation.ALTER)
    if refused is not None:
        result = {"error_code": refused[0], "error_message": refused[1], "matching_acls": []}
        return {"throttle_time_ms": 0, "filter_results": [dict(result) for _ in filters]}
    acls = _acls(broker)
    matched: list[list[AclBinding] | tuple[int, str]] = []
    doomed: set[str] = set()
    for raw in filters:
        f = _filter(raw)
        try:
            check_filter(f)
        except InvalidAcl as exc:
            matched.append((int(ErrorCode.INVALID_REQUEST), str(exc)))
            continue
        found = acls.matching(f)
        matched.append(found)
        doomed.update(acl_record(acl)[0] for acl in found)
    failure: tuple[int, str] | None = None
    if doomed:
        try:
            await broker.controller.store.put_security_records(ACL_RECORDS, {}, frozenset(doomed))
        except Exception as exc:
            failure = error_of(exc)
        _refresh(broker)
    results = []
    for m in matched:
        if isinstance(m, tuple):
            results.append({"error_code": m[0], "error_message": m[1], "matching_acls": []})
            continue
        entries = [_matching_acl(acl, *(failure or (0, None))) for acl in m]
        results.append({"error_code": 0, "error_message": None, "matching_acls": entries})
    return {"throttle_time_ms": 0, "filter_results": results}


HANDLERS: Handlers = {
    ApiKey.DESCRIBE_ACLS: describe_acls,
    ApiKey.CREATE_ACLS: create_acls,
    ApiKey.DELETE_ACLS: delete_acls,
}
