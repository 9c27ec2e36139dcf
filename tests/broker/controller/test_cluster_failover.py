"""Three real broker processes in one cluster, coordinated through a real etcd
(``spindle.controller.mode=elected``): one controller is elected; SIGKILLing it elects another
with a higher epoch and loses no metadata; a killed broker's leaderships move to in-sync
replicas on live brokers; records acknowledged with acks=all before a failover are read back
from the new leaders (followers fetched them); restarted brokers catch up and rejoin the ISR.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTP
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.producer import ProduceResponse
from spindle.broker.controller.model import TopicState
from spindle.broker.records.batch import build_batch

from ..cluster import Cluster
from ..conftest import Etcd
from ..wire import Wire, fetch_all_values, init_producer_id, produce_batch_request

PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Cluster]:
    racks = {n: {"broker.rack": f"r{n}"} for n in (1, 2, 3)}
    started = Cluster(tmp_path_factory.mktemp("cluster"), etcd, nodes=3, node_extra=racks)
    try:
        started.start()
        yield started
    finally:
        started.close()


def _missing_replica_dirs(cluster: Cluster, topic: str) -> list[tuple[int, int]]:
    """(broker, partition) pairs with no replica directory in any of the broker's dirs."""
    return [
        (n, p)
        for n, b in cluster.brokers.items()
        for p in range(PARTITIONS)
        if not any((Path(d) / f"{topic}-{p}").is_dir() for d in b.log_dirs)
    ]


def _leaders(topic: TopicState) -> dict[int, int]:
    return {p.partition: p.leader for p in topic.partitions.values()}


def _produce(cluster: Cluster, alive: set[int], topic: str, tag: str) -> None:
    """One message per partition with acks=all (acknowledged once the ISR has it)."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(alive), acks="all", retries=10)
    for p in range(PARTITIONS):
        producer.send(topic, f"{tag}-{p}".encode(), partition=p).get(timeout=30)
    producer.close()


def _consume(cluster: Cluster, alive: set[int], topic: str, tag: str) -> None:
    """Every partition's ``tag`` message is read back from the current leaders."""
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap(alive),
        enable_auto_commit=False,
        consumer_timeout_ms=15_000,
    )
    consumer.assign([KafkaTP(topic, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    want = {f"{tag}-{p}" for p in range(PARTITIONS)}
    seen: set[str] = set()
    for message in consumer:
        value = message.value.decode()
        if value.startswith(tag):
            seen.add(value)
        if seen == want:
            break
    consumer.close()
    assert seen == want


def _round_trip(cluster: Cluster, alive: set[int], topic: str, tag: str) -> None:
    _produce(cluster, alive, topic, tag)
    _consume(cluster, alive, topic, tag)


def test_exactly_one_controller_and_rack_aware_placement(cluster: Cluster) -> None:
    view = cluster.wait(
        "a controller and three unfenced brokers",
        lambda v: v.controller is not None and v.unfenced == {1, 2, 3},
    )
    assert view.controller is not None
    controller, epoch = view.controller
    assert controller in (1, 2, 3)
    assert epoch >= 1
    elected = [n for n, b in cluster.brokers.items() if "elected controller" in b.log_text()]
    assert elected == [controller]
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap({1, 2, 3}))
    admin.create_topics([NewTopic("failover", num_partitions=PARTITIONS, replication_factor=3)])
    admin.close()
    view = cluster.wait("the topic", lambda v: "failover" in v.topics)
    parts = view.topics["failover"].partitions
    assert all(sorted(p.replicas) == [1, 2, 3] and p.isr == p.replicas for p in parts.values())
    # Striped placement spreads leadership: each broker leads two of the six partitions.
    assert sorted(_leaders(view.topics["failover"]).values()) == [1, 1, 2, 2, 3, 3]
    # Each broker creates its replicas when the assignment reaches it through its watch, a
    # moment after the controller wrote it (seen under load: the view had the topic first).
    deadline = time.monotonic() + 30
    missing = _missing_replica_dirs(cluster, "failover")
    while missing and time.monotonic() < deadline:
        time.sleep(0.1)
        missing = _missing_replica_dirs(cluster, "failover")
    assert not missing, f"replicas never created on disk: {missing}"
    _round_trip(cluster, {1, 2, 3}, "failover", "before")
    # acks=all returned: every in-sync replica has the records, so the leaders' high
    # watermarks cover them and the ISR stayed whole.
    view = cluster.view()
    assert all(p.isr == p.replicas for p in view.topics["failover"].partitions.values())


def test_killing_the_controller_elects_another_and_keeps_metadata(cluster: Cluster) -> None:
    before = cluster.wait("a controller", lambda v: v.controller is not None)
    assert before.controller is not None
    old, old_epoch = before.controller
    topic_before = before.topics["failover"]
    cluster.brokers[old].kill()
    survivors = {1, 2, 3} - {old}
    after = cluster.wait(
        "a new controller and the old one's leaderships moved",
        lambda v: (
            v.controller is not None
            and v.controller[0] in survivors
            and all(
                p.leader in survivors and old not in p.isr
                for p in v.topics["failover"].partitions.values()
            )
        ),
    )
    assert after.controller is not None
    assert after.controller[1] > old_epoch
    topic_after = after.topics["failover"]
    # Nothing lost: same id, configs, replica sets; leaders moved only where ``old`` led.
    assert topic_after.topic_id == topic_before.topic_id
    assert topic_after.configs == topic_before.configs
    for p, part in topic_after.partitions.items():
        prev = topic_before.partitions[p]
        assert part.replicas == prev.replicas
        if prev.leader == old:
            assert part.leader_epoch > prev.leader_epoch
            assert part.leader == next(b for b in prev.replicas if b in survivors)
        else:
            assert part.leader == prev.leader
    # Records acknowledged before the failover are served by the new leaders.
    _consume(cluster, survivors, "failover", "before")
    _round_trip(cluster, survivors, "failover", "after-controller")


def test_killed_broker_leaderships_move_to_in_sync_replicas(cluster: Cluster) -> None:
    view = cluster.wait("a live controller", lambda v: v.controller is not None)
    assert view.controller is not None
    alive = {n for n, b in cluster.brokers.items() if b.proc and b.proc.poll() is None}
    victim = next(b for b in sorted(alive) if b != view.controller[0])
    led = [p for p, leader in _leaders(view.topics["failover"]).items() if leader == victim]
    cluster.brokers[victim].kill()
    remaining = alive - {victim}
    after = cluster.wait(
        f"broker {victim}'s session to end and its leaderships to move",
        lambda v: (
            victim not in v.live
            and all(
                p.leader in remaining and p.isr == [b for b in p.replicas if b in remaining]
                for p in v.topics["failover"].partitions.values()
            )
        ),
    )
    for p in led:
        assert after.topics["failover"].partitions[p].leader in remaining
    # Clients are told only about live brokers, and who the controller is.
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(remaining))
    described = admin.describe_cluster()
    admin.close()
    assert after.controller is not None
    assert {b["broker_id"] for b in described["brokers"]} == remaining
    assert described["controller_id"] == after.controller[0]
    _consume(cluster, remaining, "failover", "before")
    _consume(cluster, remaining, "failover", "after-controller")
    _round_trip(cluster, remaining, "failover", "after-broker")


def test_restarted_brokers_catch_up_and_rejoin_the_isr(cluster: Cluster) -> None:
    before = cluster.view()
    for b in cluster.brokers.values():
        if b.proc is None or b.proc.poll() is not None:
            b.start()
    view = cluster.wait(
        "every replica back in the ISR",
        lambda v: (
            v.unfenced == {1, 2, 3}
            and all(sorted(p.isr) == [1, 2, 3] for p in v.topics["failover"].partitions.values())
        ),
    )
    # Leadership stays where the failovers put it (no preferred-leader rebalance yet).
    assert _leaders(view.topics["failover"]) == _leaders(before.topics["failover"])
    _round_trip(cluster, {1, 2, 3}, "failover", "after-restart")
    # kafka-leader-election --election-type preferred (ElectLeaders): leaders go back to the
    # first replica of each partition, all of them in sync again.
    (old_leader,) = set(_leaders(view.topics["failover"]).values())
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap({1, 2, 3}))
    first = admin.elect_leaders(0, {"failover": list(range(PARTITIONS))})
    again = admin.elect_leaders(0, {"failover": list(range(PARTITIONS))})
    admin.close()
    codes = {
        p.partition_id: p.error_code
        for r in first.replica_election_results
        for p in r.partition_result
    }
    preferred = {p.partition: p.replicas[0] for p in view.topics["failover"].partitions.values()}
    assert codes == {p: (84 if preferred[p] == old_leader else 0) for p in range(PARTITIONS)}
    assert {p.error_code for r in again.replica_election_results for p in r.partition_result} == {
        84
    }
    elected = cluster.view()
    assert _leaders(elected.topics["failover"]) == preferred
    # The returning brokers hold every record: stop the broker that led everything before,
    # and the others serve all of it.
    cluster.brokers[old_leader].kill()
    others = {1, 2, 3} - {old_leader}
    cluster.wait(
        "leadership to move to the caught-up brokers",
        lambda v: all(p.leader in others for p in v.topics["failover"].partitions.values()),
    )
    for tag in ("before", "after-controller", "after-broker", "after-restart"):
        _consume(cluster, others, "failover", tag)


def test_idempotent_retry_after_a_failover_is_not_written_twice(cluster: Cluster) -> None:
    alive = {n for n, b in cluster.brokers.items() if b.proc and b.proc.poll() is None}
    first, second = sorted(alive)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(alive))
    admin.create_topics(
        [
            NewTopic(
                "idem",
                num_partitions=-1,
                replication_factor=-1,
                replica_assignments={0: [first, second]},
            )
        ]
    )
    admin.close()
    cluster.wait(
        "the topic's isr",
        lambda v: "idem" in v.topics and v.topics["idem"].partitions[0].isr == [first, second],
    )
    with Wire(cluster.brokers[first].port) as wire:
        init = init_producer_id(wire)
    pid, epoch = init.producer_id, init.producer_epoch

    def produce(node: int, seq: int) -> tuple[int, int]:
        batch = build_batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        with Wire(cluster.brokers[node].port) as wire:
            req = produce_batch_request("idem", 0, batch, acks=-1)
            part = wire.call(req, ProduceResponse).responses[0].partition_responses[0]
        return part.error_code, part.base_offset

    assert produce(first, 0) == (0, 0)  # acks=all: the follower has it too
    cluster.brokers[first].kill()
    cluster.wait("leadership to move", lambda v: v.topics["idem"].partitions[0].leader == second)
    # The producer never saw the ack and retries on the new leader: recognised, not rewritten.
    assert produce(second, 0) == (0, 0)
    assert produce(second, 2) == (0, 2)
    with Wire(cluster.brokers[second].port) as wire:
        assert fetch_all_values(wire, "idem") == [b"a", b"b", b"a", b"b"]
