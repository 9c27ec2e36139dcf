"""A replica whose log directory failed for real (tmpfs remounted read-only) gets a new home in
another directory of the same broker, live, through AlterReplicaLogDirs (a Spindle extension:
Kafka answers KAFKA_STORAGE_ERROR and re-creates the replica only when the broker restarts
without the directory, KIP-858).

Three broker processes with two directories each, every directory its own tmpfs. Broker 1
follows both partitions of ``moved`` (RF 3) from its dir1 and is the only replica of ``alone``,
also in dir1. dir1 fails under an idempotent acks=all producer. Then, against broker 1:

* into the failed dir1, into a cordoned dir2, and for ``alone`` (broker 1 would be its only
  copy: there is no leader to refetch from) the request is refused;
* ``moved``'s replicas into dir2: accepted, and accepted again (idempotent); the controller
  records dir2 for them, broker 1 rejoins their ISR, and the broker never restarted;
* with brokers 2 and 3 stopped, broker 1 leads ``moved`` from the re-homed replicas and every
  acknowledged record reads back from it, at the offset it was acknowledged with;
* dir1 healed and broker 1 restarted, it starts (two copies of a partition would otherwise
  refuse start-up): the re-homed copies win, the old ones are set aside as ``-stray``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import for_code
from kafka.structs import TopicPartitionReplica

from ..cluster import Cluster, remount
from ..conftest import Etcd
from ..verifiable import VerifiableProducer, verify_consumed
from .test_cluster_cordon import _cordon, _wait_reported

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounts tmpfs per log dir: needs root"),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("rehome")
    found = Cluster(base, etcd, nodes=3, dirs=2, tmpfs=True)
    try:
        found.start()
        found.wait_unfenced()
        yield found
    finally:
        for b in found.brokers.values():
            for path in b.log_dirs:  # a read-only tmpfs still unmounts, but heal it first
                subprocess.run(["mount", "-o", "remount,rw", path], check=False)
        found.close()


def _alter(admin: KafkaAdminClient, moves: dict[tuple[str, int], str]) -> dict[str, str]:
    """AlterReplicaLogDirs on broker 1: ``topic-partition`` -> error name (``NONE``)."""
    answer = admin.alter_replica_log_dirs(
        {TopicPartitionReplica(t, p, 1): d for (t, p), d in moves.items()}
    )
    out = {}
    for r, err in answer.items():
        code = getattr(err, "errno", err) if err is not None else 0
        out[f"{r.topic}-{r.partition}"] = "NONE" if not code else for_code(int(code)).__name__
    return out


def test_a_replica_in_a_failed_dir_is_rehomed_live_in_another_dir_of_its_broker(
    cluster: Cluster, tmp_path: Path
) -> None:
    b1 = cluster.brokers[1]
    dir1, dir2 = b1.log_dirs
    cluster.create_topic("moved", "--replica-assignment", "2:1:3,3:1:2")
    cluster.create_topic("alone", "--replica-assignment", "1")
    cluster.wait_isr_whole("moved")
    plan = {
        "version": 1,
        "partitions": [
            {
                "topic": "moved",
                "partition": 0,
                "replicas": [2, 1, 3],
                "log_dirs": ["any", dir1, "any"],
            },
            {
                "topic": "moved",
                "partition": 1,
                "replicas": [3, 1, 2],
                "log_dirs": ["any", dir1, "any"],
            },
            {"topic": "alone", "partition": 0, "replicas": [1], "log_dirs": [dir1]},
        ],
    }
    cluster.reassign(plan, tmp_path / "place.json")
    for name in ("moved-0", "moved-1", "alone-0"):
        assert (Path(dir1) / name).is_dir(), name
        assert not (Path(dir2) / name).exists(), name
    pid = b1.proc.pid if b1.proc is not None else None

    producer = VerifiableProducer(cluster.bootstrap(), "moved", [0, 1]).start()
    producer.wait_acked(200)
    remount(dir1, "ro")  # broker 1's next fetched append there fails: dir1 goes offline
    dir1_id, dir2_id = cluster.dir_id(1, 0), cluster.dir_id(1, 1)
    cluster.wait(
        "broker 1's dir1 offline and broker 1 out of moved's ISRs",
        lambda v: (
            dir1_id in v.offline_dirs.get(1, [])
            and all(1 not in p.isr for p in v.topics["moved"].partitions.values())
        ),
    )

    admin = KafkaAdminClient(bootstrap_servers=b1.bootstrap)
    try:
        refused = _alter(admin, {("moved", 0): dir1, ("alone", 0): dir2})
        assert refused == {"moved-0": "KafkaStorageError", "alone-0": "KafkaStorageError"}
        _cordon(cluster, 1, [dir2])
        _wait_reported(cluster, {1: [dir2_id], 2: [], 3: []})
        assert _alter(admin, {("moved", 0): dir2}) == {
            "moved-0": "InvalidReplicationAssignmentError"
        }
        cluster.tool(
            "kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", "1",
            "--delete-config", "cordoned.log.dirs",
        )  # fmt: skip
        _wait_reported(cluster, {1: [], 2: [], 3: []})
        wanted = {("moved", 0): dir2, ("moved", 1): dir2}
        assert _alter(admin, wanted) == {"moved-0": "NONE", "moved-1": "NONE"}
        assert _alter(admin, wanted) == {"moved-0": "NONE", "moved-1": "NONE"}
    finally:
        admin.close()

    view = cluster.wait(
        "moved's replicas on broker 1 recorded in dir2 and back in the ISR",
        lambda v: all(
            p.directories[list(p.replicas).index(1)] == dir2_id and sorted(p.isr) == [1, 2, 3]
            for p in v.topics["moved"].partitions.values()
        ),
        timeout_s=90,
    )
    alone = view.topics["alone"].partitions[0]
    assert alone.directories[0] != dir2_id  # the only copy was not replaced by an empty one
    assert (Path(dir2) / "moved-0").is_dir()
    assert (Path(dir2) / "moved-1").is_dir()
    assert b1.proc is not None
    assert b1.proc.pid == pid, "broker 1 never restarted"
    assert b1.proc.poll() is None
    producer.wait_acked(200)

    # Brokers 2 and 3 stop: broker 1 leads moved from the re-homed copies alone.
    for other in (2, 3):
        cluster.brokers[other].stop()
    cluster.wait(
        "broker 1 leading moved alone",
        lambda v: all(p.leader == 1 for p in v.topics["moved"].partitions.values()),
    )
    result = verify_consumed(cluster.bootstrap([1]), producer, timeout_s=90)
    print(result)
    result.check()
    assert result.acked >= 400

    # dir1 readable again, broker 1 restarts: the re-homed copies win, the old ones are set
    # aside as -stray (kept, not loaded); alone-0, never re-homed, loads from dir1 as before.
    remount(dir1, "rw")
    b1.stop()
    b1.start()
    cluster.wait_unfenced([1])
    strays = sorted(n.split(".")[0] for n in os.listdir(dir1) if n.endswith("-stray"))
    assert strays == ["moved-0", "moved-1"]
    assert (Path(dir1) / "alone-0").is_dir()
    assert (Path(dir2) / "moved-0").is_dir()
