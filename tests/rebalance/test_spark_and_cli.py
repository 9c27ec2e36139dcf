"""The Spark stage against real local Spark, and the command line as the operator (or
spark-submit) runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from spindle.rebalance.generator import Shape, generate
from spindle.rebalance.input.model import Goals, cluster_to_json
from spindle.rebalance.input.scope import Request, build_scope
from spindle.rebalance.pipeline import make_plan
from spindle.rebalance.search.prepare import prepare_local
from spindle.rebalance.spark.job import prepare_spark

CLI = str(Path(sys.executable).with_name("spindle-rebalance"))


def _skewed_cluster() -> Any:
    cluster = generate(
        Shape(brokers=9, disks=3, replicas=900, racks=3, offline_dirs=1, draining_dirs=1, seed=8)
    )
    # Put the two replicas of partition 0 on one rack so the rack check has something to find.
    lo = int(cluster.part_start[0])
    same_rack = np.flatnonzero(cluster.broker_rack == cluster.broker_rack[cluster.rep_broker[lo]])
    other = [b for b in same_rack.tolist() if b not in cluster.rep_broker[lo : lo + 3].tolist()]
    cluster.rep_broker[lo + 1] = other[0]
    cluster.rep_dir[lo + 1] = int(np.flatnonzero(cluster.dir_broker == other[0])[0])
    return cluster


def test_spark_preparation_equals_the_numpy_one(spark: Any) -> None:
    cluster = _skewed_cluster()
    scope = build_scope(cluster, Request(mode="full"))
    by_spark = prepare_spark(spark, cluster, scope)
    by_numpy = prepare_local(cluster, scope)
    for name in ("dir_rep_bytes", "dir_reps", "dir_leaders", "order", "dir_start"):
        assert np.array_equal(getattr(by_spark, name), getattr(by_numpy, name)), name
    assert by_spark.rack_violations.tolist() == by_numpy.rack_violations.tolist()
    assert 0 in by_spark.rack_violations.tolist()


def test_plan_through_spark_is_identical_to_plan_through_numpy(spark: Any) -> None:
    cluster = _skewed_cluster()
    via_spark = make_plan(cluster, Request(mode="full"), goals=Goals(), spark=spark)
    via_numpy = make_plan(cluster, Request(mode="full"), goals=Goals())
    assert json.dumps(via_spark.plan) == json.dumps(via_numpy.plan)
    assert via_spark.plan["partitions"]


def test_cli_writes_a_kafka_reassignment_plan_and_a_summary_using_spark(tmp_path: Path) -> None:
    snap, out, summary = tmp_path / "s.json", tmp_path / "plan.json", tmp_path / "sum.json"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    gen = [CLI, "generate", "--brokers", "6", "--disks", "2", "--replicas", "300"]
    subprocess.run([*gen, "--racks", "2", "--seed", "3", "--output", str(snap)], check=True)
    done = subprocess.run(
        [CLI, "plan", "--snapshot", str(snap), "--mode", "full", "--output", str(out),
         "--summary", str(summary), "--master", "local[2]"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "planned" in done.stdout
    plan = json.loads(out.read_text())
    assert plan["version"] == 1
    assert plan["partitions"]
    for entry in plan["partitions"]:
        assert set(entry) == {"topic", "partition", "replicas", "log_dirs"}
        assert len(entry["replicas"]) == len(entry["log_dirs"])
        assert all(d == "any" or d.startswith("/") for d in entry["log_dirs"])
    report = json.loads(summary.read_text())
    assert report["moves"]["total"] >= len(plan["partitions"])
    assert {"lowerBounds", "before", "after", "perBroker", "perDir", "unmet"} <= set(report)


def test_cli_refuses_bad_input_with_exit_2_and_writes_no_plan(tmp_path: Path) -> None:
    snap = tmp_path / "s.json"
    doc = cluster_to_json(generate(Shape(brokers=3, disks=1, replicas=30, seed=1)))
    doc["partitions"][0]["replicas"] = [1, 1, 2]
    snap.write_text(json.dumps(doc))
    out = tmp_path / "plan.json"
    done = subprocess.run(
        [CLI, "plan", "--snapshot", str(snap), "--mode", "full", "--output", str(out), "--no-spark"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "a broker appears twice" in done.stderr
    assert not out.exists()
