"""The JBOD admin APIs through kafka-python's admin client: DescribeLogDirs shows every
directory and replica, AlterReplicaLogDirs moves a partition while a producer keeps writing,
and every message is consumed exactly once, in order, afterwards. Plus the dynamic throttle
config and DescribeCluster."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.structs import TopicPartitionReplica

from .conftest import Broker


@pytest.fixture
def admin(module_broker: Broker):  # type: ignore[no-untyped-def]
    client = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap, client_id="log-dirs-admin")
    yield client
    client.close()


def _placement(admin, broker: Broker, topic: str) -> dict[tuple[int, bool], str]:  # type: ignore[no-untyped-def]
    """(partition, is_future) -> log dir, from DescribeLogDirs."""
    out = {}
    for entry in admin.describe_log_dirs():
        for d in entry["log_dirs"]:
            assert d["error_code"] == 0
            for t in d["topics"]:
                if t["name"] == topic:
                    for p in t["partitions"]:
                        out[(p["partition_index"], p["is_future_key"])] = d["log_dir"]
    return out


def test_describe_log_dirs_lists_every_dir_with_bytes(admin, module_broker: Broker) -> None:  # type: ignore[no-untyped-def]
    topic = f"d-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=1)])
    result = admin.describe_log_dirs()
    assert [r["broker"] for r in result] == [module_broker.node_id]
    dirs = result[0]["log_dirs"]
    assert sorted(d["log_dir"] for d in dirs) == sorted(module_broker.log_dirs)
    for d in dirs:
        assert d["total_bytes"] > 0
        assert 0 < d["usable_bytes"] <= d["total_bytes"]
    placed = _placement(admin, module_broker, topic)
    assert sorted(p for p, fut in placed if not fut) == list(range(6))
    # Placement spreads new replicas over the directories.
    assert len(set(placed.values())) == 3


def test_move_while_producing_keeps_every_message_once_in_order(
    admin, module_broker: Broker
) -> None:  # type: ignore[no-untyped-def]
    topic = f"m-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap, acks="all", linger_ms=2)
    stop = threading.Event()
    acked: list[int] = []
    errors: list[BaseException] = []

    def produce() -> None:
        i = 0
        try:
            while not stop.is_set() or i < 2000:
                producer.send(topic, value=f"{i:08d}".encode() + b"." * 200, partition=0).get(
                    timeout=30
                )
                acked.append(i)
                i += 1
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        while len(acked) < 500:
            time.sleep(0.05)
        src = _placement(admin, module_broker, topic)[(0, False)]
        dest = next(d for d in module_broker.log_dirs if d != src)
        result = admin.alter_replica_log_dirs(
            {TopicPartitionReplica(topic, 0, module_broker.node_id): dest}
        )
        assert [e.__name__ for e in result.values()] == ["NoError"]
        deadline = time.monotonic() + 120
        while True:
            placed = _placement(admin, module_broker, topic)
            if placed == {(0, False): dest}:
                break
            assert time.monotonic() < deadline, f"move did not finish: {placed}"
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(120)
        producer.close()
    assert not errors, errors
    consumer = KafkaConsumer(
        bootstrap_servers=module_broker.bootstrap,
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got = []
    for msg in consumer:
        got.append(int(msg.value[:8]))
        if len(got) >= len(acked):
            break
    consumer.close()
    assert got == acked
    # The controller's metadata follows the move (AssignReplicasToDirs).
    dest_id = next(
        line.split("=", 1)[1]
        for line in (Path(dest) / "meta.properties").read_text().splitlines()
        if line.startswith("directory.id=")
    )
    deadline = time.monotonic() + 30
    while module_broker.metadata_dirs(topic) != [dest_id]:
        assert time.monotonic() < deadline, module_broker.metadata_dirs(topic)
        time.sleep(0.2)


def test_alter_replica_log_dirs_error_table(admin, module_broker: Broker) -> None:  # type: ignore[no-untyped-def]
    topic = f"e-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    node = module_broker.node_id
    result = admin.alter_replica_log_dirs(
        {
            TopicPartitionReplica(topic, 0, node): "/not/a/configured/dir",
            TopicPartitionReplica("no-such-topic", 0, node): module_broker.log_dirs[0],
        }
    )
    names = {tpr.topic: err.__name__ for tpr, err in result.items()}
    assert names == {topic: "LogDirNotFoundError", "no-such-topic": "UnknownTopicOrPartitionError"}
    current = _placement(admin, module_broker, topic)[(0, False)]
    same = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, node): current})
    assert [e.__name__ for e in same.values()] == ["NoError"]


def test_throttle_config_is_dynamic_and_described(admin, module_broker: Broker) -> None:  # type: ignore[no-untyped-def]
    key = "replica.alter.log.dirs.io.max.bytes.per.second"
    res = ConfigResource(
        ConfigResourceType.BROKER, str(module_broker.node_id), configs={key: "1048576"}
    )
    result = admin.alter_configs([res], raise_on_unknown=False, incremental=True)
    assert "Error" not in repr(result) or "NoError" in repr(result), result
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, str(module_broker.node_id))]
    )
    text = repr(described)
    assert key in text
    assert "1048576" in text
    admin.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.BROKER,
                str(module_broker.node_id),
                configs={key: ("DELETE", None)},
            )
        ],
        raise_on_unknown=False,
        incremental=True,
    )
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == module_broker.node_id
    assert [b["broker_id"] for b in cluster["brokers"]] == [module_broker.node_id]


def test_dir_chosen_before_topic_creation_is_used_when_the_topic_is_created(
    admin, module_broker: Broker
) -> None:  # type: ignore[no-untyped-def]
    topic = f"pre-{uuid.uuid4().hex[:8]}"
    node = module_broker.node_id
    dest = module_broker.log_dirs[2]
    result = admin.alter_replica_log_dirs(
        {TopicPartitionReplica(topic, p, node): dest for p in range(3)}
    )
    assert {e.__name__ for e in result.values()} == {"UnknownTopicOrPartitionError"}
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    placed = _placement(admin, module_broker, topic)
    assert placed == {(p, False): dest for p in range(3)}
