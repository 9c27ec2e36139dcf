"""A baseline planner in the style of ``kafka-reassign-partitions --generate``: it ignores
current placement, sizes and disks, and deals every partition's replicas round robin over a
rack-alternating broker list (per topic from a random start), with ``log_dirs`` "any" so each
broker puts a new replica on its directory with the fewest partitions (Kafka's placement).

Used by ``bench/rebalance.py`` only, as the "what operators do today" comparison.
"""

from __future__ import annotations

import numpy as np
from spindle.rebalance.input.model import OFFLINE, Cluster


def naive_plan(cluster: Cluster, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Final (broker, dir) of every replica under the naive generator."""
    rng = np.random.default_rng(seed)
    live_dir = cluster.dir_state != OFFLINE
    brokers = np.unique(cluster.dir_broker[live_dir])
    racks = cluster.broker_rack[brokers]
    by_rack = [list(brokers[racks == r]) for r in np.unique(racks)]
    ring_list: list[int] = []
    while any(by_rack):
        for lst in by_rack:
            if lst:
                ring_list.append(int(lst.pop(0)))
    ring = np.asarray(ring_list, np.int64)
    n = len(ring)
    topics = np.unique(np.asarray(cluster.part_topic), return_inverse=True)[1]
    start = rng.integers(0, n, topics.max() + 1)
    rf = np.diff(cluster.part_start)
    pos_in_part = np.arange(cluster.n_replicas) - np.repeat(cluster.part_start[:-1], rf)
    first = start[topics] + cluster.part_num
    new_b = ring[(np.repeat(first, rf) + pos_in_part) % n].astype(np.int32)

    stays = new_b == cluster.rep_broker
    new_d = cluster.rep_dir.copy()
    # Each broker places its new replicas on the live directory with the fewest partitions:
    # dealt round robin over its live directories, fewest first.
    counts = np.bincount(cluster.rep_dir[stays], minlength=cluster.n_dirs)
    moving = np.flatnonzero(~stays)
    order = moving[np.lexsort((moving, new_b[moving]))]
    for b in np.unique(new_b[order]).tolist():
        mine = order[new_b[order] == b]
        dirs = np.flatnonzero((cluster.dir_broker == b) & live_dir)
        dirs = dirs[np.argsort(counts[dirs], kind="stable")]
        new_d[mine] = dirs[np.arange(len(mine)) % len(dirs)]
    return new_b, new_d.astype(np.int32)
