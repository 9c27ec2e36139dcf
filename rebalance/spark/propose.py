"""The count phases' proposer in Spark (see ``propose`` for the why and the rules).

The replica table is written once per plan as Parquet files that each hold whole brokers
(every replica of each of its brokers) in one row group, so a Spark task sees whole givers
and can rank their candidates without a shuffle. Each round is one job:
``frame.where(broker in givers).mapInArrow(...)`` runs ``propose.propose_block`` — the same
array code the numpy proposer runs over the whole cluster — in every task, over that task's
replicas, with the round's small live state (per-broker and per-directory figures, the moves
so far) shipped in the task closure. Only the batch comes back to the driver, through Arrow,
and is put in its explicit order there (``propose.ordered``), never Spark's row order.

Why not Spark SQL alone (a ``row_number`` window per giver, the takers as a broadcast array
filtered with higher-order functions): measured on the 1M benchmark (2 cores, local[*]) one
such round took 19 s — the window shuffles every giver's replicas and the lambdas run
interpreted per candidate and taker — against under a second for this job.

Executors need this package importable (the same image as the driver, as ``spark-submit``
on Kubernetes uses).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from spindle.rebalance.input.model import I64, Cluster
from spindle.rebalance.search.propose import (
    Block,
    CountRound,
    Moves,
    Proposals,
    by_broker,
    empty_proposals,
    ordered,
    propose_block,
    ranks,
    slots,
)

#: Replicas per Parquet file, about (a file holds whole brokers): one task's share of a round.
FILE_ROWS = 131_072

SCHEMA = "rid long, taker long, score double, rank long"


def _members_lists(cluster: Cluster, order: np.ndarray) -> pa.Array:
    """Per replica (in ``order``), the snapshot brokers of its partition in replica-list order."""
    rf = np.diff(cluster.part_start)
    per_rep = rf[cluster.rep_part[order]]
    offsets = np.zeros(len(order) + 1, np.int32)
    np.cumsum(per_rep, out=offsets[1:])
    first = np.repeat(cluster.part_start[cluster.rep_part[order]], per_rep)
    within = np.arange(int(offsets[-1])) - np.repeat(offsets[:-1], per_rep)
    flat = cluster.rep_broker[first + within].astype(np.int64)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))


def _block(table: pa.Table) -> Block:
    """A task's rows as a ``Block`` (members padded with -1)."""
    mb = table.column("mb").combine_chunks()
    offsets = mb.offsets.to_numpy()
    lengths = np.diff(offsets)
    width = max(int(lengths.max(initial=0)), 1)
    members = np.full((table.num_rows, width), -1, np.int64)
    rows = np.repeat(np.arange(table.num_rows), lengths)
    cols = np.arange(int(offsets[-1] - offsets[0])) - np.repeat(offsets[:-1] - offsets[0], lengths)
    members[rows, cols] = mb.flatten().to_numpy()

    def col(name: str) -> np.ndarray:
        out: np.ndarray = np.asarray(table.column(name).to_numpy())
        return out

    return Block(
        rid=col("rid"),
        pid=col("pid"),
        dir=col("dir"),
        broker=col("broker"),
        size=col("size"),
        leader=col("leader") != 0,
        lim=col("lim"),
        members=members,
        brank=col("brank"),
        lrank=col("lrank"),
    )


def _task(
    batches: Iterator[pa.RecordBatch], rnd: CountRound, moves: Moves, broker_rack: I64
) -> Iterator[pa.RecordBatch]:
    """One Spark task: its replicas (whole brokers) in, their proposals out."""
    got = list(batches)
    if not got:
        return
    rid, taker, score, rank = propose_block(
        _block(pa.Table.from_batches(got)), rnd, moves, broker_rack
    )
    yield pa.RecordBatch.from_arrays(
        [pa.array(rid), pa.array(taker), pa.array(score), pa.array(rank)],
        names=["rid", "taker", "score", "rank"],
    )


def _shipped_frame(spark: Any, parts: list[pa.Table]) -> Any:
    """The replica table for executors that cannot read the driver's files (Spark on
    Kubernetes: each executor is its own Pod): each part (whole brokers) goes to its own task as
    Arrow IPC bytes (``parallelize`` with one slice per element keeps one part per partition)
    and is unpacked there by ``mapInArrow``, in order; cached, so the bytes cross the network
    once, not once per round."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = parts[0].schema if parts else pa.schema([])
    blobs = []
    for part in parts:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, part.schema) as writer:
            writer.write_table(part)
        blobs.append((sink.getvalue().to_pybytes(),))
    seed = spark.createDataFrame(
        spark.sparkContext.parallelize(blobs, max(len(blobs), 1)), "ipc binary"
    )

    def unpack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for blob in batch.column(0).to_pylist():
                yield from pa.ipc.open_stream(blob).read_all().to_batches()

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas")
        return seed.mapInArrow(unpack, from_arrow_schema(schema)).cache()


class SparkProposer:
    """Spark proposer: the same batch as ``LocalProposer``, one Spark job per round.

    Its Parquet directory lives as long as the proposer (removed when it is collected or
    ``close`` is called); ``frame`` is the replica table, which the preparation stage reads too.
    """

    def __init__(
        self,
        spark: Any,
        cluster: Cluster,
        *,
        rack_limit: I64,
        workdir: str | None = None,
        file_rows: int = FILE_ROWS,
        shared_files: bool | None = None,
    ) -> None:
        self._spark = spark
        self.c = cluster
        self._tmp = tempfile.mkdtemp(prefix="spindle-rebalance-", dir=workdir)
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._tmp, True)
        self._slot = slots(cluster)
        self._rack = cluster.broker_rack.astype(np.int64)
        n = cluster.n_replicas
        order = by_broker(cluster)
        brank, lrank = ranks(cluster, order)
        table = pa.table(
            {
                "rid": order.astype(np.int64),
                "pid": cluster.rep_part[order].astype(np.int64),
                "dir": cluster.rep_dir[order].astype(np.int64),
                "broker": cluster.rep_broker[order].astype(np.int64),
                "rack": self._rack[cluster.rep_broker[order]],
                "size": cluster.rep_size[order].astype(np.int64),
                "leader": cluster.rep_leader[order].astype(np.int64),
                "lim": rack_limit[cluster.rep_part[order]].astype(np.int64),
                "mb": _members_lists(cluster, order),
                "brank": brank[order],
                "lrank": lrank[order],
            }
        )
        # Cut between brokers only, about every FILE_ROWS replicas.
        brokers = table.column("broker").to_numpy()
        change = np.flatnonzero(np.diff(brokers)) + 1
        cuts = [0]
        for at in change.tolist():
            if at - cuts[-1] >= file_rows:
                cuts.append(at)
        cuts.append(n)
        parts = [table.slice(cuts[k], cuts[k + 1] - cuts[k]) for k in range(len(cuts) - 1)]
        if shared_files is None:
            # Executors see the driver's files only when they run in its process (local[*]),
            # or when ``workdir`` is storage they share.
            shared_files = workdir is not None or spark.sparkContext.master.startswith("local")
        if shared_files:
            path = os.path.join(self._tmp, "replicas")
            os.makedirs(path)
            for k, part in enumerate(parts):
                # One row group per file: Spark never splits a row group between tasks, so
                # each task reads whole files, hence whole brokers, whatever its split settings.
                pq.write_table(
                    part,
                    os.path.join(path, f"part-{k:05d}.parquet"),
                    row_group_size=max(part.num_rows, 1),
                )
            self.frame = spark.read.parquet(path)
        else:
            self.frame = _shipped_frame(spark, parts)

    def close(self) -> None:
        """Remove the Parquet directory now (else when the proposer is collected)."""
        self._cleanup()

    def propose(self, rnd: CountRound) -> Proposals:
        if not len(rnd.givers) or not len(rnd.takers):
            return empty_proposals()
        moves = Moves.of(rnd, self.c.rep_part, self._slot)
        rack = self._rack

        def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return _task(batches, rnd, moves, rack)

        with warnings.catch_warnings():
            # mapInArrow checks the pandas version although it uses no pandas; pyspark warns
            # about pandas 3, which this path never touches.
            warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas")
            rows = self._run(rnd, task)
        if rows.num_rows == 0:
            return empty_proposals()
        return ordered(
            rows.column("rid").to_numpy(),
            rows.column("taker").to_numpy(),
            rows.column("score").to_numpy(),
            rows.column("rank").to_numpy(),
        )

    def _run(self, rnd: CountRound, task: Any) -> pa.Table:
        from pyspark.sql import functions as F

        # Pruned where the data lies: only the givers' windows (the task applies each giver's
        # own window; the bound here is their largest), leaders only for leader counts.
        rank = F.col("lrank") if rnd.leaders else F.col("brank")
        rows: pa.Table = (
            self.frame.where(F.col("broker").isin(rnd.givers.tolist()))
            .where(rank < int(rnd.window.max()))
            .select("rid", "pid", "dir", "broker", "size", "leader", "lim", "mb", "brank", "lrank")
            .mapInArrow(task, SCHEMA)
            .toArrow()
        )
        return rows
