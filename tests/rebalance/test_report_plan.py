"""``build_plan`` lists the same partitions, in the same order, as its plain per-partition
loop (the reference below, the code it replaced for speed on 1M-replica plans)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from spindle.rebalance.analysis.report import build_plan
from spindle.rebalance.generator import Shape, generate
from spindle.rebalance.input.model import Cluster


def _reference(
    cluster: Cluster, cur_broker: np.ndarray, cur_dir: np.ndarray, leader: np.ndarray | None
) -> dict[str, Any]:
    changed = (cur_broker != cluster.rep_broker) | (cur_dir != cluster.rep_dir)
    lead = cluster.rep_leader if leader is None else leader
    reordered = lead != cluster.rep_leader
    lead_moves = lead & (cur_broker != cluster.rep_broker)
    parts = np.unique(cluster.rep_part[changed | reordered])
    ids = cluster.broker_ids
    entries = []
    for p in parts.tolist():
        lo, hi = int(cluster.part_start[p]), int(cluster.part_start[p + 1])
        order = list(range(lo, hi))
        if (reordered[lo:hi].any() or lead_moves[lo:hi].any()) and lead[lo:hi].any():
            first = lo + int(np.flatnonzero(lead[lo:hi])[0])
            order = [first] + [r for r in order if r != first]
        entries.append(
            {
                "topic": cluster.part_topic[p],
                "partition": int(cluster.part_num[p]),
                "replicas": [int(ids[cur_broker[r]]) for r in order],
                "log_dirs": [
                    cluster.dir_path[int(cur_dir[r])] if changed[r] else "any" for r in order
                ],
            }
        )
    entries.sort(key=lambda e: (e["topic"], e["partition"]))
    return {"version": 1, "partitions": entries}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_build_plan_equals_the_per_partition_loop(seed: int) -> None:
    cluster = generate(Shape(brokers=8, disks=2, replicas=3000, racks=3, seed=seed))
    rng = np.random.default_rng(seed)
    n = cluster.n_replicas
    cur_b = cluster.rep_broker.copy()
    cur_d = cluster.rep_dir.copy()
    moved = rng.random(n) < 0.1
    cur_b[moved] = rng.integers(0, cluster.n_brokers, int(moved.sum()))
    intra = rng.random(n) < 0.05
    cur_d[intra] = rng.integers(0, cluster.n_dirs, int(intra.sum()))
    leader = cluster.rep_leader.copy()
    flip = rng.random(n) < 0.05
    leader[flip] = ~leader[flip]
    for lead in (None, leader):
        assert build_plan(cluster, cur_b, cur_d, lead) == _reference(cluster, cur_b, cur_d, lead)
    unchanged = build_plan(cluster, cluster.rep_broker, cluster.rep_dir)
    assert unchanged == {"version": 1, "partitions": []}
