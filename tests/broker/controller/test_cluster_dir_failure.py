"""A log directory fails for real (tmpfs remounted read-only) on a leader in a three-broker
cluster: the broker reports it on its session, the elected controller moves leadership and ISR
of exactly the partitions in that directory to in-sync replicas on other brokers (KIP-112/858),
the broker stays up leading the partitions of its healthy directory, and clients produce to
the new leaders.

This test checks the controller's reaction and the service of new records; that no acked
record is lost across the failure (leader and follower, with and without a bounce) is
tests/broker/system/test_log_dir_failure.py's claim.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from controlplane.volumes import remount_read_only
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError as ClientKafkaError
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.model import TopicState
from spindle.broker.controller.store import MetadataStore

from ..conftest import Etcd, make_broker

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="mounts tmpfs and remounts it read-only: needs root (CI runs as root)",
    ),
]

PARTITIONS = 4


@contextmanager
def _tmpfs(path: Path) -> Iterator[str]:
    path.mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=128m,mode=0755", "tmpfs", str(path)], check=True
    )
    try:
        yield str(path)
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=False)


def _topic(etcd_url: str, prefix: str, name: str) -> tuple[TopicState | None, dict[int, list[str]]]:
    async def read() -> tuple[TopicState | None, dict[int, list[str]]]:
        client = EtcdClient([etcd_url])
        try:
            store = MetadataStore(client, prefix=prefix)
            await store.load()
            offline = {b: list(s.offline_dirs) for b, s in store.sessions.items()}
            return store.topics.get(name), offline
        finally:
            await client.close()

    return asyncio.run(read())


def test_failed_dir_moves_only_its_partitions_leadership(tmp_path: Path, etcd: Etcd) -> None:
    prefix = f"/test/{uuid.uuid4().hex}"
    extra = {
        "spindle.etcd.prefix": prefix,
        "spindle.controller.mode": "elected",
        "spindle.controller.lease.ms": "2000",
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
    }
    with ExitStack() as stack:
        dir_a = stack.enter_context(_tmpfs(tmp_path / "a"))
        dir_b = stack.enter_context(_tmpfs(tmp_path / "b"))
        brokers = {
            1: make_broker(tmp_path / "b1", etcd, node_id=1, log_dirs=[dir_a, dir_b], extra=extra),
            2: make_broker(tmp_path / "b2", etcd, node_id=2, dirs=2, extra=extra),
            3: make_broker(tmp_path / "b3", etcd, node_id=3, dirs=2, extra=extra),
        }
        for b in brokers.values():
            stack.callback(b.stop)
            b.start()
        bootstrap = [b.bootstrap for b in brokers.values()]
        deadline = time.monotonic() + 30
        while True:  # the cluster accepts a topic once every broker is unfenced
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            try:
                admin.create_topics(
                    [
                        NewTopic(
                            "jbod",
                            num_partitions=-1,
                            replication_factor=-1,
                            replica_assignments={p: [1, 2, 3] for p in range(PARTITIONS)},
                        )
                    ]
                )
                break
            except ClientKafkaError:
                assert time.monotonic() < deadline, "the cluster never accepted the topic"
                time.sleep(0.2)
            finally:
                admin.close()
        # Broker 1 spreads its replicas over both dirs (least-loaded first).
        in_b = {p for p in range(PARTITIONS) if (Path(dir_b) / f"jbod-{p}").is_dir()}
        in_a = {p for p in range(PARTITIONS) if (Path(dir_a) / f"jbod-{p}").is_dir()}
        assert in_a
        assert in_b
        assert in_a | in_b == set(range(PARTITIONS))

        remount_read_only(dir_b)
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, retries=20)
        # The first write into dir b fails with an I/O error: the directory goes offline. The
        # producer retries (KAFKA_STORAGE_ERROR is retriable) until the new leader takes it.
        victim = min(in_b)
        producer.send("jbod", b"into-the-failed-dir", partition=victim).get(timeout=60)

        deadline = time.monotonic() + 30
        while True:
            topic, offline = _topic(etcd.url, prefix, "jbod")
            assert topic is not None
            parts = topic.partitions
            moved = all(parts[p].leader != 1 and 1 not in parts[p].isr for p in in_b)
            if moved and offline.get(1):
                break
            assert time.monotonic() < deadline, f"dir b's partitions never moved: {parts}"
            time.sleep(0.1)
        for p in in_b:
            assert parts[p].leader == 2  # the next replica in order, in sync
            assert parts[p].isr == [2, 3]
        for p in in_a:
            assert parts[p].leader == 1  # the healthy directory keeps serving from broker 1
            assert parts[p].isr == [1, 2, 3]
        assert brokers[1].proc is not None
        assert brokers[1].proc.poll() is None
        for p in range(PARTITIONS):
            producer.send("jbod", f"after-{p}".encode(), partition=p).get(timeout=30)
        producer.close()
