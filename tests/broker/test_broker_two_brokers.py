"""Two brokers sharing one cluster's metadata in etcd: a topic created through one broker gets
partitions on both, each broker creates its own replicas, and clients produce to and consume
from the right leaders. Two brokers under one prefix run ``spindle.controller.mode=elected``
(a second ``single`` one is refused: tests/broker/controller/test_controller_modes.py)."""

from __future__ import annotations

import time
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from .conftest import Etcd, make_broker


def test_topic_spread_over_two_brokers_round_trips(tmp_path: Path, etcd: Etcd) -> None:
    elected = {"spindle.controller.mode": "elected"}
    first = make_broker(tmp_path / "b1", etcd, dirs=1, node_id=1, extra=elected)
    second = make_broker(tmp_path / "b2", etcd, dirs=1, node_id=2, extra=elected)
    prefix = first.config.read_text().split("spindle.etcd.prefix=")[1].split("\n")[0]
    second.config.write_text(second.config.read_text().replace(second.etcd_prefix, prefix))
    first.start()
    second.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=first.bootstrap)
        deadline = time.monotonic() + 30
        while sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"]) != [1, 2]:
            assert time.monotonic() < deadline, "first broker never saw the second register"
            time.sleep(0.2)
        admin.create_topics([NewTopic("spread", num_partitions=4, replication_factor=1)])
        deadline = time.monotonic() + 30

        def replicas() -> int:
            return sum(len(list(Path(b.log_dirs[0]).glob("spread-*"))) for b in (first, second))

        while replicas() < 4:
            assert time.monotonic() < deadline, "the brokers did not create their replicas"
            time.sleep(0.2)
        admin.close()
        producer = KafkaProducer(bootstrap_servers=second.bootstrap, acks="all")
        for i in range(200):
            producer.send("spread", f"{i}".encode(), partition=i % 4)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(
            bootstrap_servers=first.bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000
        )
        tps = [TopicPartition("spread", p) for p in range(4)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        got: dict[int, list[int]] = {p: [] for p in range(4)}
        for msg in consumer:
            got[msg.partition].append(int(msg.value))
            if sum(map(len, got.values())) >= 200:
                break
        consumer.close()
        assert got == {p: list(range(p, 200, 4)) for p in range(4)}
        # Replicas live where the metadata says, and each broker holds some.
        admin = KafkaAdminClient(bootstrap_servers=first.bootstrap)
        (described,) = admin.describe_topics(["spread"])
        admin.close()
        placed = {p["partition_index"]: p["replica_nodes"] for p in described["partitions"]}
        for broker in (first, second):
            held = sorted(p.name for p in Path(broker.log_dirs[0]).glob("spread-*"))
            wanted = [f"spread-{p}" for p, r in sorted(placed.items()) if r == [broker.node_id]]
            assert held == wanted
            assert held
    finally:
        second.stop()
        first.stop()
