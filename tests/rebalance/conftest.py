"""Shared pieces for the planner tests: one real local Spark session for the whole run, and
helpers that turn a plan's placement into the next snapshot."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from spindle.rebalance.input.model import Cluster


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local[2] SparkSession on loopback, UI off, few shuffle partitions (tests are small)."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from spindle.rebalance.spark.job import spark_session

    session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture
def applied() -> Any:
    """``applied(cluster, placement)``: the cluster after executing a plan."""
    return apply_placement


def apply_placement(cluster: Cluster, placement: tuple[np.ndarray, np.ndarray]) -> Cluster:
    """The cluster after a plan is executed: replicas where the plan put them, directory free
    space updated, leadership following the leader's replica."""
    cur_b, cur_d = placement
    ext = cluster.dir_external()
    rep = np.bincount(cur_d, weights=cluster.rep_size, minlength=cluster.n_dirs).astype(np.int64)
    leader = cluster.part_leader.copy()
    lead_rep = np.flatnonzero(cluster.rep_leader)
    leader[cluster.rep_part[lead_rep]] = cur_b[lead_rep]
    return dataclasses.replace(
        cluster,
        rep_broker=cur_b.astype(np.int32).copy(),
        rep_dir=cur_d.astype(np.int32).copy(),
        dir_usable=np.maximum(cluster.dir_total - rep - ext, 0),
        part_leader=leader,
        _dir_index={},
    )
