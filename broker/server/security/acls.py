"""ACLs as Kafka's StandardAuthorizer decides them (pure; no I/O).

An ACL binding is a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal,
host, operation, ALLOW or DENY). Deciding a request follows Kafka's
``StandardAuthorizerData`` rule for rule, because clients' and operators' ACLs are written
against it and must mean the same here:

- a super user (``super.users``) is allowed everything;
- the ACLs that apply to a resource are those of its type whose pattern matches its name:
  LITERAL with the same name, LITERAL ``*`` (the wildcard), or PREFIXED with a prefix of it;
- of those, an entry matches when its principal is the request's or ``User:*``, its host is
  the client's address or ``*``, and its operation is the request's or ``All``; an ALLOW entry
  for Read, Write, Delete or Alter also allows Describe, and AlterConfigs allows
  DescribeConfigs (DENY entries imply nothing: denying Read does not deny Describe);
- a matching DENY wins over any ALLOW; else a matching ALLOW allows;
- no ACL at all on the resource (for anyone) falls back to ``allow.everyone.if.no.acl.found``;
  ACLs on it that match someone else deny.

Filters (DescribeAcls, DeleteAcls) follow ``AclBindingFilter``: ANY matches every value, a null
name/principal/host matches every one, and pattern type MATCH matches every ACL that would
apply to the named resource (its literal, the wildcard, and every prefix).

The wire codes are Kafka's (``ResourceType``, ``PatternType``, ``AclOperation``,
``AclPermissionType``), so the CreateAcls/DescribeAcls/DeleteAcls handlers translate nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum

from .authorizer import Operation, RequestContext, ResourceType

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class AclResourceType(IntEnum):
    """Kafka's ``org.apache.kafka.common.resource.ResourceType`` codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """Kafka's ``org.apache.kafka.common.resource.PatternType`` codes."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """Kafka's ``org.apache.kafka.common.acl.AclOperation`` codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    """Kafka's ``org.apache.kafka.common.acl.AclPermissionType`` codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


RESOURCE_TYPES: dict[ResourceType, AclResourceType] = {
    ResourceType.TOPIC: AclResourceType.TOPIC,
    ResourceType.GROUP: AclResourceType.GROUP,
    ResourceType.CLUSTER: AclResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID: AclResourceType.TRANSACTIONAL_ID,
}
"""The handlers' resource types (``authorizer.ResourceType``) as Kafka's codes."""

OPERATIONS: dict[Operation, AclOperation] = {op: AclOperation[op.name] for op in Operation}
"""The handlers' operations as Kafka's codes (the names are the same)."""

_IMPLIES_DESCRIBE = frozenset(
    {
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    }
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


class InvalidAcl(ValueError):
    """An ACL CreateAcls must refuse (Kafka answers INVALID_REQUEST with this message)."""


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: which resources (type, name, pattern) and who may or may not do what."""

    resource_type: AclResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: Permission

    def applies_to(self, resource_type: AclResourceType, name: str) -> bool:
        """Whether this ACL's pattern covers resource ``name`` of ``resource_type``."""
        if self.resource_type is not resource_type:
            return False
        if self.pattern_type is PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type is PatternType.PREFIXED and name.startswith(self.resource_name)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DescribeAcls/DeleteAcls filter; ``None`` names, principals and hosts match any."""

    resource_type: AclResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: Permission

    def matches(self, acl: AclBinding) -> bool:
        """Whether ``acl`` is one this filter selects."""
        if (
            self.resource_type is not AclResourceType.ANY
            and acl.resource_type is not self.resource_type
        ):
            return False
        if not self._matches_pattern(acl):
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation is not AclOperation.ANY and acl.operation is not self.operation:
            return False
        return self.permission is Permission.ANY or acl.permission is self.permission

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.pattern_type is PatternType.MATCH:
            # every ACL that would apply to the named resource (Kafka's ResourcePatternFilter)
            return self.resource_name is None or acl.applies_to(
                acl.resource_type, self.resource_name
            )
        if self.pattern_type is not PatternType.ANY and acl.pattern_type is not self.pattern_type:
            return False
        return self.resource_name is None or acl.resource_name == self.resource_name


def check_filter(f: AclFilter) -> None:
    """Refuse a filter Kafka refuses (UNKNOWN anything): :class:`InvalidAcl`."""
    for field, value in (
        ("resourceType", f.resource_type),
        ("patternType", f.pattern_type),
        ("operation", f.operation),
        ("permissionType", f.permission),
    ):
        if value == 0:
            raise InvalidAcl(f"Invalid {field} UNKNOWN in the ACL filter")


def validate_new_acl(acl: AclBinding) -> None:
    """Refuse, as Kafka's ``AclControlManager.validateNewAcl`` does, an ACL that could not be
    enforced as written: :class:`InvalidAcl` with the reason."""
    if acl.resource_type in (AclResourceType.UNKNOWN, AclResourceType.ANY):
        raise InvalidAcl(f"Invalid resourceType {acl.resource_type.name}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {acl.pattern_type.name}")
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAcl(f"Invalid operation {acl.operation.name}")
    if acl.permission not in (Permission.DENY, Permission.ALLOW):
        raise InvalidAcl(f"Invalid permissionType {acl.permission.name}")
    if not acl.resource_name:
        raise InvalidAcl("Resource name should not be empty")
    kind, sep, name = acl.principal.partition(":")
    if not sep or not kind or not name:
        raise InvalidAcl(f"Could not parse principal from `{acl.principal}` (no colon is found)")
    if acl.resource_type is AclResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not acl.host:
        raise InvalidAcl("Host should not be empty; use * for any host")


def _entry_result(
    acl: AclBinding, principal: str, host: str, op: AclOperation
) -> Permission | None:
    """ALLOW or DENY if ``acl``'s entry matches the request, else None (Kafka's findResult)."""
    if acl.principal not in (principal, WILDCARD_PRINCIPAL):
        return None
    if acl.host not in (WILDCARD, host):
        return None
    if not _covers(acl, op):
        return None
    return acl.permission


def _covers(acl: AclBinding, op: AclOperation) -> bool:
    """Whether ``acl``'s operation covers ``op``: the same, ``All``, or -- for ALLOW only --
    one that implies Describe or DescribeConfigs."""
    if acl.operation is AclOperation.ALL or acl.operation is op:
        return True
    if acl.permission is not Permission.ALLOW:
        return False
    if op is AclOperation.DESCRIBE:
        return acl.operation in _IMPLIES_DESCRIBE
    return op is AclOperation.DESCRIBE_CONFIGS and acl.operation in _IMPLIES_DESCRIBE_CONFIGS


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    """``super.users`` (principals, ``;``-separated in Kafka's key) and
    ``allow.everyone.if.no.acl.found``."""

    super_users: frozenset[str] = frozenset()
    allow_if_no_acl: bool = False


def parse_super_users(value: str | None) -> frozenset[str]:
    """Kafka's ``super.users``: principals separated by ``;`` (``User:admin;User:operator``)."""
    if not value:
        return frozenset()
    users = frozenset(u.strip() for u in value.split(";") if u.strip())
    for user in users:
        if ":" not in user:
            raise ValueError(f"super.users entry {user!r} is not a principal (Type:name)")
    return users


class AclSet:
    """The ACLs in force, indexed by resource type and literal name so that deciding a
    request reads only the ACLs that could apply to it (the wildcard, its literal name, and
    the PREFIXED ones of its type), not every ACL of the cluster."""

    def __init__(self, acls: Iterable[AclBinding] = ()) -> None:
        self._all: set[AclBinding] = set()
        self._literal: dict[tuple[AclResourceType, str], set[AclBinding]] = {}
        self._prefixed: dict[AclResourceType, set[AclBinding]] = {}
        for acl in acls:
            self.add(acl)

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(sorted(self._all))

    def __contains__(self, acl: object) -> bool:
        return acl in self._all

    def add(self, acl: AclBinding) -> None:
        self._all.add(acl)
        if acl.pattern_type is PatternType.PREFIXED:
            self._prefixed.setdefault(acl.resource_type, set()).add(acl)
        else:
            self._literal.setdefault((acl.resource_type, acl.resource_name), set()).add(acl)

    def discard(self, acl: AclBinding) -> None:
        self._all.discard(acl)
        if acl.pattern_type is PatternType.PREFIXED:
            self._prefixed.get(acl.resource_type, set()).discard(acl)
        else:
            self._literal.get((acl.resource_type, acl.resource_name), set()).discard(acl)

    def candidates(self, resource_type: AclResourceType, name: str) -> Iterator[AclBinding]:
        """Every ACL that may apply to ``name`` (a superset; :func:`decide` checks each)."""
        yield from self._literal.get((resource_type, name), ())
        if name != WILDCARD:
            yield from self._literal.get((resource_type, WILDCARD), ())
        yield from self._prefixed.get(resource_type, ())

    def of_type(self, resource_type: AclResourceType) -> list[AclBinding]:
        return [acl for acl in self._all if acl.resource_type is resource_type]

    def matching(self, f: AclFilter) -> list[AclBinding]:
        """The ACLs ``f`` selects, in a stable order."""
        return [acl for acl in sorted(self._all) if f.matches(acl)]


ACL_RECORDS = "acls"
"""The kind of the metadata store's security records that hold ACLs."""


def acl_record(acl: AclBinding) -> tuple[str, bytes]:
    """The id and value of ``acl``'s record in the metadata store. The id is a hash of the
    binding, so the same ACL created twice (or by two brokers at once) is one record, as Kafka
    keeps one copy of an ACL however often it is created."""
    value = json.dumps(
        {
            "resource_type": acl.resource_type.name,
            "resource_name": acl.resource_name,
            "pattern_type": acl.pattern_type.name,
            "principal": acl.principal,
            "host": acl.host,
            "operation": acl.operation.name,
            "permission": acl.permission.name,
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    return hashlib.sha256(value).hexdigest()[:32], value


def acl_from_record(value: bytes) -> AclBinding:
    """The binding of an ACL record (:func:`acl_record`'s value)."""
    d = json.loads(value)
    return AclBinding(
        AclResourceType[d["resource_type"]],
        d["resource_name"],
        PatternType[d["pattern_type"]],
        d["principal"],
        d["host"],
        AclOperation[d["operation"]],
        Permission[d["permission"]],
    )


def acls_from_records(records: Mapping[str, bytes]) -> AclSet:
    """The ACLs in force, from the metadata store's ACL records."""
    return AclSet(acl_from_record(value) for value in records.values())


def decide(
    acls: Iterable[AclBinding],
    settings: AuthorizerSettings,
    *,
    principal: str,
    host: str,
    op: AclOperation,
    resource_type: AclResourceType,
    name: str,
) -> bool:
    """Whether ``principal`` from ``host`` may do ``op`` on resource ``name`` (see the module
    docstring for the rules, which are Kafka's)."""
    if principal in settings.super_users:
        return True
    any_acl = allowed = False
    for acl in acls:
        if not acl.applies_to(resource_type, name):
            continue
        any_acl = True
        result = _entry_result(acl, principal, host, op)
        if result is Permission.DENY:
            return False
        if result is Permission.ALLOW:
            allowed = True
    if allowed:
        return True
    return settings.allow_if_no_acl and not any_acl


def decide_any(
    acls: Iterable[AclBinding],
    settings: AuthorizerSettings,
    *,
    principal: str,
    host: str,
    op: AclOperation,
    resource_type: AclResourceType,
) -> bool:
    """Whether ``principal`` may do ``op`` on at least one resource of ``resource_type``: Kafka's
    ``Authorizer.authorizeByResourceType`` (an idempotent producer needs Write on some topic,
    not a particular one). A resource named like no real one decides super users and the
    no-ACL fallback; then an ALLOW pattern counts unless a DENY pattern covers it: the
    literal wildcard covers everything, a DENY prefix covers the literals and prefixes that
    start with it, a DENY literal only the same literal."""
    acls = [a for a in acls if a.resource_type is resource_type]
    probe = "\0spindle-probe"  # no topic, group or id can have this name
    if decide(
        acls,
        settings,
        principal=principal,
        host=host,
        op=op,
        resource_type=resource_type,
        name=probe,
    ):
        return True
    allow: list[AclBinding] = []
    deny_literal: set[str] = set()
    deny_prefix: list[str] = []
    for acl in acls:
        if not _names(acl, principal, host, op):
            continue
        if acl.permission is Permission.ALLOW:
            allow.append(acl)
        elif acl.pattern_type is PatternType.PREFIXED:
            deny_prefix.append(acl.resource_name)
        else:
            deny_literal.add(acl.resource_name)
    if WILDCARD in deny_literal:
        return False
    for acl in allow:
        name = acl.resource_name
        if any(name.startswith(p) for p in deny_prefix):
            continue
        if acl.pattern_type is PatternType.PREFIXED or name not in deny_literal:
            return True
    return False


def _names(acl: AclBinding, principal: str, host: str, op: AclOperation) -> bool:
    """Whether ``acl``'s entry names this principal, host and operation (no implications)."""
    return (
        acl.principal in (principal, WILDCARD_PRINCIPAL)
        and acl.host in (WILDCARD, host)
        and acl.operation in (op, AclOperation.ALL)
    )


class StandardAuthorizer:
    """The authorizer over the ACLs in force (``authorizer.class.name`` set): what every
    handler asks through :class:`~.authorizer.Authorizer`. The metadata watch replaces
    :attr:`acls` as ACL records change; deciding reads no I/O."""

    def __init__(self, settings: AuthorizerSettings, acls: AclSet | None = None) -> None:
        self.settings = settings
        self.acls = acls if acls is not None else AclSet()

    def authorize(
        self, ctx: RequestContext, op: Operation, resource: ResourceType, name: str
    ) -> bool:
        rtype = RESOURCE_TYPES[resource]
        return decide(
            self.acls.candidates(rtype, name),
            self.settings,
            principal=ctx.principal,
            host=_host(ctx.client_address),
            op=OPERATIONS[op],
            resource_type=rtype,
            name=name,
        )

    def authorize_any(self, ctx: RequestContext, op: Operation, resource: ResourceType) -> bool:
        rtype = RESOURCE_TYPES[resource]
        return decide_any(
            self.acls.of_type(rtype),
            self.settings,
            principal=ctx.principal,
            host=_host(ctx.client_address),
            op=OPERATIONS[op],
            resource_type=rtype,
        )


def _host(client_address: str) -> str:
    """The client's IP address from ``host:port`` (``[v6]:port`` too), as ACL hosts name it."""
    host, sep, port = client_address.rpartition(":")
    if not sep or not port.isdigit():
        return client_address
    return host.strip("[]")
