"""Kafka's system test ``reassign_partitions_test.py`` (ReassignPartitionsTest) on Spindle: four
broker processes with two log directories each, a topic of 20 partitions with replication
factor 3 and min.insync.replicas 3, an idempotent acks=all producer running throughout.

Each case shuffles the partitions' replica lists among themselves (as Kafka's test does) and
picks a log directory for every new replica, then runs ``kafka-reassign-partitions --execute``
with that ``log_dirs`` JSON and ``--throttle``, and ``--verify`` until every move is complete;
with ``bounce`` two brokers are SIGKILLed and restarted in turn while the moves run. Then:
every acknowledged message is read back exactly once and in order, ``kafka-topics --describe``
shows the planned replicas with all of them in sync and the leader among them, each replica
sits in the directory the plan gave it, and ``kafka-leader-election --election-type preferred
--all-topic-partitions`` puts every partition's first replica in charge.

With min.insync.replicas 3 a partition refuses acks=all writes while one of its replicas is
down or catching up (NOT_ENOUGH_REPLICAS, retriable): the producer waits and retries, so the
bounces delay messages but must not lose or duplicate any.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..cluster import Cluster
from ..conftest import Etcd
from ..verifiable import VerifiableProducer, verify_consumed

pytestmark = pytest.mark.slow

TOPIC = "reassign"
PARTITIONS = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Cluster]:
    started = Cluster(tmp_path_factory.mktemp("reassign"), etcd, nodes=4, dirs=2)
    try:
        started.start()
        started.wait_unfenced()
        started.create_topic(
            TOPIC,
            "--partitions",
            str(PARTITIONS),
            "--replication-factor",
            "3",
            "--config",
            "min.insync.replicas=3",
        )
        started.wait_isr_whole(TOPIC)
        yield started
    finally:
        started.close()


def _shuffled_plan(cluster: Cluster, rng: random.Random) -> dict[str, object]:
    """Kafka's shuffle: each partition takes another partition's replica list; every replica
    gets an explicit log directory of its broker."""
    current = cluster.view().topics[TOPIC].partitions
    lists = [list(current[p].replicas) for p in range(PARTITIONS)]
    rng.shuffle(lists)
    return {
        "version": 1,
        "partitions": [
            {
                "topic": TOPIC,
                "partition": p,
                "replicas": replicas,
                "log_dirs": [rng.choice(cluster.brokers[b].log_dirs) for b in replicas],
            }
            for p, replicas in enumerate(lists)
        ],
    }


def _bounce(cluster: Cluster, producer: VerifiableProducer, nodes: list[int]) -> None:
    """SIGKILL and restart ``nodes`` in turn, letting produce make progress in between."""
    for node in nodes:
        cluster.brokers[node].kill()
        cluster.wait(f"broker {node}'s session to end", lambda v, n=node: n not in v.live)
        cluster.brokers[node].start()
        cluster.wait_unfenced()
        producer.wait_acked(50, timeout_s=120)


@pytest.mark.parametrize("bounce", [False, True], ids=["no_bounce", "bounce"])
def test_shuffled_reassignment_completes_without_loss(
    cluster: Cluster, tmp_path: Path, bounce: bool
) -> None:
    rng = random.Random(f"reassign-{bounce}")
    plan = _shuffled_plan(cluster, rng)
    entries: list[dict[str, Any]] = plan["partitions"]  # type: ignore[assignment]
    before = cluster.view().topics[TOPIC].partitions
    gains = {
        b: sum(b in e["replicas"] and b not in before[e["partition"]].replicas for e in entries)
        for b in cluster.brokers
    }
    print(f"\n[bounce={bounce}] replicas each broker gains: {gains}")
    producer = VerifiableProducer(cluster.bootstrap(), TOPIC, range(PARTITIONS), rate=150).start()
    producer.wait_acked(200)

    plan_file = tmp_path / "plan.json"
    out = cluster.execute_reassignment(plan, plan_file, "--throttle", "5000000")
    assert "The inter-broker throttle limit was set to 5000000 B/s" in out, out
    if bounce:
        # The two brokers gaining the most replicas: their new replicas restart fetching.
        _bounce(cluster, producer, sorted(gains, key=lambda b: -gains[b])[:2])
    out = cluster.verify_reassignment(plan_file, timeout_s=180)
    assert "Clearing broker-level throttles" in out, out
    print(out.strip().splitlines()[-1])
    producer.wait_acked(200, timeout_s=120)
    result = verify_consumed(cluster.bootstrap(), producer)
    print(result)
    result.check()

    view = cluster.wait_isr_whole(TOPIC, timeout_s=90)
    rows = cluster.describe(TOPIC)
    for entry in entries:
        p, replicas = entry["partition"], entry["replicas"]
        leader, described, isr = rows[p]
        assert described == replicas, (p, rows[p])
        assert sorted(isr) == sorted(replicas), (p, rows[p])
        assert leader in replicas
        assert leader == view.leader(TOPIC, p)
        for b, d in zip(replicas, entry["log_dirs"], strict=True):
            assert (Path(d) / f"{TOPIC}-{p}").is_dir(), (p, b, d)
    out = cluster.tool(
        "kafka-leader-election", "--election-type", "preferred", "--all-topic-partitions"
    )
    print(out.strip().splitlines()[0] if out.strip() else "(no election needed)")
    rows = cluster.describe(TOPIC)
    assert all(leader == replicas[0] for leader, replicas, _isr in rows.values()), rows
