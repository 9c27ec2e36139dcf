"""Replication throttle accuracy: measured rate of a throttled cross-broker reassignment
against the rate set with ``kafka-reassign-partitions --execute --throttle`` (not a test).

One run starts a real etcd and two Spindle brokers (``spindle.controller.mode=elected``).
For each case a fresh topic (``--partitions`` partitions, all on broker 1) is filled with
``rate x --seconds`` bytes of 100 kB records, then moved to broker 2 with Kafka's own tool:

- ``unthrottled``: no ``--throttle``; the anchor, what this machine moves at all (a throttle
  above it cannot be met, and the report says so);
- ``throttle_10MBps`` and ``throttle_50MBps`` (``--rates``, MB = 10^6 bytes as Kafka's tool).

The rate is measured on broker 2's disk (the replica files' sizes sampled every 50 ms):
bytes moved between 10 % and 90 % of the total over the time that took, so the reassignment's
start (the tool's JVM, the first fetch) and its tail do not count. ``ratio`` = measured / set;
the target is within +-5 % (1.00 +- 0.05). ``whole_ratio`` is the same over the whole copy.
After each move, ``--verify`` clears the throttles. One line per case, then one JSON line.

    .venv/bin/python bench/throttle_accuracy.py --seconds 15 --rates 10,50
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from kafka_compare import CACHE, free_port, start_etcd, stop, wait_port

MB = 1_000_000
RECORD = 100_000


def start_broker(work: Path, node: int, etcd_url: str, prefix: str) -> tuple[Any, int, Path]:
    port = free_port()
    base = work / f"b{node}"
    base.mkdir()
    config = base / "server.properties"
    config.write_text(
        "\n".join(
            [
                f"node.id={node}",
                f"listeners=PLAINTEXT://127.0.0.1:{port}",
                f"log.dirs={base / 'd0'}",
                f"spindle.etcd.endpoints={etcd_url}",
                f"spindle.etcd.prefix={prefix}",
                "spindle.controller.mode=elected",
                "",
            ]
        )
    )
    log = base / "broker.log"
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "spindle.broker", "--config", str(config)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd="/",
    )
    wait_port(port, proc, log)
    return proc, port, base / "d0"


def tool(name: str, *args: str) -> str:
    exe = shutil.which(name) or str(CACHE / "bin" / name)
    done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed: {done.stdout}\n{done.stderr}")
    return done.stdout


def fill(bootstrap: str, topic: str, partitions: int, nbytes: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20})
    value = b"t" * RECORD
    for i in range(max(1, nbytes // RECORD)):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(300) != 0:
        raise RuntimeError("fill did not complete")


def replica_bytes(logdir: Path, topic: str) -> int:
    return sum(f.stat().st_size for f in logdir.glob(f"{topic}-*/*.log"))


def move(
    bootstrap: str, work: Path, topic: str, partitions: int, dest: Path, throttle: int | None
) -> dict[str, float]:
    """Reassign ``topic`` from broker 1 to broker 2; the measured rates (bytes/s)."""
    plan = work / f"{topic}.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": topic, "partition": p, "replicas": [2]} for p in range(partitions)
                ],
            }
        )
    )
    common = ("--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan))
    extra = ("--throttle", str(throttle)) if throttle else ()
    samples: list[tuple[float, int]] = []
    total = 0
    tool("kafka-reassign-partitions", *common, "--execute", *extra)
    # The leader's files are the target size: the follower copies them byte for byte.
    total = replica_bytes(work / "b1" / "d0", topic)
    deadline = time.monotonic() + 1800
    while True:
        got = replica_bytes(dest, topic)
        samples.append((time.monotonic(), got))
        if got >= total:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: moved {got} of {total} bytes in 30 min")
        time.sleep(0.05)
    out = tool("kafka-reassign-partitions", *common, "--verify")
    if out.count("is completed") < partitions:
        time.sleep(2)
        out = tool("kafka-reassign-partitions", *common, "--verify")

    def at(fraction: float) -> tuple[float, int]:
        return next((t, b) for t, b in samples if b >= fraction * total)

    t10, b10 = at(0.1)
    t90, b90 = at(0.9)
    first = next((t, b) for t, b in samples if b > 0)
    end = samples[-1]
    return {
        "bytes": float(total),
        "rate": (b90 - b10) / max(t90 - t10, 1e-6),
        "whole_rate": (end[1] - first[1]) / max(end[0] - first[0], 1e-6),
        "seconds": end[0] - first[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="target copy time per case")
    parser.add_argument("--rates", default="10,50", help="throttles in MB/s (10^6 bytes)")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--anchor-mb", type=int, default=400, help="bytes of the unthrottled move")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bench-throttle-"))
    procs = []
    results: dict[str, Any] = {}
    try:
        etcd, etcd_url = start_etcd(work)
        procs.append(etcd)
        prefix = f"/bench/{uuid.uuid4().hex}"
        b1, port1, _d1 = start_broker(work, 1, etcd_url, prefix)
        procs.append(b1)
        b2, port2, d2 = start_broker(work, 2, etcd_url, prefix)
        procs.append(b2)
        bootstrap = f"127.0.0.1:{port1},127.0.0.1:{port2}"
        cases: list[tuple[str, int | None, int]] = [("unthrottled", None, args.anchor_mb * MB)]
        for r in args.rates.split(","):
            rate = int(float(r) * MB)
            cases.append((f"throttle_{r}MBps", rate, int(rate * args.seconds)))
        for name, rate, nbytes in cases:
            topic = f"bench-{name.replace('.', '_')}"
            assignment = ",".join(["1"] * args.partitions)
            tool(
                "kafka-topics",
                "--bootstrap-server",
                bootstrap,
                "--create",
                "--topic",
                topic,
                "--replica-assignment",
                assignment,
            )
            fill(bootstrap, topic, args.partitions, nbytes)
            m = move(bootstrap, work, topic, args.partitions, d2, rate)
            row: dict[str, Any] = {
                "set_MBps": None if rate is None else rate / MB,
                "measured_MBps": round(m["rate"] / MB, 2),
                "whole_MBps": round(m["whole_rate"] / MB, 2),
                "moved_MB": round(m["bytes"] / MB, 1),
                "seconds": round(m["seconds"], 2),
            }
            if rate is not None:
                row["ratio"] = round(m["rate"] / rate, 3)
                row["whole_ratio"] = round(m["whole_rate"] / rate, 3)
                anchor = results["unthrottled"]["measured_MBps"]
                row["reachable"] = rate / MB < anchor
            results[name] = row
            print(f"{name}: {row}", flush=True)
    finally:
        for proc in reversed(procs):
            stop(proc)
        shutil.rmtree(work, ignore_errors=True)
    ratios = [r["ratio"] for k, r in results.items() if k != "unthrottled" and r["reachable"]]
    summary = {
        "benchmark": "throttle_accuracy",
        "cases": results,
        "within_5pct": all(abs(x - 1) <= 0.05 for x in ratios) if ratios else None,
        # The machine's 1-minute load average before and after: a throttle loses rate only
        # when a round trip outlasts one response's share of it, which a busy machine causes.
        "loadavg_1m": [round(load_before, 1), round(os.getloadavg()[0], 1)],
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
