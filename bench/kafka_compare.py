"""Spindle vs Apache Kafka on the same machine, same client, same settings (not a test).

Starts, in one run: a real Apache Kafka broker from Maven Central jars (KRaft combined mode,
single node, ``--dirs`` log directories; scripts/install.d/30-kafka-jars.sh installs the jars),
a real etcd and a Spindle broker with the same number of log directories. Then, for each broker
in turn, with librdkafka (confluent-kafka) and identical settings (1 KiB messages, large batches,
acks=1, no compression):

- produce MB/s: ``--mb`` MiB into a topic of ``--partitions`` partitions, until flush() returns;
- consume MB/s: an assign-mode consumer reads every message back from offset 0;
- move MB/s: AlterReplicaLogDirs moves every partition to another directory (unthrottled);
  DescribeLogDirs is polled until no future replica is left and all sit in their new dirs.

Prints one line per measurement and, last, one JSON line with both brokers' figures and the
ratios Spindle/Kafka (targets: produce >= 0.5, consume >= 0.7, move >= 1.0). Both brokers run
side by side and are measured in alternating rounds (``--rounds``); the best round counts.

    .venv/bin/python bench/kafka_compare.py --mb 256 --partitions 4 --dirs 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
import warnings
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("SPINDLE_CACHE", Path.home() / ".cache" / "spindle"))
KAFKA_VERSION_FILE = Path(__file__).resolve().parent.parent / "e2e" / "kafka-tools" / "pom.xml"
MSG_SIZE = 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"process exited ({proc.returncode}); log:\n{log.read_text()[-3000:]}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"port {port} did not open; log:\n{log.read_text()[-3000:]}")


def kafka_home() -> Path:
    text = KAFKA_VERSION_FILE.read_text()
    version = text.split("<kafka.version>")[1].split("</kafka.version>")[0]
    home = CACHE / "kafka" / version
    if not (home / "lib").is_dir():
        raise SystemExit(f"Kafka jars missing under {home}: run ./dev sync first")
    return home


def start_kafka(work: Path, dirs: int) -> tuple[subprocess.Popen[bytes], int]:
    home = kafka_home()
    port, cport = free_port(), free_port()
    log_dirs = [str(work / f"kafka-d{i}") for i in range(dirs)]
    props = work / "kafka.properties"
    props.write_text(
        "\n".join(
            [
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{cport}",
                f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                "controller.listener.names=CONTROLLER",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name=PLAINTEXT",
                f"log.dirs={','.join(log_dirs)}",
                "offsets.topic.replication.factor=1",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "num.partitions=1",
                "",
            ]
        )
    )
    java = [
        "java",
        "-Xms1g",
        "-Xmx1g",
        "-XX:+UseG1GC",
        f"-Dlog4j.configuration=file:{home / 'tools-log4j.properties'}",
        "-cp",
        f"{home / 'lib'}/*",
    ]
    subprocess.run(
        [*java, "kafka.tools.StorageTool", "format", "-t", _kafka_cluster_id(), "-c", str(props)],
        check=True,
        capture_output=True,
    )
    log = work / "kafka.log"
    proc = subprocess.Popen(
        [*java, "kafka.Kafka", str(props)], stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    wait_port(port, proc, log)
    return proc, port


def _kafka_cluster_id() -> str:
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def start_etcd(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    client, peer = free_port(), free_port()
    url = f"http://127.0.0.1:{client}"
    etcd = shutil.which("etcd") or str(CACHE / "bin" / "etcd")
    log = work / "etcd.log"
    proc = subprocess.Popen(
        [
            etcd,
            "--name=bench",
            f"--data-dir={work / 'etcd'}",
            f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=bench=http://127.0.0.1:{peer}",
            "--log-level=error",
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return proc, url
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("etcd did not start") from None
            time.sleep(0.1)


def start_spindle(
    work: Path, dirs: int, etcd_url: str, extra: list[str]
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    config = work / "spindle.properties"
    config.write_text(
        "\n".join(
            [
                "node.id=1",
                f"listeners=PLAINTEXT://127.0.0.1:{port}",
                f"log.dirs={','.join(str(work / f'spindle-d{i}') for i in range(dirs))}",
                f"spindle.etcd.endpoints={etcd_url}",
                f"spindle.etcd.prefix=/bench/{uuid.uuid4().hex}",
                *extra,
                "",
            ]
        )
    )
    log = work / "spindle.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spindle.broker", "--config", str(config), "--log-level", "WARNING"],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd="/",
    )
    wait_port(port, proc, log)
    return proc, port


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure(port: int, *, topic: str, mb: int, partitions: int) -> dict[str, float]:
    """Produce, consume and move on one broker; MB/s for each (MB = 10^6 bytes)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(60)
    count = mb * 1024 * 1024 // MSG_SIZE
    payload = os.urandom(MSG_SIZE)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "batch.num.messages": 100_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "none",
            "enable.idempotence": False,
        }
    )
    # Warm up metadata and connections outside the timed window.
    producer.produce(topic, payload, partition=0)
    producer.flush(30)
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(600) != 0:
        raise RuntimeError("producer did not deliver everything")
    produce_s = time.perf_counter() - start
    total_bytes = count * MSG_SIZE

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "queued.max.messages.kbytes": 1_048_576,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    want = count + 1
    got = 0
    start = time.perf_counter()
    while got < want:
        # consume() waits until it has num_messages or the timeout passes: never ask for more
        # than what is left, or the last call would time the timeout instead of the broker.
        msgs = consumer.consume(num_messages=min(10_000, want - got), timeout=10)
        if not msgs:
            raise RuntimeError(f"consumer stalled at {got}/{want}")
        got += sum(1 for m in msgs if m.error() is None)
    consume_s = time.perf_counter() - start
    consumer.close()

    move_s, moved = move_all(port, topic, partitions)
    return {
        "produce_mb_s": total_bytes / produce_s / 1e6,
        "consume_mb_s": total_bytes / consume_s / 1e6,
        "move_mb_s": moved / move_s / 1e6 if move_s > 0 else 0.0,
        "moved_bytes": float(moved),
    }


def move_all(port: int, topic: str, partitions: int) -> tuple[float, int]:
    """Move every partition to the next log dir; time until DescribeLogDirs shows it done."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import KafkaAdminClient
        from kafka.structs import TopicPartitionReplica

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    try:

        def placement() -> tuple[dict[tuple[int, bool], str], dict[int, int], list[str]]:
            where: dict[tuple[int, bool], str] = {}
            sizes: dict[int, int] = {}
            dirs: list[str] = []
            for entry in admin.describe_log_dirs():
                for d in entry["log_dirs"]:
                    if d["error_code"]:
                        raise RuntimeError(f"log dir {d['log_dir']} went offline during the run")
                    dirs.append(d["log_dir"])
                    for t in d["topics"]:
                        if t["name"] != topic:
                            continue
                        for p in t["partitions"]:
                            where[(p["partition_index"], p["is_future_key"])] = d["log_dir"]
                            if not p["is_future_key"]:
                                sizes[p["partition_index"]] = p["partition_size"]
            return where, sizes, sorted(dirs)

        where, sizes, dirs = placement()
        target = {
            p: dirs[(dirs.index(where[(p, False)]) + 1) % len(dirs)] for p in range(partitions)
        }
        start = time.perf_counter()
        result = admin.alter_replica_log_dirs(
            {TopicPartitionReplica(topic, p, 1): d for p, d in target.items()}
        )
        bad = {k: v for k, v in result.items() if v.__name__ != "NoError"}
        if bad:
            raise RuntimeError(f"AlterReplicaLogDirs failed: {bad}")
        deadline = time.monotonic() + 1800
        while True:
            now, _, _ = placement()
            if now == {(p, False): d for p, d in target.items()}:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"move did not finish: {now}")
            time.sleep(0.05)
        return time.perf_counter() - start, sum(sizes.values())
    finally:
        admin.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256, help="MiB produced per broker")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--dirs", type=int, default=2, help="log directories per broker")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; best kept")
    parser.add_argument(
        "--spindle-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spindle broker config line (repeatable)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="spindle-bench-"))
    rounds: dict[str, list[dict[str, float]]] = {"kafka": [], "spindle": []}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        # Both brokers run for the whole benchmark and are measured in alternation, so that
        # load from other processes on a shared machine hits both alike; the best round of
        # each metric is kept.
        kafka, kport = start_kafka(work, args.dirs)
        procs.append(kafka)
        etcd, url = start_etcd(work)
        procs.append(etcd)
        spindle, sport = start_spindle(work, args.dirs, url, args.spindle_set)
        procs.append(spindle)
        for r in range(args.rounds):
            for name, port in (("kafka", kport), ("spindle", sport)):
                got = measure(port, topic=f"bench-{r}", mb=args.mb, partitions=args.partitions)
                rounds[name].append(got)
                print(
                    f"round {r} {name:8}",
                    json.dumps({k: round(v, 1) for k, v in got.items()}),
                    flush=True,
                )
    finally:
        for p in reversed(procs):
            stop(p)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    results = {
        name: {m: max(r[m] for r in rs) for m in ("produce_mb_s", "consume_mb_s", "move_mb_s")}
        for name, rs in rounds.items()
    }
    out: dict[str, Any] = {
        "bench": "kafka_compare",
        "mb": args.mb,
        "partitions": args.partitions,
        "dirs": args.dirs,
        "message_bytes": MSG_SIZE,
        "rounds": args.rounds,
        "spindle_set": args.spindle_set,
        "client": "librdkafka (confluent-kafka), acks=1, no compression",
    }
    for metric in ("produce_mb_s", "consume_mb_s", "move_mb_s"):
        k, s = results["kafka"][metric], results["spindle"][metric]
        out[metric] = {"kafka": round(k, 1), "spindle": round(s, 1), "ratio": round(s / k, 3)}
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
