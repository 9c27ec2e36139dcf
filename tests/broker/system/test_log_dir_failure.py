"""Kafka's system test ``log_dir_failure_test.py`` (LogDirFailureTest) on Spindle: three broker
processes with two log directories each, every directory its own tmpfs; ``topic1``
(min.insync.replicas 1) lives in dir1 and ``topic2`` (min.insync.replicas 2) in dir2 on every
broker, placed by ``kafka-reassign-partitions`` with ``log_dirs``.

For the leader and for a follower of ``topic2``, with and without a clean bounce of that
broker: dir2 is remounted read-only under an idempotent acks=all producer, and

1. the broker stays up, its dir2 is reported offline, it leaves topic2's leadership and ISR;
2. topic2 keeps taking writes on the other brokers, and every acknowledged message is read
   back exactly once, in order;
3. with the other two brokers stopped, the broker alone still produces to and consumes from
   topic1 (its healthy dir1).

Kafka makes the directory unwritable with ``chmod a-w``; root ignores modes, so here the file
system itself refuses writes (EROFS), as a disk gone read-only after errors does.

``test_cluster_dir_failure.py`` covers the controller's reaction for a leader's directory
without replication checks; this adds the follower, the bounces, no loss and the lone broker.
Runs the four cases in sequence on one cluster: each starts by healing the last one (dir rw
again, broker restarted, every replica back in sync) -- which itself checks recovery.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..cluster import Cluster, remount
from ..conftest import Etcd
from ..verifiable import VerifiableProducer, verify_consumed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounts tmpfs per log dir: needs root"),
]

TOPICS = {"topic1": ("1", 0), "topic2": ("2", 1)}  # name -> (min.insync.replicas, dir index)


class Harness:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.failed: set[int] = set()  # brokers whose dir2 is read-only now

    def heal(self) -> None:
        """dir2 writable again everywhere and every broker up (a broker with an offline dir
        restarts: offline stays offline until restart); every replica back in sync."""
        for node in sorted(self.failed):
            remount(self.cluster.brokers[node].log_dirs[1], "rw")
            self.cluster.brokers[node].stop()
        self.failed.clear()
        self.cluster.start()
        self.cluster.wait_unfenced()
        for topic in TOPICS:
            self.cluster.wait_isr_whole(topic, timeout_s=90)


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Harness]:
    base = tmp_path_factory.mktemp("logdirfail")
    cluster = Cluster(
        base, etcd, nodes=3, dirs=2, tmpfs=True, extra={"replica.lag.time.max.ms": "5000"}
    )
    try:
        cluster.start()
        cluster.wait_unfenced()
        for topic, (min_isr, _d) in TOPICS.items():
            cluster.create_topic(
                topic,
                "--partitions",
                "1",
                "--replication-factor",
                "3",
                "--config",
                f"min.insync.replicas={min_isr}",
            )
        _place(cluster, base / "place.json")
        yield Harness(cluster)
    finally:
        cluster.close()


def _place(cluster: Cluster, plan_file: Path) -> None:
    """Each topic's replicas into its own directory on every broker: the reassignment tool
    with the same replicas and explicit ``log_dirs`` (AlterReplicaLogDirs), then --verify."""
    view = cluster.wait_isr_whole("topic2")
    partitions: list[dict[str, object]] = []
    for topic, (_m, index) in TOPICS.items():
        replicas = view.topics[topic].partitions[0].replicas
        partitions.append(
            {
                "topic": topic,
                "partition": 0,
                "replicas": replicas,
                "log_dirs": [cluster.brokers[b].log_dirs[index] for b in replicas],
            }
        )
    cluster.execute_reassignment({"version": 1, "partitions": partitions}, plan_file)
    cluster.verify_reassignment(plan_file)
    for node, broker in cluster.brokers.items():
        for topic, (_m, index) in TOPICS.items():
            assert (Path(broker.log_dirs[index]) / f"{topic}-0").is_dir(), (node, topic)
            assert not (Path(broker.log_dirs[1 - index]) / f"{topic}-0").exists(), (node, topic)


@pytest.mark.parametrize("role", ["leader", "follower"])
@pytest.mark.parametrize("bounce", [False, True], ids=["no_bounce", "bounce"])
def test_failed_dir_leaves_topic2_and_keeps_topic1_serving(
    harness: Harness, role: str, bounce: bool
) -> None:
    cluster = harness.cluster
    harness.heal()
    view = cluster.view()
    leader = view.leader("topic2")
    node = leader if role == "leader" else next(b for b in view.isr("topic2") if b != leader)
    dir2 = cluster.dir_id(node, 1)
    print(f"\n[{role}, bounce={bounce}] failing dir2 of broker {node} (topic2 leader {leader})")

    producer = VerifiableProducer(cluster.bootstrap(), "topic2", [0]).start()
    producer.wait_acked(100)
    remount(cluster.brokers[node].log_dirs[1], "ro")
    harness.failed.add(node)
    if bounce:
        cluster.brokers[node].stop()
        cluster.brokers[node].start()
    after = cluster.wait(
        f"broker {node} out of topic2's leadership and ISR, dir2 offline",
        lambda v: (
            v.leader("topic2") not in (node, -1)
            and node not in v.isr("topic2")
            and dir2 in v.offline_dirs.get(node, [])
        ),
    )
    assert cluster.is_up(node), "the broker must stay up serving dir1"
    # topic1 (dir1) keeps, or after the bounce regains, every replica in sync.
    cluster.wait("topic1 in sync on every broker", lambda v: sorted(v.isr("topic1")) == [1, 2, 3])
    producer.wait_acked(200)  # topic2 takes writes on the other brokers (ISR 2 = min.isr)
    leader_now, replicas, isr = cluster.describe("topic2")[0]
    assert leader_now == after.leader("topic2")
    assert node not in isr
    assert sorted(replicas) == [1, 2, 3]
    result = verify_consumed(cluster.bootstrap(), producer)
    print(result)
    result.check()

    # The other brokers stop: the broker alone leads topic1 from its healthy dir1.
    for other in sorted(set(cluster.brokers) - {node}):
        cluster.brokers[other].stop()
    cluster.wait(
        f"broker {node} alone leading topic1",
        lambda v: v.leader("topic1") == node and v.isr("topic1") == [node],
    )
    alone = cluster.bootstrap([node])
    producer = VerifiableProducer(alone, "topic1", [0]).start()
    producer.wait_acked(200)
    result = verify_consumed(alone, producer)
    print(result)
    result.check()
    assert cluster.is_up(node)
