"""An idempotent producer sees no duplicates across leader changes (issue 9): three broker
processes, an idempotent acks=all librdkafka producer (``max.in.flight`` 5) running through
every kind of leader change the cluster makes, and a verifying consumer.

The module's one scenario, in order, with produce making progress after each step:

1. the leader of partition 0 SIGKILLed (the controller moves leadership when its session
   ends), then restarted (it truncates to the new leader and catches up);
2. the leader of partition 1 SIGSTOPped longer than the producer's ``request.timeout.ms``
   (its in-flight requests time out in the client, which retries them on the new leader),
   then SIGKILLed and restarted;
3. a follower SIGSTOPped past ``replica.lag.time.max.ms`` (the ISR shrinks; acks=all waits
   on it until then), then SIGCONTed (it rejoins);
4. a preferred election (``kafka-leader-election``), which moves the leaderships the
   failures moved back to each partition's first replica;
5. a reassignment that rotates partition 2's replica list, and a preferred election that
   hands its leadership to the new first replica;
6. a broker bounce (SIGTERM, restart) of a leader.

Then every acknowledged message is read back exactly once, at the offset it was acknowledged
with, in order. Apache Kafka 3.9 (three KRaft brokers, the same client and steps) shows no
duplicate in this scenario either.

A second, byte-exact check: a batch acknowledged by one leader and sent again (the same
producer id, epoch and sequences) to its follower, elected after a spell without any leader,
is answered as a duplicate -- no error, the original offset -- and stored once (Kafka's
``ProducerStateEntry`` keeps the last five batches of every producer on every replica,
followers included).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.producer import ProduceResponse
from spindle.broker.records.batch import build_batch

from ..cluster import Cluster, running
from ..conftest import Etcd
from ..verifiable import VerifiableProducer, Verification, verify_consumed
from ..wire import Wire, fetch_all_values, init_producer_id, produce_batch_request

pytestmark = pytest.mark.slow

TOPIC = "idem"
PARTITIONS = 3
LAG_MS = 1500
REQUEST_TIMEOUT_MS = 3000
"""The producer's request.timeout.ms (the broker's acks=all wait) and, doubled, its
socket.timeout.ms (the client's own timeout of a request in flight)."""
STOPPED_S = 8.0
"""How long both replicas stay stopped in the leaderless spell."""


def _leader(cluster: Cluster, partition: int, *, topic: str = TOPIC) -> int:
    return cluster.view().leader(topic, partition)


def _new_leader(cluster: Cluster, partition: int, old: int, topic: str = TOPIC) -> int:
    view = cluster.wait(
        f"a leader of {topic}-{partition} other than {old}",
        lambda v: v.leader(topic, partition) not in (-1, old),
    )
    return view.leader(topic, partition)


def _whole(cluster: Cluster) -> None:
    cluster.start()
    cluster.wait_unfenced()
    cluster.wait_isr_whole(TOPIC, timeout_s=90)


def _pause(cluster: Cluster, node: int, seconds: float) -> None:
    proc = cluster.brokers[node].proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        proc.send_signal(signal.SIGCONT)


def _preferred(cluster: Cluster) -> str:
    out = cluster.tool(
        "kafka-leader-election", "--election-type", "preferred", "--all-topic-partitions"
    )
    return out.strip().splitlines()[0] if out.strip() else "(no election needed)"


def _run_failovers(cluster: Cluster, producer: VerifiableProducer, tmp: Path) -> list[str]:
    steps: list[str] = []

    def progress(step: str) -> None:
        producer.wait_acked(60, timeout_s=120)
        steps.append(f"{step} (acked {producer.acked_count()})")

    victim = _leader(cluster, 0)
    cluster.brokers[victim].kill()
    progress(f"SIGKILL leader {victim} of p0 -> {_new_leader(cluster, 0, victim)}")
    _whole(cluster)

    victim = _leader(cluster, 1)
    proc = cluster.brokers[victim].proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    time.sleep(REQUEST_TIMEOUT_MS / 1000 + 1)
    proc.send_signal(signal.SIGKILL)
    proc.send_signal(signal.SIGCONT)
    proc.wait()
    progress(f"SIGSTOP {REQUEST_TIMEOUT_MS / 1000 + 1:.0f} s then SIGKILL leader {victim} of p1")
    _whole(cluster)

    view = cluster.view()
    part = view.topics[TOPIC].partitions[2]
    follower = next(b for b in part.replicas if b != part.leader)
    _pause(cluster, follower, 2 * LAG_MS / 1000)
    progress(f"SIGSTOP follower {follower} of p2 for {2 * LAG_MS} ms")
    _whole(cluster)

    progress(f"preferred election: {_preferred(cluster)}")

    replicas = list(cluster.view().topics[TOPIC].partitions[2].replicas)
    rotated = replicas[1:] + replicas[:1]
    plan = {"version": 1, "partitions": [{"topic": TOPIC, "partition": 2, "replicas": rotated}]}
    cluster.reassign(plan, tmp / "rotate.json")
    progress(f"reassign p2 {replicas} -> {rotated}, then {_preferred(cluster)}")
    assert _leader(cluster, 2) == rotated[0]

    victim = _leader(cluster, 0)
    cluster.brokers[victim].stop()
    progress(f"SIGTERM leader {victim} of p0 -> {_new_leader(cluster, 0, victim)}")
    _whole(cluster)
    return steps


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Cluster]:
    extra = {"replica.lag.time.max.ms": str(LAG_MS), "min.insync.replicas": "2"}
    with running(tmp_path_factory.mktemp("idem"), etcd, nodes=3, dirs=1, extra=extra) as c:
        c.create_topic(TOPIC, "--partitions", str(PARTITIONS), "--replication-factor", "3")
        c.wait_isr_whole(TOPIC)
        yield c


@pytest.fixture(scope="module")
def verified(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Verification:
    """The scenario of the module docstring, run once: what the verifying consumer found."""
    config: dict[str, object] = {
        "max.in.flight.requests.per.connection": 5,
        "request.timeout.ms": REQUEST_TIMEOUT_MS,
        "socket.timeout.ms": 2 * REQUEST_TIMEOUT_MS,
    }
    if "SPINDLE_RDKAFKA_DEBUG" not in os.environ:
        config["debug"] = "eos"  # librdkafka's idempotence decisions, printed on failure
    producer = VerifiableProducer(cluster.bootstrap(), TOPIC, range(PARTITIONS), config=config)
    producer.start().wait_acked(100)
    steps = _run_failovers(cluster, producer, tmp_path_factory.mktemp("plans"))
    producer.wait_acked(100, timeout_s=120)
    result = verify_consumed(cluster.bootstrap(), producer, timeout_s=120)
    print("\n" + "\n".join(steps) + f"\n{result}")
    return result


def test_every_acknowledged_message_is_read_back_once_in_order_across_every_kind_of_failover(
    verified: Verification,
) -> None:
    assert verified.acked > 0
    verified.check()
    assert verified.failed_sends == 0, verified


def test_a_follower_elected_after_a_leaderless_spell_answers_a_retry_as_a_duplicate(
    cluster: Cluster, verified: Verification
) -> None:
    """Both replicas of a partition stop (SIGSTOP: their sessions end, the leader first), so
    the controller makes the follower leader and then, the follower being fenced too, leaves
    the partition leaderless with the follower as the last ISR member; the old leader is
    killed and the follower resumes and is elected. It may apply that as one change
    (leaderless, then leading) without ever seeing itself take over from the old leader;
    the batch it replicated must still be known to it. Before its producer state followed
    the replicated log, the retry was appended a second time in 2 of 4 such runs (and
    always when the new leader only saw the spell's end); Kafka 3.9 answers it as a
    duplicate."""
    topic = "retry"
    view = cluster.view()
    assert view.controller is not None
    # The two replicas are the brokers that do not run the controller, so one controller
    # sees both sessions end, in the order they stopped.
    old, new = sorted(b for b in cluster.brokers if b != view.controller[0])
    cluster.create_topic(
        topic, "--replica-assignment", f"{old}:{new}", "--config", "min.insync.replicas=1"
    )
    cluster.wait_isr_whole(topic)
    with Wire(cluster.brokers[old].port) as wire:
        pid = init_producer_id(wire)
        assert pid.error_code == 0, pid

        def batch(seq: int, count: int) -> bytes:
            values = [f"v{seq + i}".encode() for i in range(count)]
            return build_batch(
                values,
                producer_id=pid.producer_id,
                producer_epoch=pid.producer_epoch,
                base_sequence=seq,
            )

        def produce(w: Wire, records: bytes) -> tuple[int, int]:
            req = produce_batch_request(topic, 0, records, acks=-1)
            part = w.call(req, ProduceResponse).responses[0].partition_responses[0]
            return part.error_code, part.base_offset

        assert produce(wire, batch(0, 5)) == (0, 0)
        assert produce(wire, batch(5, 5)) == (0, 5)  # acked by the ISR: on both replicas
    old_proc, new_proc = cluster.brokers[old].proc, cluster.brokers[new].proc
    assert old_proc is not None
    assert new_proc is not None
    old_proc.send_signal(signal.SIGSTOP)
    time.sleep(1)
    new_proc.send_signal(signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        cluster.wait(
            f"{topic}-0 leaderless with only {new} in sync",
            lambda v: v.leader(topic, 0) == -1 and v.isr(topic) == [new],
            timeout_s=60,
        )
        # Stopped this long, the follower wakes to find its watch's connection gone: it
        # reloads the metadata and applies only where it ended (leaderless, its session over).
        time.sleep(max(0.0, stopped + STOPPED_S - time.monotonic()))
    finally:
        old_proc.send_signal(signal.SIGKILL)
        old_proc.send_signal(signal.SIGCONT)
        new_proc.send_signal(signal.SIGCONT)
    old_proc.wait()
    cluster.wait(f"{new} leading {topic}-0", lambda v: v.leader(topic, 0) == new)
    with Wire(cluster.brokers[new].port) as wire:
        # The producer never saw the answer for 5..9 and retries it on the new leader.
        assert produce(wire, batch(5, 5)) == (0, 5)
        assert produce(wire, batch(0, 5)) == (0, 0)  # any of the last five batches
        assert produce(wire, batch(10, 1)) == (0, 10)  # and the next one follows on
        values = fetch_all_values(wire, topic)
    assert values == [f"v{i}".encode() for i in range(11)], values
    cluster.start([old])
    cluster.wait_unfenced()
    print(json.dumps({"old_leader": old, "new_leader": new, "values": len(values)}))
