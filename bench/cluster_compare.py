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
- Both: one log dir per broker, ``broker.session.timeout.ms=3000`` and
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
- ``failover_s``: a 1-partition topic led by a non-controller broker takes a paced ``acks=all``
  stream (one message per 5 ms); the leader is SIGKILLed; the figure is the time from the kill
  to the ack of the first message produced after it. The victim is then restarted and the
  next round waits until it is back in every ISR.

During produce, consume, latency and reassignment the brokers' peak resident set is read
(``VmHWM`` reset per round, bench/steady.py); the cluster figure is the sum of the three
brokers, beside it the largest single broker and, at the end, the Kafka controller's and
etcd's own peak. A declared warm-up round runs first (printed, not counted), then
``--rounds`` counted rounds; the headline is the median round and the ratio Spindle/Kafka
(targets: produce and consume >= 0.7, failover <= 1.0). Throttle accuracy (10 and 50 MB/s) is
bench/throttle_accuracy.py's: with ``--throttle`` it is run after the clusters stop, at a short
size, and its JSON embedded. The last line printed is one JSON object with every figure.

    .venv/bin/python bench/cluster_compare.py            # a few minutes on 2 cores
    .venv/bin/python bench/cluster_compare.py --quick    # smaller sizes, one counted round
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_compare import (
    _consume,
    _produce,
    format_kafka,
    free_port,
    kafka_cluster_id,
    kafka_home,
    kafka_java,
    start_etcd,
    stop,
    wait_port,
)
from steady import PeakRss, load_average, summary
from throttle_accuracy import fill, replica_bytes

MSG_SIZE = 1024
MB = 1_000_000
BROKERS = (1, 2, 3)
SESSION = ("broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500")
TARGETS = {"produce_mb_s": ">= 0.7", "consume_mb_s": ">= 0.7", "failover_s": "<= 1.0"}
METRICS = (
    "produce_mb_s",
    "consume_mb_s",
    "produce_p50_ms",
    "produce_p99_ms",
    "reassign_mb_s",
    "failover_s",
    "peak_rss_cluster_mb",
    "peak_rss_max_broker_mb",
)


@dataclass
class Node:
    """One broker process that can be SIGKILLed and started again with the same command."""

    node_id: int
    port: int
    argv: list[str]
    log: Path
    data: Path
    proc: subprocess.Popen[bytes] | None = None

    def launch(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, cwd="/"
        )

    def wait_up(self) -> None:
        assert self.proc is not None
        wait_port(self.port, self.proc, self.log)

    def up(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


@dataclass
class System:
    """Three brokers, the process(es) they depend on, and who their controller is."""

    name: str
    nodes: dict[int, Node]
    side: dict[str, subprocess.Popen[bytes]]
    controller: Callable[[], int | None]
    side_peak_mb: dict[str, float] = field(default_factory=dict)

    def start(self) -> None:
        for node in self.nodes.values():
            node.launch()
        for node in self.nodes.values():
            node.wait_up()

    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes.values() if n.up())

    def close(self) -> None:
        for name, proc in self.side.items():
            if proc.poll() is None:
                self.side_peak_mb[name] = hwm_mb(proc.pid)
        for node in self.nodes.values():
            if node.proc is not None:
                stop(node.proc)
        for proc in self.side.values():
            stop(proc)


def hwm_mb(pid: int) -> float:
    """Peak resident set of ``pid`` over its life (``VmHWM``), MiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def start_kafka_cluster(work: Path, systems: dict[str, System]) -> None:
    """A separate KRaft controller and three brokers, entered in ``systems`` once launched."""
    home = kafka_home()
    java = kafka_java(home, "-Xms256m")
    cport = free_port()
    common = [
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"controller.quorum.voters=100@127.0.0.1:{cport}",
        *SESSION,
    ]
    controller_props = work / "kafka-controller.properties"
    controller_props.write_text(
        "\n".join(
            [
                *common,
                "process.roles=controller",
                "node.id=100",
                f"listeners=CONTROLLER://127.0.0.1:{cport}",
                f"log.dirs={work / 'kafka-controller'}",
                "",
            ]
        )
    )
    nodes: dict[int, Node] = {}
    for n in BROKERS:
        port, data, props = free_port(), work / f"kafka-b{n}", work / f"kafka-b{n}.properties"
        props.write_text(
            "\n".join(
                [
                    *common,
                    "process.roles=broker",
                    f"node.id={n}",
                    f"listeners=PLAINTEXT://127.0.0.1:{port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                    "inter.broker.listener.name=PLAINTEXT",
                    f"log.dirs={data}",
                    "offsets.topic.replication.factor=3",
                    "offsets.topic.num.partitions=3",
                    "group.initial.rebalance.delay.ms=0",
                    "",
                ]
            )
        )
        nodes[n] = Node(n, port, [*java, "kafka.Kafka", str(props)], work / f"kafka-b{n}.log", data)
    cluster_id = kafka_cluster_id()
    with ThreadPoolExecutor(4) as pool:
        formats = [controller_props, *(work / f"kafka-b{n}.properties" for n in BROKERS)]
        list(pool.map(lambda p: format_kafka(java, p, cluster_id), formats))
    log = work / "kafka-controller.log"
    controller = subprocess.Popen(
        [*java, "kafka.Kafka", str(controller_props)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    system = System("kafka", nodes, {"kafka_controller": controller}, lambda: None)
    systems["kafka"] = system  # stopped by the caller from now on, whatever fails next
    wait_port(cport, controller, log)
    system.start()


def start_spindle_cluster(work: Path, systems: dict[str, System]) -> None:
    """Etcd and three elected-mode brokers, entered in ``systems`` before any broker starts."""
    prefix = f"/bench/{uuid.uuid4().hex}"
    nodes: dict[int, Node] = {}
    etcd, url = start_etcd(work)
    for n in BROKERS:
        port, data, config = free_port(), work / f"spindle-b{n}", work / f"spindle-b{n}.properties"
        config.write_text(
            "\n".join(
                [
                    f"node.id={n}",
                    f"listeners=PLAINTEXT://127.0.0.1:{port}",
                    f"log.dirs={data}",
                    f"spindle.etcd.endpoints={url}",
                    f"spindle.etcd.prefix={prefix}",
                    "spindle.controller.mode=elected",
                    "spindle.controller.lease.ms=2000",
                    "offsets.topic.num.partitions=3",
                    *SESSION,
                    "",
                ]
            )
        )
        argv = [sys.executable, "-m", "spindle.broker", "--config", str(config)]
        nodes[n] = Node(
            n, port, [*argv, "--log-level", "WARNING"], work / f"spindle-b{n}.log", data
        )
    systems["spindle"] = System(
        "spindle", nodes, {"etcd": etcd}, lambda: spindle_controller(url, prefix)
    )
    systems["spindle"].start()


def spindle_controller(url: str, prefix: str) -> int | None:
    """The node id of Spindle's active controller, as etcd holds it."""
    from spindle.broker.controller.etcd import EtcdClient
    from spindle.broker.controller.store import MetadataStore

    async def read() -> int | None:
        client = EtcdClient([url])
        try:
            store = MetadataStore(client, prefix=prefix)
            await store.load()
            return store.controller[0] if store.controller else None
        finally:
            await client.close()

    return asyncio.run(read())


def create_topic(
    system: System, topic: str, *, partitions: int = 3, assignment: list[list[int]] | None = None
) -> None:
    """Create ``topic`` (RF 3 unless ``assignment``), retried while brokers still unfence, and
    wait until every partition has a leader and a whole ISR."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": system.bootstrap(), "log_level": 0})
    new = (
        NewTopic(topic, len(assignment), replica_assignment=assignment)
        if assignment
        else NewTopic(topic, partitions, 3)
    )
    deadline = time.monotonic() + 90
    while True:
        try:
            admin.create_topics([new])[topic].result(30)
            break
        except Exception as e:
            if "already exists" in str(e).lower():
                break
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    wait_isr(system, topic)


def wait_isr(system: System, topic: str, timeout_s: float = 120) -> dict[int, Any]:
    """Poll metadata until every partition of ``topic`` has a leader and ISR == replicas."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": system.bootstrap(), "log_level": 0})
    deadline = time.monotonic() + timeout_s
    parts: dict[int, Any] = {}
    while True:
        try:
            parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
            if parts and all(
                p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas) for p in parts.values()
            ):
                return dict(parts)
        except Exception as e:  # metadata not there yet
            if time.monotonic() > deadline:
                raise RuntimeError(f"{system.name}: {topic} never whole: {e}") from e
        if time.monotonic() > deadline:
            raise RuntimeError(f"{system.name}: {topic} ISR never whole: {parts}")
        time.sleep(0.3)


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
    total = replica_bytes(system.nodes[1].data, topic)
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
        samples.append((time.monotonic(), replica_bytes(system.nodes[2].data, topic)))
        if time.monotonic() > deadline or (execute.poll() not in (None, 0)):
            raise RuntimeError(f"{system.name}: move stuck at {samples[-1][1]}/{total} bytes")
        time.sleep(0.02)
    out, _ = execute.communicate(timeout=120)
    if "Successfully started" not in out:
        raise RuntimeError(f"{system.name}: kafka-reassign-partitions said: {out}")
    t10, b10 = next((t, b) for t, b in samples if b >= 0.1 * total)
    t90, b90 = next((t, b) for t, b in samples if b >= 0.9 * total)
    return (b90 - b10) / max(t90 - t10, 0.02) / MB


def failover(system: System, r: int) -> dict[str, float]:
    """Seconds from SIGKILL of a (non-controller) partition leader to the ack of the first
    acks=all message produced after the kill; the victim is restarted and rejoins the ISR."""
    from confluent_kafka import Producer

    controller = system.controller()
    victim = next(n for n in (*BROKERS[r % 3 :], *BROKERS[: r % 3]) if n != controller)
    others = [n for n in BROKERS if n != victim]
    topic = f"failover-{r}"
    create_topic(system, topic, assignment=[[victim, *others]])
    producer = Producer(
        {
            "bootstrap.servers": system.bootstrap(),
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": 120_000,
            "enable.idempotence": False,
            "log_level": 0,  # not one line per refused reconnect to the killed leader
        }
    )
    acks: list[tuple[float, float]] = []  # (sent, acked), monotonic

    def sender(sent: float) -> Callable[[Any, Any], None]:
        def done(err: Any, _msg: Any) -> None:
            if err is None:
                acks.append((sent, time.monotonic()))

        return done

    killed = resumed = 0.0
    start = time.monotonic()
    while not resumed:
        now = time.monotonic()
        producer.produce(topic, b"f" * MSG_SIZE, on_delivery=sender(now))
        producer.poll(0.005)
        if not killed and now - start > 1.0 and acks:
            system.nodes[victim].kill()
            killed = time.monotonic()
        if killed:
            after = [a for s, a in acks if s >= killed]
            resumed = min(after) if after else 0.0
            if now - killed > 90:
                raise RuntimeError(f"{system.name}: produce did not resume within 90 s")
    producer.flush(30)
    node = system.nodes[victim]
    node.launch()
    node.wait_up()
    wait_isr(system, topic, timeout_s=180)
    return {"failover_s": resumed - killed, "victim": float(victim)}


def run_round(system: System, work: Path, r: int, args: argparse.Namespace) -> dict[str, float]:
    """One round on one cluster: every metric of the module docstring."""
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
    out.update(failover(system, r))
    return out


def report(
    args: argparse.Namespace,
    rounds: dict[str, list[dict[str, float]]],
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
    }
    for metric in METRICS:
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
        "--throttle",
        action="store_true",
        help="also run bench/throttle_accuracy.py (short) after the clusters stop",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    if args.quick:
        args.mb, args.move_mb, args.latency_msgs = 16, 32, 1000
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    return args


def main() -> int:
    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix="spindle-cluster-bench-"))
    print(f"load average at start {load_average()}", flush=True)
    systems: dict[str, System] = {}
    rounds: dict[str, list[dict[str, float]]] = {"kafka": [], "spindle": []}
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
                print(f"{label:9} {name:8}", json.dumps({k: round(v, 2) for k, v in got.items()}))
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
        out["throttle_accuracy"] = "not run: bench/throttle_accuracy.py (or --throttle)"
    out["load_average_at_end"] = load_average()
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
