"""The count phases' proposer: Spark and numpy propose the same batch, element for element, and
the rounds do the count balancing the plans rely on."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pytest
from spindle.rebalance.generator import Shape, generate
from spindle.rebalance.goals.rack import hosting_racks, rack_limits
from spindle.rebalance.input.model import Cluster, Goals
from spindle.rebalance.input.scope import Request, build_scope
from spindle.rebalance.pipeline import make_plan
from spindle.rebalance.search import count_phases, propose
from spindle.rebalance.search.propose import CountRound, LocalProposer, Proposals
from spindle.rebalance.spark.propose import SparkProposer


@pytest.fixture(autouse=True)
def small_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Proposer rounds for these small clusters too (by default only count phases of
    ``count_phases.ROUND_MIN`` moves or more get rounds: a cost setting, not a rule)."""
    monkeypatch.setattr(count_phases, "ROUND_MIN", 256)


def _grown_cluster(*, faulty: int = 1) -> Cluster:
    """Two brokers just added: far below the replica and leader count bands, so the count
    phases need many moves (enough for proposer rounds). ``faulty``: Offline and Draining
    directories (0: counts can all be brought into band)."""
    return generate(
        Shape(
            brokers=12,
            disks=3,
            replicas=8000,
            racks=4,
            new_brokers=2,
            offline_dirs=faulty,
            draining_dirs=faulty,
            seed=11,
        )
    )


def _recorded_rounds(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> list[CountRound]:
    """The rounds a numpy plan of ``cluster`` proposes from (the live states, as they were)."""
    seen: list[CountRound] = []
    real = LocalProposer.propose

    def record(self: LocalProposer, rnd: CountRound) -> Proposals:
        seen.append(rnd)
        return real(self, rnd)

    monkeypatch.setattr(LocalProposer, "propose", record)
    make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
    monkeypatch.setattr(LocalProposer, "propose", real)
    return seen


def _same(a: Proposals, b: Proposals) -> bool:
    return all(
        np.array_equal(getattr(a, f), getattr(b, f)) for f in ("rid", "taker", "score", "rank")
    )


@pytest.mark.parametrize("shared", [True, False], ids=["parquet-files", "shipped-to-tasks"])
def test_spark_proposer_returns_the_numpy_proposers_batch_element_for_element(
    spark: Any, monkeypatch: pytest.MonkeyPatch, shared: bool
) -> None:
    cluster = _grown_cluster()
    rounds = _recorded_rounds(cluster, monkeypatch)
    assert rounds, "the grown cluster should need proposer rounds"
    assert any(len(r.moved) for r in rounds)
    # Variants of the recorded states cover the other branches: the other count, no rack
    # rule, fewer takers per replica, a giver window that cuts its candidates short,
    # directories that are not Active or hold no data any more.
    first = rounds[0]
    every = np.arange(len(first.dir_active))
    rounds += [
        dataclasses.replace(first, leaders=not first.leaders),
        dataclasses.replace(first, rack_aware=False, per_replica=2),
        dataclasses.replace(first, window=np.minimum(first.window, 5)),
        dataclasses.replace(
            first, dir_active=first.dir_active & (every % 2 == 0), dir_hosting=every % 3 != 1
        ),
    ]
    scope = build_scope(cluster, Request(mode="full"))
    limit = rack_limits(np.diff(cluster.part_start), hosting_racks(cluster, scope))
    local = LocalProposer(cluster, rack_limit=limit)
    # The driver pairs candidates with takers in many small chunks, the Spark tasks in one.
    monkeypatch.setattr(propose, "PAIR_CELLS", 64)
    # Small files: several Spark tasks, each with whole brokers; or the same parts shipped to
    # the tasks, as for executors that cannot read the driver's files (Spark on Kubernetes).
    by_spark = SparkProposer(spark, cluster, rack_limit=limit, file_rows=700, shared_files=shared)
    try:
        assert by_spark.frame.rdd.getNumPartitions() > 1
        nonempty = 0
        for rnd in rounds:
            expect = local.propose(rnd)
            got = by_spark.propose(rnd)
            assert _same(got, expect)
            nonempty += len(expect) > 0
        assert nonempty >= 3
    finally:
        by_spark.close()


def test_a_batch_is_in_its_explicit_order_and_keeps_the_partition_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = _grown_cluster()
    rnd = _recorded_rounds(cluster, monkeypatch)[0]
    scope = build_scope(cluster, Request(mode="full"))
    limit = rack_limits(np.diff(cluster.part_start), hosting_racks(cluster, scope))
    batch = LocalProposer(cluster, rack_limit=limit).propose(rnd)
    assert len(batch) > 0
    key = list(zip(batch.rank, batch.rid, batch.score, batch.taker, strict=True))
    assert key == sorted(key)
    cur_b = cluster.rep_broker.astype(np.int64)
    cur_b[rnd.moved] = rnd.moved_broker
    moved = set(rnd.moved.tolist())
    givers = set(rnd.givers.tolist())
    for r, t in zip(batch.rid.tolist(), batch.taker.tolist(), strict=True):
        assert r not in moved
        assert int(cluster.rep_broker[r]) in givers
        p = int(cluster.rep_part[r])
        members = cur_b[cluster.part_start[p] : cluster.part_start[p + 1]]
        assert t not in members.tolist()
        # Nor a broker that held the partition in the snapshot (a moved replica's old broker).
        assert t not in cluster.rep_broker[cluster.part_start[p] : cluster.part_start[p + 1]]
        racks = cluster.broker_rack[members].tolist()
        racks.remove(int(cluster.broker_rack[cluster.rep_broker[r]]))
        assert racks.count(int(cluster.broker_rack[t])) < int(limit[p])
    # Per giver, its candidates are its smallest eligible replicas, ranked 1, 2, ...
    for g in givers:
        mine = batch.rid[np.isin(batch.rid, np.flatnonzero(cluster.rep_broker == g))]
        ranks = batch.rank[np.isin(batch.rid, mine)]
        sizes = cluster.rep_size[mine]
        order = np.lexsort((mine, sizes))
        assert (np.diff(ranks[order]) >= 0).all()


def test_new_brokers_reach_the_count_bands_through_proposer_rounds() -> None:
    cluster = _grown_cluster(faulty=0)
    result = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
    prof = result.core_profile
    assert prof["proposeRounds"] >= 1
    assert prof["proposalsApplied"] >= count_phases.ROUND_MIN
    after = result.summary["after"]
    assert after["replicas"]["met"]
    assert after["leaders"]["met"]
    assert result.summary["unmet"] == []


def test_plan_with_spark_rounds_is_byte_identical_to_the_numpy_plan(spark: Any) -> None:
    cluster = _grown_cluster()
    via_spark = make_plan(cluster, Request(mode="full"), goals=Goals(), spark=spark)
    via_numpy = make_plan(cluster, Request(mode="full"), goals=Goals())
    assert via_spark.core_profile["proposeRounds"] >= 1
    assert json.dumps(via_spark.plan) == json.dumps(via_numpy.plan)
    again = make_plan(cluster, Request(mode="full"), goals=Goals(), spark=spark)
    assert json.dumps(again.plan) == json.dumps(via_spark.plan)
