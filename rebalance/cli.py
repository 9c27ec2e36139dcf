"""``spindle-rebalance``: the planner's command line, also the ``spark-submit`` entry point.

    spindle-rebalance plan --snapshot SNAPSHOT.json --mode MODE --output PLAN.json
        [--summary SUMMARY.json] [--election ELECTION.json] [--goals GOALS.json] [--max-moves N] [--max-bytes B]
        [--brokers 4,5] [--dirs 1:/var/lib/spindle/data-0 ...] [--master local[*]] [--no-spark]
    spindle-rebalance generate --brokers 40 --disks 4 --replicas 100000 --seed 1 --output S.json

Exit codes: 0 plan written; 2 bad input or a hard goal that cannot be met (message on stderr,
no plan file written).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from spindle.rebalance.input.model import (
    MODES,
    Goals,
    PlanError,
    SnapshotError,
    cluster_to_json,
    load_snapshot,
)
from spindle.rebalance.input.scope import Request


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spindle-rebalance", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="plan a reassignment from a snapshot")
    plan.add_argument("--snapshot", required=True, type=Path)
    plan.add_argument("--mode", required=True, choices=MODES)
    plan.add_argument("--output", required=True, type=Path)
    plan.add_argument("--summary", type=Path)
    plan.add_argument(
        "--election",
        type=Path,
        help="write the partitions whose preferred leader changes, for kafka-leader-election "
        "--election-type preferred --path-to-json-file (run it after the reassignment)",
    )
    plan.add_argument("--goals", type=Path)
    plan.add_argument("--max-moves", type=int)
    plan.add_argument("--max-bytes", type=int)
    plan.add_argument("--brokers", default="", help="comma-separated broker ids")
    plan.add_argument("--dirs", nargs="*", default=[], help="BROKER:PATH directories to drain")
    plan.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[*])")
    plan.add_argument("--no-spark", action="store_true", help="prepare with numpy instead of Spark")
    gen = sub.add_parser("generate", help="write a synthetic snapshot")
    gen.add_argument("--brokers", type=int, default=6)
    gen.add_argument("--disks", type=int, default=2)
    gen.add_argument("--replicas", type=int, default=300)
    gen.add_argument("--racks", type=int, default=3)
    gen.add_argument("--offline-dirs", type=int, default=0)
    gen.add_argument("--draining-dirs", type=int, default=0)
    gen.add_argument("--new-brokers", type=int, default=0)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--output", required=True, type=Path)
    return parser


def _request(args: argparse.Namespace) -> Request:
    brokers: list[int] = []
    for part in filter(None, (p.strip() for p in args.brokers.split(","))):
        try:
            brokers.append(int(part))
        except ValueError:
            raise SnapshotError(f"--brokers: {part!r} is not a broker id") from None
    dirs: list[tuple[int, str]] = []
    for item in args.dirs:
        bid, sep, path = item.partition(":")
        if not sep or not path:
            raise SnapshotError(f"--dirs: {item!r} is not BROKER:PATH")
        try:
            dirs.append((int(bid), path))
        except ValueError:
            raise SnapshotError(f"--dirs: {bid!r} is not a broker id") from None
    for flag, value in (("--max-moves", args.max_moves), ("--max-bytes", args.max_bytes)):
        if value is not None and value < 0:
            raise SnapshotError(f"{flag} must be >= 0")
    return Request(
        mode=args.mode,
        dirs=tuple(dirs),
        brokers=tuple(brokers),
        max_moves=args.max_moves,
        max_bytes=args.max_bytes,
    )


def _write_json(path: Path, data: Any) -> None:
    """Write atomically: a half-written plan must never be executed."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, separators=(",", ":"), sort_keys=False) + "\n")
    tmp.replace(path)


def run_plan(args: argparse.Namespace, *, spark: Any = None) -> dict[str, Any]:
    from spindle.rebalance.api import plan

    goals = Goals()
    if args.goals is not None:
        try:
            goals = Goals.from_json(json.loads(args.goals.read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise SnapshotError(f"cannot read goals {args.goals}: {exc}") from exc
    request = _request(args)
    cluster = load_snapshot(args.snapshot)
    own = False
    if spark is None and not args.no_spark:
        from spindle.rebalance.spark.job import spark_session

        spark, own = spark_session(args.master), True
    try:
        result = plan(cluster, request, goals, spark)
    finally:
        if own:
            spark.stop()
    _write_json(args.output, result.plan)
    if args.summary is not None:
        _write_json(args.summary, result.summary)
    if args.election is not None:
        _write_json(args.election, result.election)
    return result.summary


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "generate":
            from spindle.rebalance.generator import Shape, generate

            shape = Shape(
                brokers=args.brokers,
                disks=args.disks,
                replicas=args.replicas,
                racks=args.racks,
                offline_dirs=args.offline_dirs,
                draining_dirs=args.draining_dirs,
                new_brokers=args.new_brokers,
                seed=args.seed,
            )
            _write_json(args.output, cluster_to_json(generate(shape)))
            return 0
        summary = run_plan(args)
    except (SnapshotError, PlanError) as exc:
        print(f"spindle-rebalance: {exc}", file=sys.stderr)
        return 2
    moves = summary["moves"]
    print(
        f"planned {moves['total']} moves ({moves['crossBroker']} across brokers, "
        f"{moves['intraBroker']} inside brokers), {summary['bytesMoved']['total']} bytes; "
        f"lower bound {summary['lowerBounds']['bytes']:.0f} bytes"
    )
    exact = summary.get("exact", {})
    if exact.get("ran"):
        # Which plan this is, and why the exact planner ran (the greedy refused or fell short).
        print(
            f"planner: {summary['planner']} (exact solver ran because {exact['why']}; "
            f"{exact['status']} in {exact['seconds']}s)"
        )
    for item in summary["unmet"]:
        # "unachievable": out of reach under the hard rules; "unmet": a planner shortfall.
        print(f"{item.get('status', 'unmet')}: {item['goal']}: {item['why']}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # spark-submit rebalance/cli.py plan ...
    sys.exit(main())
