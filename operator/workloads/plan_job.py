"""The planner Pod's program: snapshot the brokers, plan, write the result for the operator.

Runs inside the planner Job's Pod (``python -P -m spindle.operator.workloads.plan_job``, Spark
in local mode) or as the Spark driver under ``spark-submit --master k8s://`` (this file is the
application; the session then comes from spark-submit's settings, executors included). Never in
the operator's process.

1. Snapshot: Metadata + DescribeLogDirs from the brokers themselves
   (``spindle.operator.brokers.gather_snapshot``), so nothing large crosses the API server.
2. Plan: the planner's own entry (``spindle.rebalance.cli``), goals from the Rebalance.
   Once the snapshot is taken, ``snapshotTime`` alone is written to the ConfigMap, so the
   Rebalance shows ``Planning`` instead of ``Snapshotting`` while the plan is made.
3. Write the ConfigMap ``<rebalance>-plan``: ``plan.json``, ``summary.json``, ``moves.json``
   (each replica move with source and destination broker and directory), ``election.json``
   (the partitions whose preferred leader the plan changes, in ``kafka-leader-election
   --path-to-json-file`` form: the operator elects them once the moves are done) and
   ``snapshotTime``; or ``error`` with the planner's reason (a hard goal no placement meets,
   a snapshot that cannot be trusted) and exit status 2.

Size: a ConfigMap holds 1 MiB. A plan entry is ~100 bytes, so ~9,000 moved partitions fit as
text; above 900 KiB the three documents are gzipped into ``binaryData`` (JSON of this shape
compresses about 10:1, so ~90,000 partitions); beyond that the job fails with a message
saying so, and a Rebalance with fewer moves (the planner's ``max moves``) is the answer: a
plan moving more than that at once is not one anybody reviews before approving.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import gzip
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spindle.operator.brokers import gather_snapshot
from spindle.operator.decisions.proposal import replica_moves
from spindle.operator.kube import CONFIGMAPS, KubeApi, KubeError
from spindle.operator.snapshot import SnapshotBuildError
from spindle.rebalance import PlanError, SnapshotError
from spindle.rebalance import api as planner

TEXT_LIMIT = 900 * 1024


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="plan_job", description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--mode", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--configmap", required=True)
    parser.add_argument("--capacity-threshold", type=int, default=80)
    parser.add_argument("--brokers", default="")
    parser.add_argument("--dir", action="append", default=[], help="BROKER:PATH")
    parser.add_argument("--master")
    return parser


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def encode(documents: dict[str, str]) -> dict[str, Any]:
    """ConfigMap ``data`` when it fits as text, else gzipped ``binaryData``; ValueError when
    not even that fits."""
    if sum(len(v) for v in documents.values()) <= TEXT_LIMIT:
        return {"data": documents}
    packed = {
        f"{k}.gz": base64.b64encode(gzip.compress(v.encode())).decode()
        for k, v in documents.items()
    }
    size = sum(len(v) for v in packed.values())
    if size > TEXT_LIMIT:
        raise ValueError(
            f"the plan is {size} bytes even gzipped, more than a ConfigMap holds: "
            "plan fewer moves at once"
        )
    return {"binaryData": packed}


def decode(configmap: dict[str, Any]) -> dict[str, str]:
    """The documents of a plan ConfigMap, whichever way they were stored."""
    out = dict(configmap.get("data") or {})
    for key, value in (configmap.get("binaryData") or {}).items():
        out[key.removesuffix(".gz")] = gzip.decompress(base64.b64decode(value)).decode()
    return out


def _write(api: KubeApi, namespace: str, name: str, payload: dict[str, Any]) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, **payload}  # fmt: skip
    try:
        api.create(CONFIGMAPS, namespace, body)
    except KubeError as exc:
        if exc.status != 409:
            raise
        api.request("PUT", CONFIGMAPS.path(namespace, name), body=body)


def plan(
    args: argparse.Namespace, on_snapshot: Callable[[str], None] = lambda taken: None
) -> dict[str, str]:
    """Snapshot (``on_snapshot`` is told when it was taken) and plan; the documents to write."""
    snapshot = gather_snapshot(args.bootstrap.split(","))
    taken = _now()
    on_snapshot(taken)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "snapshot.json").write_text(json.dumps(snapshot))
        (work / "goals.json").write_text(
            json.dumps({"capacityThreshold": args.capacity_threshold / 100})
        )
        argv = ["plan", "--snapshot", str(work / "snapshot.json"), "--mode", args.mode,
                "--output", str(work / "plan.json"), "--summary", str(work / "summary.json"),
                "--election", str(work / "election.json"),
                "--goals", str(work / "goals.json")]  # fmt: skip
        if args.brokers:
            argv += ["--brokers", args.brokers]
        if args.dir:
            argv += ["--dirs", *args.dir]
        if args.master:
            argv += ["--master", args.master]
        planner.plan_command(argv)
        result = json.loads((work / "plan.json").read_text())
        summary = (work / "summary.json").read_text()
        election = (work / "election.json").read_text()
    return {
        "plan.json": json.dumps(result),
        "summary.json": summary,
        "election.json": election,
        "moves.json": json.dumps(replica_moves(snapshot, result)),
        "snapshotTime": taken,
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    api = KubeApi.from_environment()

    def snapshotted(taken: str) -> None:
        _write(api, args.namespace, args.configmap, {"data": {"snapshotTime": taken}})

    try:
        payload = encode(plan(args, snapshotted))
    except (PlanError, SnapshotError, SnapshotBuildError, ValueError) as exc:
        print(f"plan_job: {exc}", file=sys.stderr)
        _write(api, args.namespace, args.configmap, {"data": {"error": str(exc)}})
        return 2
    _write(api, args.namespace, args.configmap, payload)
    print(f"plan_job: wrote ConfigMap {args.namespace}/{args.configmap}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
