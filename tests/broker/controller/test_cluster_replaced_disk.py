"""A replaced disk (KIP-858) with real broker processes: a broker stops, one of its log
directories is replaced by an empty one (a new disk: its ``meta.properties`` gets a new
``directory.id``), and the broker restarts. The replicas the metadata placed in the old
directory count as LOST; the broker re-creates them in a live directory of its own, they fetch
everything from the leaders, rejoin the ISR, and every record acknowledged with acks=all
(while the broker was away too) is served by that broker alone afterwards."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..cluster import Cluster, View, running
from ..conftest import Etcd
from ..verifiable import VerifiableProducer, verify_consumed

pytestmark = pytest.mark.slow

TOPIC = "disk"
PARTITIONS = 4
VICTIM = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Cluster]:
    with running(tmp_path_factory.mktemp("replaced-disk"), etcd, nodes=3, dirs=2) as started:
        yield started


def _replica_dir(cluster: Cluster, node: int, partition: int) -> str | None:
    for d in cluster.brokers[node].log_dirs:
        if (Path(d) / f"{TOPIC}-{partition}").is_dir():
            return d
    return None


def test_replaced_disk_replicas_are_recreated_caught_up_and_in_sync(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, "--partitions", str(PARTITIONS), "--replication-factor", "3")
    cluster.wait_isr_whole(TOPIC)
    replaced = cluster.brokers[VICTIM].log_dirs[0]
    deadline = time.monotonic() + 30
    while not all(_replica_dir(cluster, VICTIM, p) for p in range(PARTITIONS)):
        assert time.monotonic() < deadline, "the victim never created its replicas"
        time.sleep(0.1)
    on_replaced = [p for p in range(PARTITIONS) if _replica_dir(cluster, VICTIM, p) == replaced]
    assert on_replaced, "placement put none of the victim's replicas in its first directory"
    old_id = cluster.dir_id(VICTIM, 0)

    producer = VerifiableProducer(cluster.bootstrap(), TOPIC, range(PARTITIONS)).start()
    producer.wait_acked(200)
    cluster.brokers[VICTIM].stop()
    cluster.wait(f"broker {VICTIM}'s session to end", lambda v: VICTIM not in v.live)
    producer.wait_acked(200)  # acknowledged while the victim is away
    shutil.rmtree(replaced)
    Path(replaced).mkdir()
    cluster.start([VICTIM])

    def recovered(view: View) -> bool:
        dirs = view.dirs.get(VICTIM, [])
        if old_id in dirs or VICTIM not in view.unfenced:
            return False
        return all(
            sorted(p.isr) == [1, 2, 3] and p.directories[p.replicas.index(VICTIM)] in dirs
            for p in view.topics[TOPIC].partitions.values()
        )

    view = cluster.wait("the victim's replicas re-created, caught up and in sync", recovered)
    producer.wait_acked(200)
    new_id = cluster.dir_id(VICTIM, 0)
    assert new_id != old_id
    assert old_id not in view.dirs[VICTIM]
    assert new_id in view.dirs[VICTIM]
    # The old directory's replicas were re-created on the broker (in either directory).
    assert all(_replica_dir(cluster, VICTIM, p) for p in on_replaced)
    # The victim alone serves everything acknowledged: stop the other two, it leads all.
    for n in (1, 3):
        cluster.brokers[n].stop()
    cluster.wait(
        "the victim leading every partition",
        lambda v: all(p.leader == VICTIM for p in v.topics[TOPIC].partitions.values()),
    )
    result = verify_consumed(cluster.bootstrap([VICTIM]), producer)
    print(result)
    result.check()
    assert result.acked >= 600
