"""A Reassignment across brokers, for real: two Spindle broker processes in one elected-controller
cluster (``spindle.controller.mode=elected``, a real etcd), the operator as its own process on
the real API server. The partition leaves broker 1 for an explicit directory of broker 2:
AlterPartitionReassignments, then AlterReplicaLogDirs repeated until the new replica exists
(REPLICA_NOT_AVAILABLE before). Afterwards the metadata, DescribeLogDirs and every record say it
moved, and the inter-broker throttles the operator set are gone from both brokers and the topic.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import spindle.broker.protocol.apis  # noqa: F401  (kafka-python's schemas, warnings silenced)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from ..broker.conftest import Broker, Etcd, make_broker
from ..broker.conftest import etcd as etcd
from .conftest import CLUSTER, OperatorProcess, temporary_namespace

pytestmark = pytest.mark.slow

TOPIC, RECORDS = "across", 500
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LISTS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@pytest.fixture(scope="module")
def pair(
    spindle_crds: Any, etcd: Etcd, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[Broker], Any, KafkaAdminClient]]:
    base = tmp_path_factory.mktemp("across")
    extra = {
        "spindle.etcd.prefix": f"/test/{uuid.uuid4().hex}",
        "spindle.controller.mode": "elected",
        "spindle.controller.lease.ms": "2000",
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
    }
    with ExitStack() as stack:
        brokers = [
            make_broker(base / f"b{n}", etcd, dirs=2, node_id=n, extra=extra) for n in (1, 2)
        ]
        for b in brokers:
            b.start()
            stack.callback(b.stop)
        servers = ",".join(b.bootstrap for b in brokers)
        admin = KafkaAdminClient(bootstrap_servers=servers.split(","))
        stack.callback(admin.close)
        deadline = time.monotonic() + 60
        while len(admin.describe_cluster()["brokers"]) < 2:
            assert time.monotonic() < deadline, "the two brokers did not register"
            time.sleep(0.5)
        admin.create_topics([NewTopic(TOPIC, -1, replica_assignments={0: [1]})])
        producer = KafkaProducer(bootstrap_servers=servers.split(","), acks="all")
        for seq in range(RECORDS):
            producer.send(TOPIC, f"{seq}".encode().ljust(1000, b"y"), partition=0)
        producer.flush()
        producer.close()
        operator = OperatorProcess(
            spindle_crds, Path(base), "--namespace", "ra-*", "--bootstrap", f"{CLUSTER}={servers}"
        )
        operator.start()
        stack.callback(operator.stop)
        ns = stack.enter_context(temporary_namespace(spindle_crds, "ra"))
        yield brokers, ns, admin


def test_a_partition_moves_to_another_broker_and_directory_under_a_cleared_throttle(
    pair: tuple[list[Broker], Any, KafkaAdminClient],
) -> None:
    brokers, ns, admin = pair
    target_dir = brokers[1].log_dirs[1]
    ns.apply(json.dumps({
        "apiVersion": "spindle.io/v1alpha1", "kind": "Reassignment", "metadata": {"name": "across"},
        "spec": {"cluster": CLUSTER,
                 "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [2], "logDirs": [target_dir]}],
                 "throttle": {"interBrokerBytesPerSecond": 10_000_000}},
    }))  # fmt: skip
    deadline = time.monotonic() + 120
    while True:
        status = (ns.get("reassignment", "across") or {}).get("status") or {}
        if status.get("phase") in {"Completed", "Failed", "Cancelled"}:
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.5)
    assert status["phase"] == "Completed", status
    [p] = status["partitions"]
    assert p["originalReplicas"] == [1]
    assert p["bytesDone"] == p["bytesTotal"] > RECORDS * 1000

    [meta] = admin.describe_topics([TOPIC])[0]["partitions"]
    assert meta["replica_nodes"] == [2]
    assert not admin.list_partition_reassignments()
    where = {
        (e["broker"], d["log_dir"])
        for e in admin.describe_log_dirs(brokers=[1, 2])
        for d in e["log_dirs"]
        for t in d.get("topics") or ()
        if t["name"] == TOPIC
        for q in t["partitions"]
        if not q["is_future_key"]
    }
    deadline = time.monotonic() + 60
    while (1, brokers[0].log_dirs[0]) in where or len(where) != 1:  # the old copy goes too
        assert time.monotonic() < deadline, where
        time.sleep(0.5)
        where = {
            (e["broker"], d["log_dir"])
            for e in admin.describe_log_dirs(brokers=[1, 2])
            for d in e["log_dirs"]
            for t in d.get("topics") or ()
            if t["name"] == TOPIC
            for q in t["partitions"]
        }
    assert where == {(2, target_dir)}

    configs = admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, "1"), ConfigResource(ConfigResourceType.BROKER, "2"),
         ConfigResource(ConfigResourceType.TOPIC, TOPIC)]
    )  # fmt: skip
    for b in ("1", "2"):
        assert not set(RATES) & set(configs["broker"][b]), configs["broker"][b]
    assert not set(LISTS) & set(configs["topic"][TOPIC]), configs["topic"][TOPIC]

    consumer = KafkaConsumer(bootstrap_servers=[b.bootstrap for b in brokers],
                             enable_auto_commit=False, consumer_timeout_ms=10_000)  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0)])
    consumer.seek_to_beginning()
    got = [m.value for m in consumer]
    consumer.close()
    assert got == [f"{seq}".encode().ljust(1000, b"y") for seq in range(RECORDS)]
