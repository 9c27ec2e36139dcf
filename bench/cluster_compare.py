"""Three Spindle brokers against three Apache Kafka brokers on one machine (not a test).

One run starts both clusters side by side and measures them in alternating rounds with the
same client (librdkafka through confluent-kafka) and the same settings:

- Kafka: three ``process.roles=broker`` nodes and one **separate** KRaft controller node
  (``process.roles=controller``, node 100), from the Maven jars ./dev sync caches (the JVM
  command line and ``kafka-storage format`` are bench/kafka_compare.py's). With a separate
  controller no broker kill ever costs Kafka a controller election.
- Spindle: three ``spindle.broker`` processes in ``spindle.controller.mode=elected`` on one real
  etcd. The failover victim is never Spindle's controller either, so both measure the same
  thing: a partition leader lost, not a controller.
- Both: two log dirs per broker, each its own loop-mounted ext4 (bench/cluster_nodes.py; plain
  directories without root), ``broker.session.timeout.ms=3000`` and
  ``broker.heartbeat.interval.ms=500`` (same on both: the session timeout bounds failover).

Each round, per cluster, with 1 KiB messages and topics of replication factor 3:

- ``produce_mb_s``: ``--mb`` MiB over 3 partitions with ``acks=all`` (large batches) until
  flush() returns (bench/kafka_compare.py's producer);
- ``consume_mb_s``: an assign-mode consumer reads it all back from offset 0;
- ``produce_p50_ms``/``produce_p99_ms``: ``--latency-msgs`` messages paced at ``--rate``/s,
  ``acks=all``, ``linger.ms=0``; librdkafka's own per-message latency (produce() to ack);
- ``reassign_mb_s``: a topic of 2 partitions with its one replica on broker 1, filled with
  ``--move-mb`` MB, moved to broker 2 by ``kafka-reassign-partitions --execute`` (unthrottled);
  the rate is read on broker 2's disk (replica files sampled every 20 ms) between 10 % and 90 %
  of the bytes, as bench/throttle_accuracy.py does, so the tool's JVM start does not count;
- ``failover_s`` / ``dir_failover_s`` (bench/failover.py): a 1-partition topic led by a
  non-controller broker takes a paced ``acks=all`` stream; its leader is SIGKILLed / the leader's
  directory holding it fails for real (ext4 shut down); the figure is the time from the fault to
  the ack of the first message produced after it, with a breakdown of where that time went
  (session expiry or directory report, leader elected, produce resumed). The victim is then
  restored and the next round waits until it is back in every ISR.

During produce, consume, latency and reassignment the brokers' peak resident set is read
(``VmHWM`` reset per round, bench/steady.py); the cluster figure is the sum of the three
brokers, beside it the largest single broker and, at the end, the Kafka controller's and
etcd's own peak. A declared warm-up round runs first (printed, not counted), then
``--rounds`` counted rounds; the headline is the median round and the ratio Spindle/Kafka
(targets: produce and consume >= 0.7, both failovers <= 1.0). Throttle accuracy (10 and 50 MB/s)
is bench/throttle_accuracy.py's: it is run after the clusters stop (``--no-throttle`` skips it),
at a short size, and its JSON embedded. The last line printed is one JSON object with every
figure.

    .venv/bin/python bench/cluster_compare.py            # a few minutes on 2 cores
    .venv/bin/python bench/cluster_compare.py --quick    # smaller sizes, one counted round
    .venv/bin/python bench/cluster_compare.py --only-failover --warmup 0 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from cluster_nodes import (
    BROKERS,
    SESSION,
    System,
    can_mount,
    create_topic,
    start_kafka_cluster,
    start_spindle_cluster,
)
from failover import dir_failover, failover
from kafka_compare import _consume, _produce
from steady import PeakRss, load_average, summary
from throttle_accuracy import fill

MSG_SIZE = 1024
MB = 1_000_000
TARGETS = {
    "produce_mb_s": ">= 0.7",
    "consume_mb_s": ">= 0.7",
    "failover_s": "<= 1.0",
    "dir_failover_s": "<= 1.0",
}
METRICS = (
    "produce_mb_s",
    "consume_mb_s",
    "produce_p50_ms",
    "produce_p99_ms",
    "reassign_mb_s",
    "failover_s",
    "dir_failover_s",
    "peak_rss_cluster_mb",
    "peak_rss_max_broker_mb",
)


def produce_latency(bootstrap: str, topic: str, count: int, rate: float) -> tuple[float, float]:
    """p50 and p99 (ms) of ``count`` acks=all messages paced at ``rate``/s: librdkafka's
    per-message latency (produce() to delivery report)."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": False}
    )
    lat: list[float] = []

    def done(err: Any, msg: Any) -> None:
        if err is None:
            lat.append(msg.latency())

    payload = os.urandom(MSG_SIZE)
    producer.produce(topic, payload, partition=0)
    producer.flush(30)  # connections and metadata outside the measurement
    start = time.perf_counter()
    for i in range(count):
        producer.produce(topic, payload, partition=i % 3, on_delivery=done)
        producer.poll(0)
        pause = start + (i + 1) / rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    if producer.flush(120) != 0 or len(lat) < count:
        raise RuntimeError(f"latency run delivered {len(lat)}/{count}")
    q = statistics.quantiles(lat, n=100)
    return q[49] * 1e3, q[98] * 1e3


def reassign(system: System, work: Path, topic: str, nbytes: int) -> float:
    """MB/s of an unthrottled ``kafka-reassign-partitions`` move of ``topic`` (2 partitions)
    from broker 1 to broker 2, read on broker 2's disk between 10 % and 90 % of the bytes."""
    create_topic(system, topic, assignment=[[1], [1]])
    bootstrap = system.bootstrap()
    fill(bootstrap, topic, 2, nbytes)
    os.sync()
    total = system.nodes[1].bytes_of(topic)
    plan = work / f"{system.name}-{topic}.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": topic, "partition": p, "replicas": [2]} for p in (0, 1)],
            }
        )
    )
    exe = shutil.which("kafka-reassign-partitions") or str(
        Path(os.environ.get("SPINDLE_CACHE", Path.home() / ".cache" / "spindle"))
        / "bin"
        / "kafka-reassign-partitions"
    )
    args = ["--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan)]
    execute = subprocess.Popen([exe, *args, "--execute"], stdout=subprocess.PIPE, text=True)
    samples: list[tuple[float, int]] = []
    deadline = time.monotonic() + 600
    while not samples or samples[-1][1] < total:
        samples.append((time.monotonic(), system.nodes[2].bytes_of(topic)))
        if time.monotonic() > deadline or (execute.poll() not in (None, 0)):
            raise RuntimeError(f"{system.name}: move stuck at {samples[-1][1]}/{total} bytes")
        time.sleep(0.02)
    out, _ = execute.communicate(timeout=120)
    if "Successfully started" not in out:
        raise RuntimeError(f"{system.name}: kafka-reassign-partitions said: {out}")
    t10, b10 = next((t, b) for t, b in samples if b >= 0.1 * total)
    t90, b90 = next((t, b) for t, b in samples if b >= 0.9 * total)
    return (b90 - b10) / max(t90 - t10, 0.02) / MB


def run_round(system: System, work: Path, r: int, args: argparse.Namespace) -> dict[str, Any]:
    """One round on one cluster: every metric of the module docstring (``--only-failover``:
    the two failovers alone)."""
    out: dict[str, Any] = {}
    if not args.only_failover:
        out.update(load_phases(system, work, r, args))
    out.update(failover(system, r))
    if can_mount():
        out.update(dir_failover(system, r))
    return out


def load_phases(system: System, work: Path, r: int, args: argparse.Namespace) -> dict[str, float]:
    """Produce, consume, latency and reassignment, with the brokers' peak resident set."""
    out: dict[str, float] = {}
    topic = f"load-{r}"
    create_topic(system, topic)
    bootstrap = system.bootstrap()
    count = args.mb * 1024 * 1024 // MSG_SIZE
    with ExitStack() as stack:
        peaks = [
            stack.enter_context(PeakRss(n.proc.pid).phase())
            for n in system.nodes.values()
            if n.proc is not None
        ]
        os.sync()
        began = time.monotonic()
        out["produce_mb_s"] = count * MSG_SIZE / _produce(bootstrap, topic, count, 3, "all") / MB
        out["consume_mb_s"] = count * MSG_SIZE / _consume(bootstrap, topic, count + 1, 3) / MB
        p50, p99 = produce_latency(bootstrap, topic, args.latency_msgs, args.rate)
        out["produce_p50_ms"], out["produce_p99_ms"] = p50, p99
        out["reassign_mb_s"] = reassign(system, work, f"move-{r}", args.move_mb * MB)
    out["load_phases_s"] = time.monotonic() - began
    out["peak_rss_cluster_mb"] = sum(p[0] for p in peaks)
    out["peak_rss_max_broker_mb"] = max(p[0] for p in peaks)
    return out


def parts_summary(rounds: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Each step of a failover breakdown (bench/failover.py): every round's, and the median."""
    per_round = [x[key] for x in rounds if key in x]
    if not per_round:
        return {}
    steps = list(per_round[0])
    return {
        "per_round": per_round,
        "median": {s: round(statistics.median(p[s] for p in per_round), 3) for s in steps},
    }


def report(
    args: argparse.Namespace,
    rounds: dict[str, list[dict[str, Any]]],
    systems: dict[str, System],
    loads: list[list[float]],
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bench": "cluster_compare",
        "brokers": len(BROKERS),
        "kafka_controller": "separate KRaft controller node (process.roles=controller)",
        "spindle_controller": "elected among the brokers through etcd",
        "replication_factor": 3,
        "acks": "all",
        "message_bytes": MSG_SIZE,
        "mb": args.mb,
        "move_mb": args.move_mb,
        "session": list(SESSION),
        "warmup_rounds": args.warmup,
        "rounds": len(rounds["spindle"]),
        "headline": "median of the counted rounds (after the warm-up)",
        "client": "librdkafka (confluent-kafka)",
        "load_average_per_round": loads,
        "side_peak_rss_mb": {n: s.side_peak_mb for n, s in systems.items()},
        "failover_victims": {n: [int(x["victim"]) for x in rs] for n, rs in rounds.items()},
        "dir_failover": (
            "the leader's directory's ext4 shut down (EXT4_IOC_SHUTDOWN), two ext4 loop-mounted "
            "directories per broker"
            if can_mount()
            else "not run: mounting the per-directory file systems needs root"
        ),
        "failover_breakdown": {
            name: {
                "leader_sigkill": parts_summary(rs, "failover_parts"),
                "dir_failure": parts_summary(rs, "dir_failover_parts"),
            }
            for name, rs in rounds.items()
        },
    }
    for metric in METRICS:
        if not all(metric in x for rs in rounds.values() for x in rs):
            continue
        k = summary([x[metric] for x in rounds["kafka"]], digits=3)
        s = summary([x[metric] for x in rounds["spindle"]], digits=3)
        ratio = round(s["median"] / k["median"], 3) if k["median"] else None
        row: dict[str, Any] = {"kafka": k, "spindle": s, "ratio": ratio}
        if metric in TARGETS and ratio is not None:
            bound = float(TARGETS[metric].split()[1])
            row["target"] = TARGETS[metric]
            row["met"] = ratio >= bound if TARGETS[metric].startswith(">") else ratio <= bound
        out[metric] = row
    return out


def throttle_accuracy(seconds: float) -> Any:
    """bench/throttle_accuracy.py at a short size (its own two brokers, after ours stopped):
    its final JSON line."""
    here = Path(__file__).resolve().parent
    done = subprocess.run(
        [
            sys.executable,
            str(here / "throttle_accuracy.py"),
            "--seconds",
            str(seconds),
            "--anchor-mb",
            "100",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr or done.stdout)[-500:]}
    return json.loads(lines[-1])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=32, help="MiB produced per round")
    parser.add_argument("--move-mb", type=int, default=64, help="MB reassigned per round")
    parser.add_argument("--latency-msgs", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=1000, help="latency run, messages/s")
    parser.add_argument("--warmup", type=int, default=1, help="rounds run first, not counted")
    parser.add_argument(
        "--rounds", type=int, default=None, help="counted rounds, median kept (3; --quick: 1)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="16 MiB, 32 MB moves, 1000 latency messages, 1 round"
    )
    parser.add_argument(
        "--no-throttle",
        dest="throttle",
        action="store_false",
        help="skip bench/throttle_accuracy.py (run, short, after the clusters stop)",
    )
    parser.add_argument(
        "--only-failover",
        action="store_true",
        help="the two failover phases alone (no load phases, no throttle accuracy)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    if args.quick:
        args.mb, args.move_mb, args.latency_msgs = 16, 32, 1000
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.only_failover:
        args.throttle = False
    return args


def main() -> int:
    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix="spindle-cluster-bench-"))
    print(f"load average at start {load_average()}", flush=True)
    systems: dict[str, System] = {}
    rounds: dict[str, list[dict[str, Any]]] = {"kafka": [], "spindle": []}
    loads: list[list[float]] = []
    try:
        start_kafka_cluster(work, systems)
        start_spindle_cluster(work, systems)
        for r in range(args.warmup + args.rounds):
            counted = r - args.warmup
            label = "warmup" if counted < 0 else f"round {counted}"
            # Alternate who goes first, so that neither always runs after the other.
            order = ["kafka", "spindle"] if r % 2 == 0 else ["spindle", "kafka"]
            for name in order:
                got = run_round(systems[name], work, r, args)
                if counted >= 0:
                    rounds[name].append(got)
                shown = {k: round(v, 2) if isinstance(v, float) else v for k, v in got.items()}
                print(f"{label:9} {name:8}", json.dumps(shown), flush=True)
            loads.append(load_average())
            print(f"{label:9} load average {loads[-1]}", flush=True)
        loads = loads[args.warmup :]
    finally:
        for system in systems.values():
            system.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    out = report(args, rounds, systems, loads)
    if args.throttle:
        out["throttle_accuracy"] = throttle_accuracy(5.0)
    else:
        out["throttle_accuracy"] = "not run (--no-throttle or --only-failover)"
    out["load_average_at_end"] = load_average()
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
