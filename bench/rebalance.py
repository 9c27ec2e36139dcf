"""Benchmark of the rebalance planner (not a test; run ``.venv/bin/python bench/rebalance.py``).

Plans ``full`` mode for synthetic clusters of 100K replicas (40 brokers x 4 disks) and 1M
replicas (200 brokers x 8 disks) through the real pipeline: snapshot JSON on disk -> load ->
Spark preparation (local[*]) -> greedy -> plan and summary. Reports, per size:

  - time: Spark start-up (once, plus a warm-up plan that also starts Spark's Python
    workers), snapshot load, Spark (the preparation stage and the count phases' proposer
    rounds, one job each), the greedy driver without the rounds, report; "planning" = all
    three, against the issue's target; the driver's and Spark's shares of planning;
  - quality: bytes moved against the planner's lower bound (anchor, computed in the same run),
    soft goals before/after, and the same figures for a naive planner in the style of
    ``kafka-reassign-partitions --generate`` (also run here);
  - the machine's load average while measuring (the machine is shared).

Ends with ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rebalance_naive import naive_plan
from spindle.rebalance.analysis.report import figures, hard_violations
from spindle.rebalance.generator import Shape, generate
from spindle.rebalance.input.model import Goals, cluster_to_json, load_snapshot
from spindle.rebalance.input.scope import Request, build_scope
from spindle.rebalance.pipeline import make_plan
from spindle.rebalance.spark.job import spark_session

SIZES = {
    "100K": (40, 4, 100_000, 10.0),
    "1M": (200, 8, 1_000_000, 60.0),
}


def goals_met(fig: dict[str, Any]) -> dict[str, Any]:
    return {
        "brokerUtilisation": fig["brokerUtilisation"]["met"],
        "brokerOutOfBand": fig["brokerUtilisation"]["outOfBand"],
        "disk": fig["diskUtilisationOverBrokerMean"]["met"],
        "diskOutOfBand": fig["diskUtilisationOverBrokerMean"]["outOfBand"],
        "replicas": fig["replicas"]["met"],
        "replicasOutOfBand": fig["replicas"]["outOfBand"],
        "leaders": fig["leaders"]["met"],
        "leadersOutOfBand": fig["leaders"]["outOfBand"],
        "dirsOverCapacity": fig["dirsOverCapacityThreshold"],
        "brokerMaxOverMean": fig["brokerUtilisation"].get("maxOverMean"),
        "diskMaxOverBrokerMean": fig["diskUtilisationOverBrokerMean"]["max"],
    }


def run_size(spark: Any, name: str, *, seed: int, workdir: Path) -> dict[str, Any]:
    brokers, disks, replicas, target = SIZES[name]
    shape = Shape(
        brokers=brokers,
        disks=disks,
        replicas=replicas,
        racks=4,
        offline_dirs=2,
        draining_dirs=2,
        new_brokers=max(1, brokers // 20),
        seed=seed,
    )
    snap = workdir / f"snapshot-{name}.json"
    snap.write_text(json.dumps(cluster_to_json(generate(shape))))
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    cluster = load_snapshot(snap)
    load_s = time.perf_counter() - t0
    result = make_plan(cluster, Request(mode="full"), goals=Goals(), spark=spark, detail=False)
    t = result.timings
    planning = t["prepare"] + t["core"] + t["report"]
    prof = result.core_profile
    # The proposer rounds run inside the greedy's time but are Spark jobs: counted as Spark.
    propose_s = prof.get("proposeS", 0.0)
    spark_s = t["prepare"] + propose_s
    driver_s = t["core"] - propose_s
    s = result.summary
    lb = s["lowerBounds"]["bytes"]

    goals = Goals()
    scope = build_scope(cluster, Request(mode="full"))
    t1 = time.perf_counter()
    nb, nd = naive_plan(cluster, seed=seed)
    naive_s = time.perf_counter() - t1
    moved = (nb != cluster.rep_broker) | (nd != cluster.rep_dir)
    naive_bytes = int(cluster.rep_size[moved].sum())
    naive_fig = figures(cluster, scope, goals, nb, nd)
    naive_hard = hard_violations(cluster, scope, goals, nb, nd)
    out = {
        "size": name,
        "brokers": brokers,
        "disksPerBroker": disks,
        "replicas": cluster.n_replicas,
        "loadAvgAtStart": round(load0, 2),
        "loadAvgAtEnd": round(os.getloadavg()[0], 2),
        "snapshotLoadS": round(load_s, 2),
        # Spark: the preparation stage plus the count phases' proposer rounds (one job each);
        # driver: the sequential greedy without them; report: plan and summary building.
        "sparkStageS": round(spark_s, 2),
        "sparkPrepareS": round(t["prepare"], 2),
        "sparkProposeS": round(propose_s, 2),
        "greedyS": round(driver_s, 2),
        "reportS": round(t["report"], 2),
        "planningS": round(planning, 2),
        "sparkShareOfPlanning": round(spark_s / planning, 3),
        "driverShareOfPlanning": round(driver_s / planning, 3),
        "proposer": {
            "rounds": int(prof.get("proposeRounds", 0)),
            "proposals": int(prof.get("proposals", 0)),
            "applied": int(prof.get("proposalsApplied", 0)),
        },
        "greedyProfile": {
            k: (int(v) if k.endswith("Calls") or not k.endswith("S") else round(v, 3))
            for k, v in prof.items()
        },
        "destScoringShareOfGreedy": round(prof.get("destScoringS", 0.0) / driver_s, 3)
        if driver_s
        else None,
        "targetS": target,
        "planningOverTarget": round(planning / target, 3),
        "moves": s["moves"],
        "bytesMoved": s["bytesMoved"]["total"],
        "lowerBoundBytes": lb,
        "bytesOverLowerBound": s["bytesOverLowerBound"],
        "before": goals_met(s["before"]),
        "after": goals_met(s["after"]),
        # Per soft goal: met, unmet (reachable but missed: a planner shortfall) or
        # unachievable (out of reach under the hard rules; the summary says why).
        "goalStatus": {g: v["status"] for g, v in s["goalStatus"].items()},
        "unmet": [u["goal"] for u in s["unmet"] if u.get("status", "unmet") == "unmet"],
        "unachievable": [u["goal"] for u in s["unmet"] if u.get("status") == "unachievable"],
        "naive": {
            "timeS": round(naive_s, 2),
            "moves": int(moved.sum()),
            "bytesMoved": naive_bytes,
            "bytesOverLowerBound": round(naive_bytes / lb, 3) if lb else None,
            "after": goals_met(naive_fig),
            "hardRuleProblems": naive_hard[:3],
        },
    }
    print(
        f"{name}: planning {planning:.1f}s (target {target:.0f}s; Spark {spark_s:.1f}s = stage"
        f" {t['prepare']:.1f}s + {out['proposer']['rounds']} proposer rounds {propose_s:.1f}s,"
        f" greedy driver {driver_s:.1f}s, report {t['report']:.1f}s; snapshot load {load_s:.1f}s;"
        f" load avg {load0:.1f}) | moves {s['moves']['total']} bytes {s['bytesMoved']['total']:.3e}"
        f" = {s['bytesOverLowerBound']}x lower bound | unmet {out['unmet']} unachievable {out['unachievable']} | naive: bytes"
        f" {out['naive']['bytesOverLowerBound']}x lower bound, after {out['naive']['after']}",
        file=sys.stderr,
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100K,1M")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    t0 = time.perf_counter()
    spark = spark_session(args.master, shuffle_partitions=4)
    startup = time.perf_counter() - t0
    try:
        with tempfile.TemporaryDirectory(prefix="spindle-bench-") as tmp:
            workdir = Path(tmp)
            t1 = time.perf_counter()
            # Two new brokers: the count phases need a proposer round (over count_phases.ROUND_MIN
            # moves), so Spark's Python workers start here, with the JVM's warm-up, not inside
            # the first measured plan.
            warm = generate(Shape(brokers=12, disks=3, replicas=16000, racks=4, new_brokers=2))
            make_plan(warm, Request(mode="full"), goals=Goals(), spark=spark, detail=False)
            warmup = time.perf_counter() - t1
            print(f"Spark start-up {startup:.1f}s, warm-up plan {warmup:.1f}s", file=sys.stderr)
            runs = [
                run_size(spark, n, seed=args.seed, workdir=workdir) for n in args.sizes.split(",")
            ]
    finally:
        spark.stop()
    print(
        json.dumps(
            {
                "bench": "rebalance",
                "cores": os.cpu_count(),
                "sparkStartupS": round(startup, 2),
                "sparkWarmupS": round(warmup, 2),
                "runs": runs,
            },
            default=lambda o: o.item() if isinstance(o, np.generic) else str(o),
        )
    )


if __name__ == "__main__":
    main()
