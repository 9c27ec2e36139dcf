"""The per-replica work the sequential core needs done first: usage aggregates, the candidate
order (replicas of each directory, largest first) and the partitions breaking rack awareness;
and the proposer the count phases draw their candidate moves from in rounds (``propose``).

Two implementations return the same ``Prepared``: ``prepare_local`` in numpy, for unit tests
and small clusters, and ``spindle.rebalance.spark.job.prepare_spark`` in Spark DataFrames for
the real job. A test checks they agree element for element.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from spindle.rebalance.goals.rack import hosting_racks, rack_limits
from spindle.rebalance.input.model import I32, I64, Cluster
from spindle.rebalance.input.scope import Scope
from spindle.rebalance.search.propose import CountProposer, LocalProposer


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """Aggregates and candidate order over all replicas."""

    #: D: bytes, replica count and leader count of the replicas on each directory.
    dir_rep_bytes: I64
    dir_reps: I64
    dir_leaders: I64
    #: R: replica indices sorted by (directory, size descending, replica index).
    order: I64
    #: D+1: replicas of directory d are order[dir_start[d]:dir_start[d+1]].
    dir_start: I64
    #: Partitions with more replicas on one rack than racks allow, ascending.
    rack_violations: I32
    #: Proposes the count phases' moves in rounds (numpy or Spark, like this preparation);
    #: the Spark one keeps its replica table on disk for as long as it lives.
    proposer: CountProposer | None = field(default=None, compare=False, repr=False)


def prepare_local(cluster: Cluster, scope: Scope) -> Prepared:
    """numpy version of the preparation stage."""
    n_d = cluster.n_dirs
    size = cluster.rep_size
    order = np.lexsort((np.arange(cluster.n_replicas), -size, cluster.rep_dir)).astype(np.int64)
    reps = np.bincount(cluster.rep_dir, minlength=n_d).astype(np.int64)
    dir_start = np.zeros(n_d + 1, np.int64)
    np.cumsum(reps, out=dir_start[1:])
    n_racks = hosting_racks(cluster, scope)
    rack = cluster.broker_rack[cluster.rep_broker].astype(np.int64)
    key = cluster.rep_part.astype(np.int64) * (len(cluster.racks) + 1) + rack
    uniq, counts = np.unique(key, return_counts=True)
    part_of = uniq // (len(cluster.racks) + 1)
    rf = np.diff(cluster.part_start)
    limit = rack_limits(rf, n_racks)[part_of]
    bad = np.unique(part_of[counts > limit]).astype(np.int32)
    proposer = LocalProposer(cluster, rack_limit=rack_limits(rf, n_racks))
    return Prepared(
        dir_rep_bytes=np.bincount(cluster.rep_dir, weights=size, minlength=n_d).astype(np.int64),
        dir_reps=reps,
        dir_leaders=np.bincount(cluster.rep_dir, weights=cluster.rep_leader, minlength=n_d).astype(
            np.int64
        ),
        order=order,
        dir_start=dir_start,
        rack_violations=bad,
        proposer=proposer,
    )
