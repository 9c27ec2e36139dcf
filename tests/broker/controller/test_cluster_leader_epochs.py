"""Leader epochs across failovers with real broker processes and a real etcd (KIP-101/279).

* **A divergent tail.** The leader takes acks=1 writes its follower has not fetched (the
  follower is paused with SIGSTOP, after its pending long poll was answered), then is
  SIGKILLed; the follower becomes leader at a new epoch and takes writes of its own. The old
  leader restarts: it asks the new leader OffsetsForLeaderEpoch, truncates exactly its
  divergent records -- not to its high watermark -- and ends byte-identical to the new leader:
  the same segment bytes (offsets, ``partitionLeaderEpoch`` stamps, records) and the same
  ``leader-epoch-checkpoint``.
* **A follower SIGKILLed mid-stream** restarts, truncates where its log parts from the
  leader's (nothing is lost that the leader has), catches up, rejoins the ISR and ends
  byte-identical to the leader.
* **An idempotent producer across a leader SIGKILL** (librdkafka, ``enable.idempotence``,
  acks=all): every acknowledged message is read back exactly once, in order, at the offset it
  was acknowledged with; the new leader rebuilt the producers' state from its log, so the
  producer's retries were neither duplicated nor refused as out of order. A consumer reading
  across the failover (librdkafka) checks its position with OffsetsForLeaderEpoch (KIP-320)
  and sees no truncation.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as CTP
from kafka.protocol.producer import ProduceResponse
from kafka.record.default_records import DefaultRecordBatch
from spindle.broker.records.batch import build_batch, validate

from ..cluster import Cluster, running
from ..conftest import Etcd
from ..verifiable import VerifiableProducer, verify_consumed
from ..wire import Wire, produce_batch_request

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Cluster]:
    # A session long enough that a follower paused for a second or two keeps it (and its
    # place in the ISR), short enough that a killed broker's leaderships move in seconds.
    with running(
        tmp_path_factory.mktemp("epochs"),
        etcd,
        nodes=3,
        dirs=1,
        extra={"broker.session.timeout.ms": "6000"},
    ) as started:
        yield started


def _partition_dir(cluster: Cluster, node: int, topic: str, partition: int = 0) -> Path:
    return Path(cluster.brokers[node].log_dirs[0]) / f"{topic}-{partition}"


def _segment_bytes(cluster: Cluster, node: int, topic: str, partition: int = 0) -> bytes:
    """The partition's log on ``node`` as stored: every segment's bytes, in offset order."""
    d = _partition_dir(cluster, node, topic, partition)
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def _stored(data: bytes) -> list[tuple[int, int, list[bytes]]]:
    """(base offset, partitionLeaderEpoch, record values) of every stored batch."""
    out = []
    for h in validate(data):
        batch = DefaultRecordBatch(data[h.position : h.position + h.size])
        out.append((h.base_offset, h.partition_leader_epoch, [bytes(r.value) for r in batch]))
    return out


def _produce(cluster: Cluster, node: int, topic: str, value: bytes, acks: int) -> int:
    """One one-record batch straight to broker ``node`` (raw Produce): its base offset."""
    with Wire(cluster.brokers[node].port) as wire:
        req = produce_batch_request(topic, 0, build_batch([value]), acks=acks)
        part = wire.call(req, ProduceResponse).responses[0].partition_responses[0]
    assert part.error_code == 0, part
    return int(part.base_offset)


def _pid(cluster: Cluster, node: int) -> int:
    proc = cluster.brokers[node].proc
    assert proc is not None
    return proc.pid


def _wait_same_log(cluster: Cluster, a: int, b: int, topic: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while _segment_bytes(cluster, a, topic) != _segment_bytes(cluster, b, topic):
        assert time.monotonic() < deadline, f"{topic}: brokers {a} and {b} never converged"
        time.sleep(0.1)


def test_old_leader_truncates_exactly_its_divergent_tail_and_matches_the_new_leader(
    cluster: Cluster,
) -> None:
    view = cluster.wait_unfenced()
    assert view.controller is not None
    old, new = sorted(set(cluster.brokers) - {view.controller[0]})  # the controller stays up
    topic = "diverge"
    cluster.create_topic(topic, "--replica-assignment", f"{old}:{new}")
    cluster.wait(
        f"{topic} led by {old} with both replicas in sync",
        lambda v: (
            topic in v.topics and v.leader(topic) == old and sorted(v.isr(topic)) == [old, new]
        ),
    )
    common = [_produce(cluster, old, topic, f"common-{i}".encode(), acks=-1) for i in range(5)]
    assert common == [0, 1, 2, 3, 4]

    os.kill(_pid(cluster, new), signal.SIGSTOP)
    try:
        time.sleep(1.5)  # its pending long poll (500 ms) is answered, empty; it sends no other
        divergent = [_produce(cluster, old, topic, f"lost-{i}".encode(), acks=1) for i in range(3)]
        assert divergent == [5, 6, 7]  # acknowledged by the leader alone
        cluster.brokers[old].kill()
    finally:
        os.kill(_pid(cluster, new), signal.SIGCONT)
    moved = cluster.wait(
        f"{new} leading {topic} alone",
        lambda v: v.leader(topic) == new and v.isr(topic) == [new],
    )
    new_epoch = moved.topics[topic].partitions[0].leader_epoch
    assert new_epoch > 0
    fresh = [_produce(cluster, new, topic, f"new-{i}".encode(), acks=-1) for i in range(4)]
    assert fresh == [5, 6, 7, 8]  # the same offsets as the lost records, other records

    cluster.brokers[old].start()
    cluster.wait(f"{old} back in the ISR of {topic}", lambda v: sorted(v.isr(topic)) == [old, new])
    _wait_same_log(cluster, old, new, topic)
    # Exactly the three divergent records went: the old leader cut 8 -> 5 (its checkpointed
    # high watermark may lag, but it is not what decides).
    assert f"{topic}-0: leader {new} ends epoch 0 at 5; log end 8 -> 5" in (
        cluster.brokers[old].log_text()
    )
    stored = _stored(_segment_bytes(cluster, old, topic))
    assert stored == [(o, 0, [f"common-{o}".encode()]) for o in range(5)] + [
        (5 + i, new_epoch, [f"new-{i}".encode()]) for i in range(4)
    ]
    checkpoint = (_partition_dir(cluster, old, topic) / "leader-epoch-checkpoint").read_text()
    assert checkpoint == f"0\n2\n0 0\n{new_epoch} 5\n"
    assert (
        checkpoint == (_partition_dir(cluster, new, topic) / "leader-epoch-checkpoint").read_text()
    )


def test_killed_follower_restarts_truncates_to_the_leader_and_catches_up(cluster: Cluster) -> None:
    cluster.start()
    view = cluster.wait_unfenced()
    assert view.controller is not None
    topic = "follower-kill"
    cluster.create_topic(topic, "--partitions", "1", "--replication-factor", "3")
    view = cluster.wait_isr_whole(topic)
    leader = view.leader(topic)
    follower = next(b for b in sorted(cluster.brokers) if b not in (leader, view.controller[0]))
    producer = VerifiableProducer(cluster.bootstrap(), topic, [0]).start()
    producer.wait_acked(200)
    cluster.brokers[follower].kill()
    cluster.wait(f"{follower} out of the ISR", lambda v: follower not in v.isr(topic))
    producer.wait_acked(200)  # the others go on without it
    log_before = len(cluster.brokers[follower].log_text())
    cluster.brokers[follower].start()
    cluster.wait_isr_whole(topic)
    producer.wait_acked(100)
    result = verify_consumed(cluster.bootstrap(), producer)
    print(result)
    result.check()
    _wait_same_log(cluster, follower, leader, topic)
    # It asked the leader where its log parts from the leader's before fetching again (the
    # line may come before or after the start-up line, so the whole restart is searched).
    restarted = cluster.brokers[follower].log_text()[log_before:]
    assert f"{topic}-0: leader {leader} ends epoch" in restarted
    checkpoint = "leader-epoch-checkpoint"
    assert (_partition_dir(cluster, follower, topic) / checkpoint).read_text() == (
        _partition_dir(cluster, leader, topic) / checkpoint
    ).read_text()


def test_idempotent_producer_across_a_leader_sigkill_sees_every_ack_once_in_order(
    cluster: Cluster,
) -> None:
    cluster.start()
    view = cluster.wait_unfenced()
    assert view.controller is not None
    topic = "idem-failover"
    cluster.create_topic(topic, "--partitions", "2", "--replication-factor", "3")
    view = cluster.wait_isr_whole(topic)
    # The leader of partition 0 dies; prefer one that is not the controller (its failover
    # waits for the controller lease as well, which proves nothing more here).
    leaders = {p: view.leader(topic, p) for p in (0, 1)}
    victim = leaders[0]
    producer = VerifiableProducer(cluster.bootstrap(), topic, [0, 1]).start()
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap(),
            "group.id": f"epochs-{topic}",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.assign([CTP(topic, p, OFFSET_BEGINNING) for p in (0, 1)])
    seen: dict[int, list[tuple[int, str]]] = {0: [], 1: []}

    def drain(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()  # a detected truncation would show here
            p, offset = int(msg.partition() or 0), int(msg.offset() or 0)
            seen[p].append((offset, (msg.value() or b"").decode()))

    producer.wait_acked(300)
    drain(2.0)
    assert seen[0], "the consumer read partition 0 before the failover"
    cluster.brokers[victim].kill()
    cluster.wait(
        f"partition 0 of {topic} led elsewhere", lambda v: v.leader(topic) not in (victim, -1)
    )
    producer.wait_acked(300, timeout_s=90)
    drain(2.0)
    cluster.brokers[victim].start()
    cluster.wait_isr_whole(topic, timeout_s=90)
    producer.wait_acked(100)
    result = verify_consumed(cluster.bootstrap(), producer, timeout_s=90)
    print(result)
    result.check()
    assert not producer.failed, producer.failed[:5]
    assert not [e for e in producer.errors if "OUT_OF_ORDER" in e or "atal" in e], producer.errors
    # The consumer read across the leader change (librdkafka validates its position with
    # OffsetsForLeaderEpoch, KIP-320) and saw each record once, in offset order, none skipped.
    acked = producer.stop()
    deadline = time.monotonic() + 60
    while any(len(seen[p]) < max((o for o, _ in acked[p]), default=-1) + 1 for p in (0, 1)):
        assert time.monotonic() < deadline, {p: len(v) for p, v in seen.items()}
        drain(0.5)
    consumer.close()
    for p in (0, 1):
        offsets = [o for o, _ in seen[p]]
        assert offsets == list(range(len(offsets))), f"partition {p}: gaps or repeats"
        by_offset = dict(seen[p])
        assert all(by_offset[o] == v for o, v in acked[p]), f"partition {p}: acked != read"
