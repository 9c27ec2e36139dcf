"""ACLs on a real broker through kafka-python's admin client: CreateAcls, DescribeAcls and
DeleteAcls as Kafka answers them, and the ACLs enforced on the next request.

Every connection here is PLAINTEXT, so its principal is ``User:ANONYMOUS``; the ACLs name that
principal (SASL users come with the SASL listeners)."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import SecurityDisabledError, TopicAuthorizationFailedError
from spindle.broker.server.config import ConfigError, settings_from_properties

from .cluster import running
from .conftest import CACHE_BIN, Broker, Etcd, make_broker

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ME = "User:ANONYMOUS"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Broker]:
    """A broker with Kafka's StandardAuthorizer; resources no ACL names stay open
    (``allow.everyone.if.no.acl.found``), so the tests can manage ACLs as ANONYMOUS."""
    broker = make_broker(
        tmp_path_factory.mktemp("acl-broker"),
        etcd,
        extra={"authorizer.class.name": STANDARD, "allow.everyone.if.no.acl.found": "true"},
    )
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def admin(acl_broker: Broker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=acl_broker.bootstrap, client_id="acl-admin")
    yield client
    client.close()


def _topic() -> str:
    return f"acl-{uuid.uuid4().hex[:10]}"


def _topic_acl(
    name: str,
    op: ACLOperation,
    perm: ACLPermissionType,
    *,
    prefixed: bool = False,
    principal: str = ME,
) -> ACL:
    pattern = ACLResourcePatternType.PREFIXED if prefixed else ACLResourcePatternType.LITERAL
    return ACL(principal, "*", op, perm, ResourcePattern(ResourceType.TOPIC, name, pattern))


def _topic_filter(name: str | None) -> ACLFilter:
    return ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(
            ResourceType.TOPIC, name, ACLResourcePatternType.ANY
        ),
    )


def test_created_acls_are_described_by_filter_and_deleted(admin: KafkaAdminClient) -> None:
    name = _topic()
    read = _topic_acl(name, ACLOperation.READ, ACLPermissionType.ALLOW)
    prefixed = _topic_acl(name[:6], ACLOperation.WRITE, ACLPermissionType.DENY, prefixed=True)
    result = admin.create_acls([read, prefixed])
    assert result["failed"] == []
    assert len(result["succeeded"]) == 2

    # the same ACL again is one ACL, as in Kafka
    admin.create_acls([read])
    described, error = admin.describe_acls(_topic_filter(name))
    assert error.errno == 0
    assert [
        (a.operation, a.permission_type, a.resource_pattern.resource_name) for a in described
    ] == [(ACLOperation.READ, ACLPermissionType.ALLOW, name)]
    match = ACLFilter(
        None,
        None,
        ACLOperation.ANY,
        ACLPermissionType.ANY,
        ResourcePatternFilter(ResourceType.TOPIC, name, ACLResourcePatternType.MATCH),
    )
    described, _ = admin.describe_acls(match)
    assert {a.resource_pattern.resource_name for a in described} == {name, name[:6]}

    deleted = admin.delete_acls([match])
    ((_, matched, err),) = deleted
    assert err.errno == 0
    assert len(matched) == 2
    described, _ = admin.describe_acls(match)
    assert described == []


def test_a_deny_acl_refuses_the_next_produce_and_nothing_is_written(
    admin: KafkaAdminClient, acl_broker: Broker
) -> None:
    name = _topic()
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    producer = KafkaProducer(bootstrap_servers=acl_broker.bootstrap, retries=0, acks="all")
    try:
        producer.send(name, b"before").get(timeout=15)
        admin.create_acls([_topic_acl(name, ACLOperation.WRITE, ACLPermissionType.DENY)])
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(name, b"refused").get(timeout=15)
        admin.delete_acls([_topic_filter(name)])
        meta = producer.send(name, b"after").get(timeout=15)
    finally:
        producer.close()
    # the refused record took no offset: "before" is 0, "after" is 1
    assert meta.offset == 1


def test_an_allow_acl_for_someone_else_closes_a_resource_to_everyone_else(
    admin: KafkaAdminClient, acl_broker: Broker
) -> None:
    """``allow.everyone.if.no.acl.found`` covers only resources no ACL names."""
    name = _topic()
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    admin.create_acls(
        [_topic_acl(name, ACLOperation.WRITE, ACLPermissionType.ALLOW, principal="User:alice")]
    )
    producer = KafkaProducer(bootstrap_servers=acl_broker.bootstrap, retries=0)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(name, b"x").get(timeout=15)
    finally:
        producer.close()
        admin.delete_acls([_topic_filter(name)])


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(
    tmp_path: Path, etcd: Etcd
) -> None:
    broker = make_broker(tmp_path, etcd)
    broker.start()
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        with pytest.raises(SecurityDisabledError):
            client.describe_acls(_topic_filter(None))
    finally:
        client.close()
        broker.stop()


def test_an_unknown_authorizer_class_is_refused_with_the_reason() -> None:
    """A broker that accepted an authorizer it does not have would allow everything."""
    props = {"node.id": "1", "log.dirs": "/tmp/unused", "authorizer.class.name": "com.example.Mine"}
    with pytest.raises(ConfigError, match=r"authorizer 'com\.example\.Mine' is not available"):
        settings_from_properties(props)
    broker, _ = settings_from_properties({**props, "authorizer.class.name": STANDARD})
    assert broker.acls_enabled


def test_metadata_lists_only_the_topics_the_principal_may_describe(
    admin: KafkaAdminClient,
) -> None:
    hidden, shown = _topic(), _topic()
    admin.create_topics(
        [NewTopic(n, num_partitions=1, replication_factor=1) for n in (hidden, shown)]
    )
    admin.create_acls([_topic_acl(hidden, ACLOperation.DESCRIBE, ACLPermissionType.DENY)])
    try:
        listed = admin.list_topics()
        assert shown in listed
        assert hidden not in listed
        (described,) = admin.describe_topics([hidden])
        assert described["error_code"] == TopicAuthorizationFailedError.errno
        assert described["partitions"] == []
    finally:
        admin.delete_acls([_topic_filter(hidden)])
    assert hidden in admin.list_topics()


def _kafka_acls(broker: Broker, *args: str) -> str:
    tool = shutil.which("kafka-acls") or str(CACHE_BIN / "kafka-acls")
    if not Path(tool).exists():
        pytest.fail("kafka-acls is missing: run ./dev sync (scripts/install.d/30-kafka-jars.sh)")
    proc = subprocess.run(
        [tool, "--bootstrap-server", broker.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (
        f"kafka-acls failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    return proc.stdout


@pytest.mark.slow
def test_kafka_acls_adds_lists_and_removes_a_consumers_acls(acl_broker: Broker) -> None:
    """Apache Kafka's own ``kafka-acls`` (its --consumer shortcut: Read and Describe on the
    topic, Read on the group), then --list by principal and --remove."""
    topic = _topic()
    _kafka_acls(
        acl_broker,
        "--add",
        "--allow-principal",
        "User:alice",
        "--consumer",
        "--topic",
        topic,
        "--group",
        "billing",
    )
    listed = _kafka_acls(acl_broker, "--list", "--principal", "User:alice")
    assert f"name={topic}, patternType=LITERAL" in listed
    assert "name=billing, patternType=LITERAL" in listed
    assert "operation=READ, permissionType=ALLOW" in listed
    assert "operation=DESCRIBE, permissionType=ALLOW" in listed
    _kafka_acls(
        acl_broker,
        "--remove",
        "--force",
        "--allow-principal",
        "User:alice",
        "--consumer",
        "--topic",
        topic,
        "--group",
        "billing",
    )
    listed = _kafka_acls(acl_broker, "--list", "--principal", "User:alice")
    assert topic not in listed


@pytest.mark.slow
def test_an_acl_created_through_one_broker_is_enforced_by_another_within_a_second(
    tmp_path: Path, etcd: Etcd
) -> None:
    settings = {"authorizer.class.name": STANDARD, "allow.everyone.if.no.acl.found": "true"}
    with running(tmp_path, etcd, nodes=2, extra=settings) as cluster:
        one = KafkaAdminClient(bootstrap_servers=cluster.bootstrap([1]))
        two = KafkaAdminClient(bootstrap_servers=cluster.bootstrap([2]))
        try:
            name = _topic()
            one.create_topics([NewTopic(name, num_partitions=1, replication_factor=2)])
            assert name in two.list_topics()
            one.create_acls([_topic_acl(name, ACLOperation.DESCRIBE, ACLPermissionType.DENY)])
            written = time.monotonic()
            while name in two.list_topics():
                assert time.monotonic() - written < 1.0, "broker 2 still shows the topic after 1 s"
                time.sleep(0.02)
            described, _ = two.describe_acls(_topic_filter(name))
            assert [a.permission_type for a in described] == [ACLPermissionType.DENY]
        finally:
            one.close()
            two.close()
