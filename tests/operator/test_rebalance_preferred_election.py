"""A Rebalance's leadership lands where its proposal said: after the last Reassignment, the
operator runs a preferred leader election (ElectLeaders, Kafka's ``kafka-leader-election
--election-type preferred``) over the partitions whose preferred leader the plan changed -- the
planner's ``election.json`` -- and only those. Real broker processes in an elected-controller
cluster (automatic leader rebalancing off, so nothing but the election moves a leader) and a
real API server; the plan ConfigMap and the finished batch are written as the planner and the
Reassignment handler would have left them.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from spindle.operator.brokers import cluster_admin
from spindle.operator.kube import KubeApi
from spindle.operator.reconcile.rebalance import reconcile_rebalance

from ..broker.cluster import Cluster, running
from ..broker.conftest import Etcd
from ..broker.conftest import etcd as etcd
from .conftest import temporary_namespace, wait_for

pytestmark = pytest.mark.slow

TOPIC = "leads"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Cluster]:
    fixed = {"auto.leader.rebalance.enable": "false"}
    with running(tmp_path_factory.mktemp("elect"), etcd, nodes=3, dirs=1, extra=fixed) as c:
        yield c


def _leaders(cluster: Cluster, topic: str) -> dict[int, int]:
    return {p: state.leader for p, state in cluster.view().topics[topic].partitions.items()}


def _reorder(cluster: Cluster, topic: str, partition: int, replicas: list[int]) -> None:
    """The same replicas in a new order, no election: the old leader keeps leading."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    try:
        admin.alter_partition_reassignments({TopicPartition(topic, partition): replicas})
    finally:
        admin.close()
    wait_for(
        lambda: list(cluster.view().topics[topic].partitions[partition].replicas) == replicas,
        what=f"{topic}-{partition} reordered to {replicas}",
    )


def test_elect_preferred_moves_only_reordered_partitions_and_counts_already_preferred_as_done(
    cluster: Cluster,
) -> None:
    topic = f"{TOPIC}-client"
    cluster.create_topic(topic, "--replica-assignment", "1:2,1:2,2:3")
    wait_for(lambda: _leaders(cluster, topic) == {0: 1, 1: 1, 2: 2}, what="preferred leaders")
    _reorder(cluster, topic, 0, [2, 1])
    assert _leaders(cluster, topic)[0] == 1

    with cluster_admin("test", cluster.bootstrap().split(",")) as admin:
        failed = admin.elect_preferred([(topic, 0), (topic, 1)])

    assert failed == {}
    wait_for(lambda: _leaders(cluster, topic) == {0: 2, 1: 1, 2: 2}, what="broker 2 leads p0")


def test_an_unknown_partition_is_reported_by_kafkas_error_not_raised(cluster: Cluster) -> None:
    with cluster_admin("test", cluster.bootstrap().split(",")) as admin:
        failed = admin.elect_preferred([("no-such-topic", 0)])
    assert failed == {("no-such-topic", 0): "UnknownTopicOrPartitionError"}


def _apply(api_cluster: Any, doc: dict[str, Any]) -> None:
    api_cluster.apply(json.dumps(doc))


def test_a_rebalance_elects_the_plans_preferred_leaders_after_its_last_batch(
    cluster: Cluster, spindle_crds: Any
) -> None:
    topic = f"{TOPIC}-plan"
    cluster.create_topic(topic, "--replica-assignment", "1:3,1:3")
    wait_for(lambda: _leaders(cluster, topic) == {0: 1, 1: 1}, what="preferred leaders")
    _reorder(cluster, topic, 1, [3, 1])
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": 1, "replicas": [3, 1]}]}
    election = {"partitions": [{"topic": topic, "partition": 1}]}
    with temporary_namespace(spindle_crds, "elect") as ns:
        _apply(ns, {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "lead-plan"},
                    "data": {"plan.json": json.dumps(plan), "moves.json": "[]",
                             "election.json": json.dumps(election)}})  # fmt: skip
        _apply(ns, {"apiVersion": "spindle.io/v1alpha1", "kind": "Reassignment",
                    "metadata": {"name": "lead-1"},
                    "spec": {"cluster": "test", "partitions": plan["partitions"]}})  # fmt: skip
        ns.patch_status("reassignment", "lead-1", {"phase": "Completed"})
        _apply(ns, {"apiVersion": "spindle.io/v1alpha1", "kind": "Rebalance",
                    "metadata": {"name": "lead"},
                    "spec": {"cluster": "test", "mode": "full", "approve": True}})  # fmt: skip
        ns.patch_status("rebalance", "lead", {"phase": "Executing", "batch": 1, "batches": 1})
        api = KubeApi.from_kubeconfig(str(spindle_crds.kubeconfig))
        events: list[tuple[str, str, str]] = []

        def one_pass() -> dict[str, Any]:
            body = ns.get("rebalance", "lead")
            now = datetime.datetime.now(datetime.UTC)
            sink = lambda kind, reason, message: events.append((kind, reason, message))  # noqa: E731
            return reconcile_rebalance(
                api,
                body,
                now=now,
                emit=sink,
                image="unused",
                bootstrap=cluster.bootstrap().split(","),
            )

        status = one_pass()
        assert status["phase"] == "Completed"
        assert status["preferredElection"] == {"partitions": 1, "elected": 1, "failed": []}
        assert ("Normal", "PreferredLeaderElection") in {(k, r) for k, r, _ in events}
        assert ns.get("rebalance", "lead")["status"]["preferredElection"]["elected"] == 1
        wait_for(lambda: _leaders(cluster, topic) == {0: 1, 1: 3}, what="broker 3 leads p1")
