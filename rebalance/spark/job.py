"""The Spark half of the planner: the per-replica work, as DataFrame jobs.

Everything that touches every replica runs here, so that on a cluster it runs on executors:
usage aggregates per directory (bytes, replicas, leaders), the candidate order the greedy
draws from (each directory's replicas, largest first: a range-partitioned sort), the
partitions that break rack awareness (a group-by over partition and rack), and, in rounds
during the greedy, the count phases' candidate moves (``propose_spark``). The driver keeps
only the sequential greedy, which touches the replicas it moves.

The same code runs under ``--master local[*]`` (tests, small clusters) and under
``spark-submit --master k8s://...`` (the operator's job).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

import numpy as np
from spindle.rebalance.goals.rack import hosting_racks, rack_limits
from spindle.rebalance.input.model import Cluster
from spindle.rebalance.input.scope import Scope
from spindle.rebalance.search.prepare import Prepared
from spindle.rebalance.spark.propose import SparkProposer


def spark_session(master: str | None = None, *, shuffle_partitions: int = 8) -> Any:
    """A SparkSession with the UI off (the planner serves nothing). ``master``: None keeps the
    one ``spark-submit --master`` set, else ``local[*]``; local masters bind to loopback."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    if master is None:
        # Under spark-submit the driver JVM already runs and carries spark.master, but
        # SparkConf() sees it only once PySpark has connected to that JVM (spark-submit says
        # where in PYSPARK_GATEWAY_PORT); before that it reads an empty conf and local[*]
        # would silently override --master k8s://...
        if os.environ.get("PYSPARK_GATEWAY_PORT"):
            SparkContext._ensure_initialized()
        master = SparkConf().get("spark.master", None) or "local[*]"
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Python workers (the count proposer's tasks) run this interpreter, which has this
        # package.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName("spindle-rebalance")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.execution.arrow.pyspark.fallback.enabled", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.memory", "2g")
        # Python workers (the count proposer's tasks) leave their working directory off
        # sys.path: started from the repository root, its operator/ folder would shadow the
        # standard library's operator module.
        .config("spark.executorEnv.PYTHONSAFEPATH", "1")
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def prepare_spark(
    spark: Any, cluster: Cluster, scope: Scope, *, workdir: str | None = None
) -> Prepared:
    """Spark version of ``prepare_local``: same result, computed by DataFrame jobs. The replica
    table is the count proposer's (``propose_spark.SparkProposer``): written once as Parquet
    (columnar, written by Arrow in well under a second for a million rows, and readable by
    executors on other machines when ``workdir`` is shared storage), read by this stage and by
    every proposer round, and removed with the proposer when the plan is done."""
    proposer = SparkProposer(
        spark,
        cluster,
        rack_limit=rack_limits(np.diff(cluster.part_start), hosting_racks(cluster, scope)),
        workdir=workdir,
    )
    return dataclasses.replace(_prepare(spark, proposer.frame, cluster, scope), proposer=proposer)


def _prepare(spark: Any, reps: Any, cluster: Cluster, scope: Scope) -> Prepared:
    from pyspark.sql import functions as F

    n_d = cluster.n_dirs

    usage = (
        reps.groupBy("dir")
        .agg(
            F.sum("size").alias("bytes"),
            F.count(F.lit(1)).alias("reps"),
            F.sum("leader").alias("leaders"),
        )
        .toArrow()
    )
    # Collected through Arrow, not pandas: pyspark's pandas path warns under pandas 3.
    idx = usage.column("dir").to_numpy()
    dir_bytes = np.zeros(n_d, np.int64)
    dir_reps = np.zeros(n_d, np.int64)
    dir_leaders = np.zeros(n_d, np.int64)
    dir_bytes[idx] = usage.column("bytes").to_numpy()
    dir_reps[idx] = usage.column("reps").to_numpy()
    dir_leaders[idx] = usage.column("leaders").to_numpy()

    ranked = reps.select("rid", "dir", "size").orderBy(
        F.col("dir").asc(), F.col("size").desc(), F.col("rid").asc()
    )
    order = ranked.select("rid").toArrow().column("rid").to_numpy()
    dir_start = np.zeros(n_d + 1, np.int64)
    np.cumsum(dir_reps, out=dir_start[1:])

    n_racks = max(hosting_racks(cluster, scope), 1)
    per_rack = reps.groupBy("pid", "rack").agg(F.count(F.lit(1)).alias("on_rack"))
    rf = reps.groupBy("pid").agg(F.count(F.lit(1)).alias("rf"))
    limit = F.greatest(F.lit(1), F.ceil(F.col("rf") / F.lit(n_racks)))
    bad = (
        per_rack.join(rf, "pid")
        .where(F.col("on_rack") > limit)
        .select("pid")
        .distinct()
        .orderBy("pid")
        .toArrow()
        .column("pid")
        .to_numpy()
        .astype(np.int32)
    )
    return Prepared(
        dir_rep_bytes=dir_bytes,
        dir_reps=dir_reps,
        dir_leaders=dir_leaders,
        order=order,
        dir_start=dir_start,
        rack_violations=bad,
    )
