"""Failures Kafka's system tests inflict on a running cluster (``replication_test.py``'s hard
bounces of leaders and followers, ``reassign_partitions_test.py``'s bounces mid-move, the
ZooKeeper/KRaft restarts), here on three broker processes sharing a real etcd of the module's
own, with an idempotent acks=all producer and a verifying consumer in every scenario:

* a slow follower leaves the ISR after ``replica.lag.time.max.ms`` and rejoins;
* a follower SIGKILLed and restarted catches up and rejoins the ISR, and then holds every
  acknowledged message (it alone serves them all);
* the controller SIGKILLed mid-reassignment: another broker takes over and completes it;
* etcd restarted: every broker keeps serving through the outage, recovers its session, and no
  metadata is lost.

The slow follower is made slow with SIGSTOP/SIGCONT of its process, not a delaying proxy: a
follower fetches from the one address its leader registered, the same one every client uses,
so a proxy would slow the leader for everyone; a stopped follower sends no fetches, exactly
what a slow link looks like to the leader, while its session lease (``broker.session.timeout.ms``
6 s here, the pause at most 5 s) outlives the pause, so the ISR change is the leader's lag rule and not
the controller's session expiry.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka import TopicPartition as KafkaTP
from kafka.errors import NotEnoughReplicasError

from ..cluster import Cluster, View
from ..conftest import Etcd
from ..controller.conftest import OwnEtcd
from ..verifiable import VerifiableProducer, verify_consumed

pytestmark = pytest.mark.slow

TOPIC = "steady"
PARTITIONS = 3
LAG_MS = 1500
PAUSE_MAX_S = 5.0


class Resilient:
    def __init__(self, cluster: Cluster, etcd: OwnEtcd) -> None:
        self.cluster, self.etcd = cluster, etcd

    def steady(self) -> View:
        """Every broker up, registered, unfenced; every replica of the topic in sync."""
        self.cluster.start()
        self.cluster.wait_unfenced()
        return self.cluster.wait_isr_whole(TOPIC, timeout_s=90)

    def producer(self, topic: str = TOPIC, partitions: int = PARTITIONS) -> VerifiableProducer:
        producer = VerifiableProducer(self.cluster.bootstrap(), topic, range(partitions))
        producer.start().wait_acked(100)
        return producer


@pytest.fixture(scope="module")
def resilient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Resilient]:
    base = tmp_path_factory.mktemp("resilience")
    own = OwnEtcd(base)
    own.start()
    assert own.proc is not None
    cluster = Cluster(
        base,
        Etcd(own.url, own.proc),
        nodes=3,
        dirs=2,
        extra={
            "broker.session.timeout.ms": "6000",
            "replica.lag.time.max.ms": str(LAG_MS),
            "min.insync.replicas": "2",
        },
    )
    try:
        cluster.start()
        cluster.wait_unfenced()
        cluster.create_topic(TOPIC, "--partitions", str(PARTITIONS), "--replication-factor", "3")
        yield Resilient(cluster, own)
    finally:
        cluster.close()
        own.kill()


def test_slow_follower_leaves_the_isr_after_the_lag_time_and_rejoins(
    resilient: Resilient,
) -> None:
    cluster = resilient.cluster
    view = resilient.steady()
    slow = next(b for b in (1, 2, 3) if b != view.leader(TOPIC, 0))
    followed = [p for p in range(PARTITIONS) if view.leader(TOPIC, p) != slow]
    producer = resilient.producer()
    proc = cluster.brokers[slow].proc
    assert proc is not None
    acked_before = producer.acked_count()
    proc.send_signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        # Paused until the leaders drop it, at most PAUSE_MAX_S: under the session timeout.
        shrunk = cluster.wait(
            f"broker {slow} out of the ISR of the partitions it follows",
            lambda v: all(slow not in v.isr(TOPIC, p) for p in followed),
            timeout_s=PAUSE_MAX_S,
        )
        paused = time.monotonic() - stopped_at
    finally:
        proc.send_signal(signal.SIGCONT)
    # The leader's lag rule did it, not the controller's session expiry: still live.
    assert slow in shrunk.live, "the session expired: this is not the lag rule"
    assert paused >= LAG_MS / 1000
    print(
        f"\nbroker {slow} paused {paused:.1f}s: isr {[shrunk.isr(TOPIC, p) for p in followed]}, "
        f"{producer.acked_count() - acked_before} acks meanwhile"
    )
    back = cluster.wait_isr_whole(TOPIC)
    assert slow in back.live
    producer.wait_acked(100)
    for leader, replicas, isr in cluster.describe(TOPIC).values():
        assert sorted(isr) == sorted(replicas)
        assert leader in isr
    result = verify_consumed(cluster.bootstrap(), producer)
    print(result)
    result.check()


def test_a_broker_that_led_an_epoch_without_appending_follows_the_next_leader_in_sync(
    resilient: Resilient,
) -> None:
    """Leadership moves to a broker and away again with nothing produced meanwhile, so that
    broker's epoch cache ends with an epoch its next leader never had. As a follower it must
    drop that epoch and fetch: an acks=all produce needing all three replicas
    (``min.insync.replicas=3``) is acknowledged. It used to be answered divergingEpoch on every
    fetch, leave the ISR after ``replica.lag.time.max.ms`` and never come back (the CI failure
    of test_idempotent_failover on 2026-11-27: a follower out of one ISR for 90 s)."""
    cluster = resilient.cluster
    resilient.steady()
    topic = "quiet"
    cluster.create_topic(
        topic, "--replica-assignment", "1:2:3", "--config", "min.insync.replicas=3"
    )
    cluster.wait_isr_whole(topic)
    assert _send_all(cluster, topic, b"before") == 0
    cluster.brokers[1].stop()
    interim = cluster.wait(
        f"a leader of {topic} other than 1", lambda v: v.leader(topic) not in (-1, 1)
    ).leader(topic)
    resilient.steady()
    cluster.wait_isr_whole(topic)
    cluster.tool(
        "kafka-leader-election",
        "--election-type",
        "preferred",
        "--topic",
        topic,
        "--partition",
        "0",
    )
    cluster.wait(f"broker 1 leading {topic} again", lambda v: v.leader(topic) == 1)
    print(f"\nbroker {interim} led {topic} in between, appending nothing")
    assert _send_all(cluster, topic, b"after") == 1
    view = cluster.wait_isr_whole(topic)
    assert view.leader(topic) == 1


def _send_all(cluster: Cluster, topic: str, value: bytes) -> int:
    """One acks=all send to partition 0 by a new producer (fresh metadata); its offset. A
    broker that has not applied the election yet may answer NOT_LEADER once: retried."""
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap(), acks="all", retries=5, request_timeout_ms=15000
    )
    try:
        return int(producer.send(topic, value, partition=0).get(timeout=30).offset)
    finally:
        producer.close(timeout=5)


def test_killed_follower_catches_up_rejoins_and_holds_every_ack(resilient: Resilient) -> None:
    cluster = resilient.cluster
    view = resilient.steady()
    victim = next(b for b in (1, 2, 3) if b != view.leader(TOPIC, 0))
    producer = resilient.producer()
    cluster.brokers[victim].kill()
    cluster.wait(
        f"broker {victim} out of every ISR",
        lambda v: all(victim not in v.isr(TOPIC, p) for p in range(PARTITIONS)),
    )
    producer.wait_acked(300)  # it misses these
    cluster.brokers[victim].start()
    cluster.wait_isr_whole(TOPIC)
    producer.wait_acked(100)
    truncated = "truncating" in cluster.brokers[victim].log_text()
    print(f"\nbroker {victim} restarted, back in every ISR (truncated a tail: {truncated})")
    result = verify_consumed(cluster.bootstrap(), producer)
    print(result)
    result.check()
    # It caught up: with the other two gone it leads everything and serves every ack.
    others = sorted({1, 2, 3} - {victim})
    for b in others:
        cluster.brokers[b].kill()
    cluster.wait(
        f"broker {victim} leading every partition alone",
        lambda v: all(v.leader(TOPIC, p) == victim for p in range(PARTITIONS)),
    )
    alone = verify_consumed(cluster.bootstrap([victim]), producer)
    print(f"from broker {victim} alone: {alone}")
    alone.check()
    assert alone.consumed >= result.acked
    # One in-sync replica is below the brokers' min.insync.replicas=2: acks=all is refused.
    lone = KafkaProducer(bootstrap_servers=cluster.bootstrap([victim]), acks="all", retries=0)
    try:
        with pytest.raises(NotEnoughReplicasError):
            lone.send(TOPIC, b"refused", partition=0).get(timeout=30)
    finally:
        lone.close()


def test_controller_killed_mid_reassignment_its_successor_completes_it(
    resilient: Resilient,
) -> None:
    cluster = resilient.cluster
    view = resilient.steady()
    assert view.controller is not None
    controller, epoch = view.controller
    a, b = sorted({1, 2, 3} - {controller})
    if "moves" not in view.topics:
        cluster.create_topic("moves", "--partitions", "4", "--replication-factor", "2")
    parts = cluster.wait_isr_whole("moves").topics["moves"].partitions
    # Every partition ends on the two brokers that are not the controller.
    target = {p: ([a, b] if p % 2 else [b, a]) for p in parts}
    assert any(controller in parts[p].replicas for p in parts)
    producer = resilient.producer("moves", len(parts))
    # The brokers gaining replicas are paused (SIGSTOP, well under their 6 s session) from
    # before the reassignment until the controller is dead, so that no new replica can catch
    # up and the reassignment cannot complete first: with a few hundred small messages it can
    # finish within milliseconds, before the test's SIGKILL lands on a loaded machine (CI
    # saw "completed before the controller died").
    # The admin client learns the controller while every broker runs (its first controller
    # request, ListPartitionReassignments, looks it up with a Metadata request to any broker
    # and keeps it), so that the reassignment goes to the controller, not to a paused broker.
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    paused = [cluster.brokers[n].proc for n in (a, b)]
    try:
        told = admin.describe_cluster()["controller_id"]
        assert told == controller, f"metadata names {told} the controller, etcd {controller}"
        admin.list_partition_reassignments()
        for proc in paused:
            assert proc is not None
            proc.send_signal(signal.SIGSTOP)
        result = admin.alter_partition_reassignments(
            {KafkaTP("moves", p): r for p, r in target.items()}
        )
        assert all(err is None for err in result.values()), result
        during = cluster.view()
        cluster.brokers[controller].kill()
    finally:
        for proc in paused:
            assert proc is not None
            proc.send_signal(signal.SIGCONT)
        admin.close()
    pending = [p for p, s in during.topics["moves"].partitions.items() if s.adding or s.removing]
    assert pending, "the reassignment completed before the controller died"
    after = cluster.wait(
        "a new controller completing the reassignment",
        lambda v: (
            v.controller is not None
            and v.controller[0] != controller
            and all(
                s.replicas == target[p] and not s.adding and not s.removing
                for p, s in v.topics["moves"].partitions.items()
            )
        ),
    )
    assert after.controller is not None
    assert after.controller[1] > epoch
    print(f"\ncontroller {controller} killed with {pending} moving; {after.controller} finished")
    producer.wait_acked(100)
    verified = verify_consumed(cluster.bootstrap([a, b]), producer)
    print(verified)
    verified.check()
    rows = cluster.describe("moves")
    for p, (leader, replicas, isr) in rows.items():
        assert replicas == target[p]
        assert sorted(isr) == sorted(target[p])
        assert leader in isr


def test_etcd_restart_keeps_brokers_serving_and_loses_no_metadata(
    resilient: Resilient,
) -> None:
    cluster = resilient.cluster
    before = resilient.steady()
    starts = {n: b.log_text().count("started on port") for n, b in cluster.brokers.items()}
    producer = resilient.producer()
    resilient.etcd.kill()
    try:
        producer.wait_acked(300)  # served without etcd: data path needs no metadata writes
    finally:
        resilient.etcd.start()
    after = cluster.wait(
        "every broker's session and a controller back",
        lambda v: v.unfenced == {1, 2, 3} and v.controller is not None,
    )
    for name, topic in before.topics.items():
        now = after.topics[name]
        assert now.topic_id == topic.topic_id
        assert now.configs == topic.configs
        assert {p: s.replicas for p, s in now.partitions.items()} == {
            p: s.replicas for p, s in topic.partitions.items()
        }
    assert after.dirs == before.dirs
    cluster.wait_isr_whole(TOPIC)
    producer.wait_acked(200)
    print(f"\netcd restarted; controller {after.controller}, brokers {sorted(after.live)}")
    result = verify_consumed(cluster.bootstrap(), producer)
    print(result)
    result.check()
    # The same processes served throughout: none exited or restarted.
    assert all(cluster.is_up(n) for n in (1, 2, 3))
    assert starts == {n: b.log_text().count("started on port") for n, b in cluster.brokers.items()}
