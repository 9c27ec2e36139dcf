"""Kafka's StandardAuthorizer rules, decision by decision (``security.acls``, pure).

Each case is a rule Kafka's ``StandardAuthorizerData`` applies; the ACLs users write for Kafka
must mean the same here."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spindle.broker.server.security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclResourceType,
    AclSet,
    AuthorizerSettings,
    InvalidAcl,
    PatternType,
    Permission,
    StandardAuthorizer,
    decide,
    decide_any,
    parse_super_users,
    validate_new_acl,
)
from spindle.broker.server.security.authorizer import Operation, RequestContext, ResourceType

T = AclResourceType.TOPIC
G = AclResourceType.GROUP
LIT = PatternType.LITERAL
PRE = PatternType.PREFIXED
ALLOW = Permission.ALLOW
DENY = Permission.DENY
OP = AclOperation
CLOSED = AuthorizerSettings()


def acl(
    name: str = "orders",
    *,
    rtype: AclResourceType = T,
    pattern: PatternType = LIT,
    principal: str = "User:alice",
    host: str = "*",
    op: AclOperation = OP.READ,
    perm: Permission = ALLOW,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def allowed(
    acls: list[AclBinding],
    *,
    principal: str = "User:alice",
    host: str = "10.0.0.1",
    op: AclOperation = OP.READ,
    rtype: AclResourceType = T,
    name: str = "orders",
    settings: AuthorizerSettings = CLOSED,
) -> bool:
    return decide(
        acls, settings, principal=principal, host=host, op=op, resource_type=rtype, name=name
    )


def test_a_literal_allow_allows_its_principal_its_operation_on_its_resource_only() -> None:
    acls = [acl()]
    assert allowed(acls)
    assert not allowed(acls, principal="User:bob")
    assert not allowed(acls, op=OP.WRITE)
    assert not allowed(acls, name="payments")
    assert not allowed(acls, rtype=G)


def test_deny_beats_allow_whatever_the_order() -> None:
    both = [acl(perm=ALLOW), acl(perm=DENY)]
    assert not allowed(both)
    assert not allowed(list(reversed(both)))


def test_a_wildcard_principal_or_host_or_resource_matches_everyone() -> None:
    assert allowed([acl(principal="User:*")], principal="User:bob")
    assert allowed([acl(host="*")], host="192.168.1.9")
    assert allowed([acl("*")], name="anything")


def test_a_host_acl_matches_only_that_address() -> None:
    acls = [acl(host="10.0.0.1")]
    assert allowed(acls, host="10.0.0.1")
    assert not allowed(acls, host="10.0.0.2")


def test_prefixed_acls_cover_every_name_with_the_prefix_and_literal_ones_only_theirs() -> None:
    prefixed = [acl("ord", pattern=PRE)]
    assert allowed(prefixed, name="orders")
    assert allowed(prefixed, name="ord")
    assert not allowed(prefixed, name="or")
    literal_prefix = [acl("ord", pattern=LIT)]
    assert not allowed(literal_prefix, name="orders")


def test_allow_read_write_delete_alter_imply_describe_but_deny_read_does_not_deny_it() -> None:
    for op in (OP.READ, OP.WRITE, OP.DELETE, OP.ALTER):
        assert allowed([acl(op=op)], op=OP.DESCRIBE), op
    assert not allowed([acl(op=OP.CREATE)], op=OP.DESCRIBE)
    assert allowed([acl(op=OP.DESCRIBE), acl(op=OP.READ, perm=DENY)], op=OP.DESCRIBE)
    assert not allowed([acl(op=OP.DESCRIBE), acl(op=OP.READ, perm=DENY)], op=OP.READ)


def test_alter_configs_implies_describe_configs() -> None:
    assert allowed([acl(op=OP.ALTER_CONFIGS)], op=OP.DESCRIBE_CONFIGS)
    assert not allowed([acl(op=OP.DESCRIBE_CONFIGS)], op=OP.ALTER_CONFIGS)


def test_all_allows_or_denies_every_operation() -> None:
    for op in (OP.READ, OP.WRITE, OP.ALTER_CONFIGS, OP.DESCRIBE):
        assert allowed([acl(op=OP.ALL)], op=op)
        assert not allowed([acl(op=OP.READ), acl(op=OP.ALL, perm=DENY)], op=op)


def test_no_acl_on_a_resource_falls_back_to_allow_everyone_if_no_acl_found() -> None:
    open_ = AuthorizerSettings(allow_if_no_acl=True)
    assert allowed([], settings=open_)
    assert not allowed([])
    # an ACL on the resource for someone else means "not you", even with the fallback on
    assert not allowed([acl(principal="User:bob")], settings=open_)
    # ... but an ACL on another resource does not count
    assert allowed([acl("payments", principal="User:bob")], settings=open_)


def test_super_users_are_allowed_everything_even_against_a_deny() -> None:
    settings = AuthorizerSettings(super_users=parse_super_users("User:admin; User:operator"))
    assert allowed(
        [acl(principal="User:admin", perm=DENY, op=OP.ALL)],
        principal="User:admin",
        settings=settings,
    )
    assert allowed([], principal="User:operator", op=OP.ALTER, settings=settings)


def test_super_users_must_be_principals() -> None:
    with pytest.raises(ValueError, match="not a principal"):
        parse_super_users("admin")


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (acl(rtype=AclResourceType.ANY), "Invalid resourceType ANY"),
        (acl(pattern=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl(op=OP.ANY), "Invalid operation ANY"),
        (acl(perm=Permission.ANY), "Invalid permissionType ANY"),
        (acl(""), "Resource name should not be empty"),
        (acl(principal="alice"), "Could not parse principal"),
        (acl("other", rtype=AclResourceType.CLUSTER), "kafka-cluster"),
    ],
)
def test_create_refuses_acls_kafka_refuses_with_the_reason(
    binding: AclBinding, message: str
) -> None:
    with pytest.raises(InvalidAcl, match=message):
        validate_new_acl(binding)


def test_a_match_filter_selects_every_acl_that_applies_to_the_named_resource() -> None:
    acls = AclSet(
        [acl("orders"), acl("*"), acl("ord", pattern=PRE), acl("payments"), acl("orders-x")]
    )
    f = AclFilter(T, "orders", PatternType.MATCH, None, None, OP.ANY, Permission.ANY)
    assert {a.resource_name for a in acls.matching(f)} == {"orders", "*", "ord"}


def test_a_literal_filter_selects_exactly_its_name_and_any_selects_all() -> None:
    acls = AclSet([acl("orders"), acl("*"), acl("orders", pattern=PRE)])
    lit = AclFilter(T, "orders", LIT, None, None, OP.ANY, Permission.ANY)
    assert acls.matching(lit) == [acl("orders")]
    anything = AclFilter(
        AclResourceType.ANY, None, PatternType.ANY, None, None, OP.ANY, Permission.ANY
    )
    assert len(acls.matching(anything)) == 3
    by_principal = AclFilter(T, None, PatternType.ANY, "User:bob", None, OP.ANY, Permission.ANY)
    assert acls.matching(by_principal) == []


def test_the_authorizer_reads_the_client_address_and_the_handlers_names() -> None:
    authz = StandardAuthorizer(AuthorizerSettings(), AclSet([acl(host="10.1.2.3")]))
    ctx = RequestContext("User:alice", "c", "10.1.2.3:51234", "INTERNAL")
    assert authz.authorize(ctx, Operation.READ, ResourceType.TOPIC, "orders")
    assert authz.authorize(ctx, Operation.DESCRIBE, ResourceType.TOPIC, "orders")
    assert not authz.authorize(ctx, Operation.WRITE, ResourceType.TOPIC, "orders")
    other = RequestContext("User:alice", "c", "10.1.2.4:51234", "INTERNAL")
    assert not authz.authorize(other, Operation.READ, ResourceType.TOPIC, "orders")


names = st.text(alphabet="abo*-", min_size=1, max_size=5)
bindings = st.builds(
    AclBinding,
    st.sampled_from([T, G]),
    names,
    st.sampled_from([LIT, PRE]),
    st.sampled_from(["User:alice", "User:bob", "User:*"]),
    st.sampled_from(["*", "10.0.0.1"]),
    st.sampled_from([OP.READ, OP.WRITE, OP.DESCRIBE, OP.ALL]),
    st.sampled_from([ALLOW, DENY]),
)


@given(
    st.lists(bindings, max_size=12), names, st.sampled_from([OP.READ, OP.DESCRIBE]), st.booleans()
)
def test_the_index_decides_as_a_scan_of_every_acl(
    acls: list[AclBinding], name: str, op: AclOperation, fallback: bool
) -> None:
    """The indexed candidates lose no ACL that applies: same answer as deciding over all."""
    settings = AuthorizerSettings(allow_if_no_acl=fallback)
    indexed = AclSet(acls)
    for principal in ("User:alice", "User:bob"):
        kwargs = dict(principal=principal, host="10.0.0.1", op=op, resource_type=T, name=name)
        assert decide(indexed.candidates(T, name), settings, **kwargs) == decide(  # type: ignore[arg-type]
            acls,
            settings,
            **kwargs,  # type: ignore[arg-type]
        )


def any_allowed(acls: list[AclBinding], settings: AuthorizerSettings = CLOSED) -> bool:
    return decide_any(
        acls, settings, principal="User:alice", host="10.0.0.1", op=OP.WRITE, resource_type=T
    )


def test_write_on_some_topic_is_an_allow_no_deny_pattern_covers() -> None:
    """Kafka's authorizeByResourceType, which lets an idempotent producer start."""
    assert any_allowed([acl("a", op=OP.WRITE)])
    assert not any_allowed([acl("a", op=OP.READ)])
    assert not any_allowed([acl("a", op=OP.WRITE), acl("a", op=OP.WRITE, perm=DENY, pattern=PRE)])
    assert any_allowed([acl("or", op=OP.WRITE, pattern=PRE), acl("orders", op=OP.WRITE, perm=DENY)])
    assert not any_allowed([acl("or", op=OP.WRITE, pattern=PRE), acl("*", op=OP.ALL, perm=DENY)])
    assert not any_allowed([])
    assert any_allowed([], AuthorizerSettings(allow_if_no_acl=True))
    assert any_allowed([], AuthorizerSettings(super_users=frozenset({"User:alice"})))
