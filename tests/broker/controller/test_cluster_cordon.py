"""KIP-1066 in the elected controller, with real broker processes and Kafka's ``kafka-configs``:
a broker reports the ids of the directories ``cordoned.log.dirs`` names on its session, the
controller places no new replica on a broker whose every directory is cordoned, and a broker
with one cordoned directory puts its new replicas in the other. Uncordoning is reported too:
the broker takes new replicas again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.store import MetadataStore

from ..cluster import Cluster, running
from ..conftest import Etcd

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Cluster]:
    with running(tmp_path_factory.mktemp("cordon"), etcd, nodes=3, dirs=2) as started:
        yield started


def _cordoned_on_sessions(cluster: Cluster) -> dict[int, list[str]]:
    async def read() -> dict[int, list[str]]:
        client = EtcdClient([cluster.etcd_url])
        try:
            store = MetadataStore(client, prefix=cluster.prefix)
            await store.load()
            return {b: list(s.cordoned_dirs) for b, s in store.sessions.items()}
        finally:
            await client.close()

    return asyncio.run(read())


def _cordon(cluster: Cluster, node: int, paths: list[str]) -> None:
    cluster.tool(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        str(node),
        "--add-config",
        f"cordoned.log.dirs=[{','.join(paths)}]",
    )


def _wait_reported(cluster: Cluster, want: dict[int, list[str]]) -> None:
    cluster.wait(
        f"cordoned directories {want} on the brokers' sessions",
        lambda _v: _cordoned_on_sessions(cluster) == want,
        timeout_s=30,
    )


def test_no_new_replica_lands_in_a_cordoned_directory(cluster: Cluster) -> None:
    b1, b3 = cluster.brokers[1], cluster.brokers[3]
    _cordon(cluster, 1, [b1.log_dirs[0]])
    _cordon(cluster, 3, b3.log_dirs)
    _wait_reported(
        cluster,
        {1: [cluster.dir_id(1, 0)], 2: [], 3: sorted([cluster.dir_id(3, 0), cluster.dir_id(3, 1)])},
    )
    cluster.create_topic("fresh", "--partitions", "6", "--replication-factor", "2")
    view = cluster.wait_isr_whole("fresh")
    parts = view.topics["fresh"].partitions.values()
    # Broker 3 has no uncordoned directory: it gets nothing; brokers 1 and 2 share it all.
    assert all(sorted(p.replicas) == [1, 2] for p in parts)
    # Broker 1's replicas all went to its one uncordoned directory.
    assert {p.directories[p.replicas.index(1)] for p in parts} == {cluster.dir_id(1, 1)}
    assert not list(Path(b1.log_dirs[0]).glob("fresh-*"))
    assert len(list(Path(b1.log_dirs[1]).glob("fresh-*"))) == 6
    assert all(not list(Path(d).glob("fresh-*")) for d in cluster.brokers[3].log_dirs), (
        "broker 3 has replicas of the new topic"
    )


def test_uncordoned_directories_take_new_replicas_again(cluster: Cluster) -> None:
    cluster.tool(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "3",
        "--delete-config",
        "cordoned.log.dirs",
    )
    _wait_reported(cluster, {1: [cluster.dir_id(1, 0)], 2: [], 3: []})
    cluster.create_topic("later", "--partitions", "3", "--replication-factor", "3")
    view = cluster.wait_isr_whole("later")
    assert all(sorted(p.replicas) == [1, 2, 3] for p in view.topics["later"].partitions.values())
