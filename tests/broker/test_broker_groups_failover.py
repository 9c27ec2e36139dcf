"""Coordination follows leadership of ``__consumer_offsets`` in a real three-broker cluster
(``spindle.controller.mode=elected``): the coordinator FindCoordinator names is the leader of
the group's offsets partition; SIGKILLing it moves the partition's leadership to a follower,
which loads the replicated records and answers for the group with the same committed offsets,
and a consumer of the group resumes exactly where the group stopped."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from .cluster import running
from .conftest import Broker, Etcd
from .wire import Wire

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

pytestmark = pytest.mark.slow

TOPIC = "failover-groups"
GROUP = "failover-group"


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[dict[int, Broker]]:
    no_delay = {"group.initial.rebalance.delay.ms": "0"}
    with running(
        tmp_path_factory.mktemp("groups-cluster"), etcd, nodes=3, dirs=1, extra=no_delay
    ) as c:
        yield c.brokers


def coordinator(broker: Broker) -> int:
    """The node FindCoordinator names for the group (-1 while none is available)."""
    with Wire(broker.port) as wire:
        resp = wire.call(FindCoordinatorRequest[3](key=GROUP, key_type=0), FindCoordinatorResponse)
    return int(resp.node_id) if resp.error_code == 0 else -1


def committed(bootstrap: list[str]) -> dict[int, int] | None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets(GROUP)[GROUP]
    except Exception:  # COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR while it moves
        return None
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets.items()}


def consume(bootstrap: list[str], want: int) -> list[str]:
    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=20_000,
    )
    got: list[str] = []
    for m in consumer:
        got.append(m.value.decode())
        if len(got) >= want:
            break
    consumer.commit()
    consumer.close()
    return got


def produce(bootstrap: list[str], values: list[str]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10)
    for i, v in enumerate(values):
        producer.send(TOPIC, v.encode(), partition=i % 3).get(timeout=30)
    producer.close()


def wait_for(what: str, check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_coordinator_moves_with_offsets_partition_leadership(brokers: dict[int, Broker]) -> None:
    everyone = [b.bootstrap for b in brokers.values()]
    admin = KafkaAdminClient(bootstrap_servers=everyone)
    admin.create_topics([NewTopic(TOPIC, 3, 3)])
    admin.close()
    first = [f"a{i}" for i in range(30)]
    produce(everyone, first)
    assert sorted(consume(everyone, len(first))) == sorted(first)
    before = wait_for("the commits", lambda: committed(everyone))
    assert before == {0: 10, 1: 10, 2: 10}
    node = wait_for("a coordinator", lambda: max(coordinator(b) for b in brokers.values()))
    others = [b for n, b in brokers.items() if n != node]
    assert all(coordinator(b) == node for b in others)  # every broker names the same leader
    brokers[node].kill()
    alive = [b.bootstrap for b in others]
    moved = wait_for(
        "the coordinator to move",
        lambda: next((c for c in [coordinator(others[0])] if c not in (-1, node)), None),
    )
    assert moved in {b.node_id for b in others}
    assert wait_for("the offsets from the new coordinator", lambda: committed(alive)) == before
    later = [f"b{i}" for i in range(15)]
    produce(alive, later)
    assert sorted(consume(alive, len(later))) == sorted(later)
    brokers[node].start()
