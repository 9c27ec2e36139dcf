"""Spindle vs Apache Kafka on the same machine, same client, same settings (not a test).

Starts, in one run: a real Apache Kafka broker from Maven Central jars (KRaft combined mode,
single node, ``--dirs`` log directories; scripts/install.d/30-kafka-jars.sh installs the jars),
a real etcd and a Spindle broker with the same number of log directories. Then, for each broker
in turn, with librdkafka (confluent-kafka) and identical settings (1 KiB messages, large batches,
acks=1, no compression; the client made as cheap as it goes -- messages handed over a thousand
at a time, malloc's thresholds fixed -- since on two cores whatever the client burns is taken
from the broker being measured):

- produce MB/s: ``--mb`` MiB into a topic of ``--partitions`` partitions, until flush() returns,
  and again until the writes add up to :data:`PRODUCE_WINDOW_S`;
- consume MB/s: an assign-mode consumer reads every message back from offset 0, and again
  with a new consumer until the reads add up to :data:`CONSUME_WINDOW_S`;
- move MB/s: AlterReplicaLogDirs moves every partition to another directory (unthrottled);
  DescribeLogDirs is polled until no future replica is left and all sit in their new dirs;
  moved there and back (:data:`MOVES_PER_ROUND`), both moves timed together.

Both brokers run side by side and are measured in alternating rounds: ``--warmup`` declared
warm-up rounds first (printed, not counted: Kafka's JIT warms up over them), then ``--rounds``
counted rounds, and more (up to ``--max-rounds``) while any metric of either broker spreads
more than 15% around its median. The headline of each metric is the **median** round of each
broker, with min, max and spread, and the ratio of the medians Spindle/Kafka (targets: produce
>= 1.2, consume >= 1.0, move >= 1.0, Spindle's spread <= 15%); the best rounds' ratio is
context only. Beside them: each broker's peak resident set during each phase (``VmHWM`` of the
process, reset per phase; Kafka's JVM runs with -Xms1g), the resident set after every round
(steady, or growing), each broker's CPU seconds per phase (little moved by the machine's load,
unlike wall time), where the rest of the machine's CPU went during each phase (the client's,
the bystanders' -- the idle broker and etcd -- and how busy the whole machine was:
``cpu_during_phase``), and the load average after every round (the machine may be shared).

Every round and phase starts from the same state for both brokers, untimed: before each phase
the page cache is synced and the bench waits until the kernel holds at most
:data:`SETTLED_DIRTY_MB` of dirty or in-flight pages, then :data:`SETTLE_S` more (write-back
left by an earlier phase, of either broker, would otherwise land inside the next one). Each
round's topic is deleted at its end and the next round waits until its files are gone (both
brokers run with ``file.delete.delay.ms=1000``; 0 would make Kafka's deleter task reschedule
itself at once, forever), so no round finds more data, files or page-cache pressure than the
one before. The clients open their connections and fetch metadata for every partition before
the timed window. Rounds are ``--mb`` 1024 MiB by default: at 256 MiB a phase lasted under a
second, and one scheduler hiccup or write-back burst moved a round by tens of percent. The
brokers take turns going first.

Prints one line per round and broker and, last, one JSON line with every figure.

    .venv/bin/python bench/kafka_compare.py --mb 1024 --partitions 4 --dirs 2
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
import warnings
from pathlib import Path
from typing import Any

# bench/steady.py, found also under ``python -P`` (which does not put bench/ on the path), and
# e2e/apache_kafka.py (the Apache Kafka broker the tests compare against too).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from apache_kafka import (  # noqa: F401  (re-exported to the other benches)
    CACHE,
    format_kafka,
    free_port,
    kafka_cluster_id,
    kafka_home,
    kafka_java,
    start_kafka,
    wait_port,
)
from steady import (
    SPREAD_LIMIT,
    PeakRss,
    cpu_seconds,
    growth,
    load_average,
    machine_cpu,
    own_cpu,
    rss_mb,
    steady_client_allocator,
    summary,
    wide,
)

MSG_SIZE = 1024


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
                "file.delete.delay.ms=1000",
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


METRICS = ("produce_mb_s", "consume_mb_s", "move_mb_s")
WARMUP_ROUNDS = 2
"""Rounds of both brokers run first and not counted. Two, not one: with one, Spindle's first
counted round was its slowest produce round in four of six runs (stops 34-36: 496, 651, 775,
716 MB/s against medians of 644, 700, 834, 825), with 14-30 % more broker CPU per GiB than its
later rounds; Kafka's JIT was also still warming in it (601 against a median of 649)."""

PHASES = ("produce", "consume", "move")
TARGETS = {"produce_mb_s": 1.2, "consume_mb_s": 1.0, "move_mb_s": 1.0}
"""Spindle/Kafka at the median (issue 17); Spindle's own spread must stay within 15%."""


SETTLED_DIRTY_MB = 32.0
"""Dirty plus write-back pages (``/proc/meminfo``) a phase may start with."""
SETTLE_S = 1.0
"""Quiet time after the write-back has drained, before a phase starts."""


def dirty_mb() -> float:
    """Page-cache bytes not yet on disk (Dirty + Writeback), MiB."""
    total = 0
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith(("Dirty:", "Writeback:")):
                total += int(line.split()[1])
    return total / 1024


def settle(timeout: float = 15.0) -> float:
    """Untimed, before every phase of either broker: sync, wait for the kernel's write-back to
    drain (other processes may keep some pages dirty: give up after ``timeout``), then
    :data:`SETTLE_S`. Returns the dirty MiB left."""
    deadline = time.monotonic() + timeout
    os.sync()
    while (left := dirty_mb()) > SETTLED_DIRTY_MB and time.monotonic() < deadline:
        time.sleep(0.1)
        os.sync()
    time.sleep(SETTLE_S)
    return left


def drop_topic(bootstrap: str, topic: str, log_dirs: list[Path]) -> None:
    """Delete ``topic`` and wait until its partitions' directories are gone from every log
    dir (untimed, after a round: the next round starts without its files)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_topics([topic]).values():
        fut.result(60)
    deadline = time.monotonic() + 120
    while any(n.startswith(f"{topic}-") for d in log_dirs for n in os.listdir(d)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}'s files were not deleted within 120 s")
        time.sleep(0.1)


def measure(
    port: int,
    probe: PeakRss,
    *,
    topic: str,
    mb: int,
    partitions: int,
    log_dirs: list[Path],
    bystanders: dict[str, int],
) -> dict[str, float]:
    """Produce, consume and move on one broker: MB/s for each (MB = 10^6 bytes), the
    broker's peak resident set (MiB) and where the machine's CPU went during each (see
    :func:`cpu_ledger`); then the topic is deleted."""
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(60)
    count = mb * 1024 * 1024 // MSG_SIZE
    total_bytes = count * MSG_SIZE
    out: dict[str, float] = {}
    for phase in PHASES:
        # Untimed: what earlier phases left dirty in the page cache (either broker's; Kafka
        # never fsyncs, Spindle's mover does) is written back now, not inside this phase.
        out[f"{phase}_dirty_mb_at_start"] = round(settle(), 1)
        cpu = cpu_seconds(probe.pid)
        before = cpu_ledger(bystanders)
        with probe.phase() as peak:
            if phase == "produce":
                took, writes = produce_window(bootstrap, topic, count, partitions)
                out["produce_mb_s"] = writes * total_bytes / took / 1e6
                out["produce_writes"] = float(writes)
                # Each write's warm-up message per partition is in the topic too.
                total_bytes *= writes
                count = writes * (count + partitions)
            elif phase == "consume":
                took, reads = consume_window(bootstrap, topic, count, partitions)
                out["consume_mb_s"] = reads * total_bytes / took / 1e6
                out["consume_reads"] = float(reads)
            else:
                took, moved = move_window(port, topic, partitions)
                out["move_mb_s"] = moved / took / 1e6 if took > 0 else 0.0
                out["moved_bytes"] = float(moved)
                out["moves"] = float(MOVES_PER_ROUND)
        out[f"{phase}_peak_rss_mb"] = peak[0]
        out[f"{phase}_cpu_s"] = round(cpu_seconds(probe.pid) - cpu, 2)
        after = cpu_ledger(bystanders)
        spent = {k: after[k] - before[k] for k in after}
        out[f"{phase}_client_cpu_s"] = round(spent["client"], 2)
        out[f"{phase}_bystanders_cpu_s"] = round(spent["bystanders"], 2)
        out[f"{phase}_machine_busy"] = round(spent["busy"] / spent["total"], 3)
        out[f"{phase}_steal_s"] = round(spent["steal"], 2)
    drop_topic(bootstrap, topic, log_dirs)
    return out


def cpu_ledger(bystanders: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of the client (this process: the Python loop and librdkafka's
    threads), of the bystanders (the broker not being measured, and etcd) and of the whole
    machine (busy, total, stolen). Differenced over a phase, they say where the machine's
    CPU went: on two cores the client and the broker share them, so a phase whose machine is
    ~100 % busy measured the pair, and a bystander's CPU (a JVM's compiler and collector
    threads finishing after its own phase) is taken from the broker being measured."""
    busy, total, steal = machine_cpu()
    idle_brokers = 0.0
    for pid in bystanders.values():
        with contextlib.suppress(OSError):
            idle_brokers += cpu_seconds(pid)
    return {
        "client": own_cpu(),
        "bystanders": idle_brokers,
        "busy": busy,
        "total": total,
        "steal": steal,
    }


PRODUCER = {
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "batch.num.messages": 100_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "queue.buffering.max.messages": 1_000_000,
    "compression.type": "none",
    "enable.idempotence": False,
}
"""The benchmark's producer settings (``acks`` is :func:`_produce`'s argument)."""


PRODUCE_WINDOW_S = 8.0
"""A round's produce phase writes ``--mb`` MiB, and again into the same topic, until its
writes add up to at least this long (one write of 1 GiB takes ~2 s); the consume and move
phases then read and move everything written (4-5 GiB a round). Measured with nine rounds
each in one session (stop 33), spread of Spindle's / Kafka's rounds: with 3 s windows
(two writes), produce 0.32 / 0.50, consume 0.29 / 0.18, move 0.21 / 0.44; with 8 s, 0.19 /
0.22, 0.19 / 0.22, 0.24 / 0.22. Single reads, not rounds, fall into two modes (~650 and
~830 MB/s, both brokers): a round of one or two reads takes its mode, a longer one mixes
them. Longer windows also give Kafka's JIT more of each round (its produce still rose from
round to round at 3 s)."""


def produce_window(bootstrap: str, topic: str, count: int, partitions: int) -> tuple[float, int]:
    """Writes (:func:`_produce`) of ``count`` messages until they add up to
    :data:`PRODUCE_WINDOW_S`: seconds and the number of writes."""
    took, writes = 0.0, 0
    while took < PRODUCE_WINDOW_S:
        took, writes = took + _produce(bootstrap, topic, count, partitions), writes + 1
    return took, writes


PRODUCE_BATCH = 1000
"""Messages handed to librdkafka in one ``produce_batch`` call (one partition each, the
partitions in turn): ~1 MB, one batch of :data:`PRODUCER`'s size."""


def _produce(bootstrap: str, topic: str, count: int, partitions: int, acks: int | str = 1) -> float:
    """Seconds to produce ``count`` messages over the partitions until flush()
    (bench/cluster_compare.py passes ``acks="all"``).

    Messages go to librdkafka :data:`PRODUCE_BATCH` at a time (``produce_batch``), the
    partitions taking turns, rather than one ``produce()`` call per message: on two cores
    the client shares the machine with the broker, and the per-message calls made the client
    the larger part of every round. Measured against one Spindle broker, 1 GiB a write, CPU
    seconds of the client's threads per GiB: ``produce()`` per message 2.0-2.2 (Python
    thread 1.1-1.4, librdkafka's broker thread ~0.9), ``produce_batch`` 1.5-1.6 (0.8, 0.75);
    the broker's own CPU per GiB the same (~0.66). Messages the full queue refuses come back
    marked ``_error`` and are offered again after a poll."""
    from confluent_kafka import Producer

    payload = os.urandom(MSG_SIZE)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, **PRODUCER})
    # Warm up metadata and connections outside the timed window: one message per partition.
    for p in range(partitions):
        producer.produce(topic, payload, partition=p)
    producer.flush(30)
    chunk = [{"value": payload} for _ in range(PRODUCE_BATCH)]
    start = time.perf_counter()
    for n, first in enumerate(range(0, count, PRODUCE_BATCH)):
        batch = chunk[: min(PRODUCE_BATCH, count - first)]
        partition = n % partitions
        while producer.produce_batch(topic, batch, partition=partition) < len(batch):
            # Queue full: what was refused carries "_error"; clear it and offer that again.
            batch = [m for m in batch if m.pop("_error", None) is not None]
            producer.poll(0.01)
    if producer.flush(600) != 0:
        raise RuntimeError("producer did not deliver everything")
    return time.perf_counter() - start


CONSUMER = {
    "enable.auto.commit": False,
    # librdkafka's own defaults, named here because the benchmark depends on them: 1 MiB per
    # partition and fetch, 64 MiB queued in the client.
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 1_048_576,
    "queued.max.messages.kbytes": 65_536,
    # Not the default (1000 ms): how long librdkafka stops fetching a partition whose local
    # queue is over its threshold (queued.min.messages, queued.max.messages.kbytes). The
    # broker answers faster than this loop takes messages, so queues fill; at 1000 ms a round
    # timed the client's pauses -- one or two in a 1-2 s round split both brokers' rounds into
    # two modes (~500 and ~1000 MB/s). At 10 ms the client fetches again as soon as it drained.
    "fetch.queue.backoff.ms": 10,
}
"""The benchmark's consumer settings (see :func:`_consume` for what was measured)."""


CONSUME_WINDOW_S = 8.0
"""A round's consume phase reads the topic from offset 0, again and again with a new consumer,
until its reads add up to at least this long: one read of 1 GiB takes ~1 s, where a
scheduler hiccup of the client's or the broker's threads on two cores moved a round by tens
of percent (stop 30: Spindle 823-1049 MB/s, Kafka 762-1117 in five rounds); see
:data:`PRODUCE_WINDOW_S` for 3 s against 8 s."""


def consume_window(bootstrap: str, topic: str, want: int, partitions: int) -> tuple[float, int]:
    """Reads (:func:`_consume`) until they add up to :data:`CONSUME_WINDOW_S`: seconds and
    the number of reads."""
    took, reads = 0.0, 0
    while took < CONSUME_WINDOW_S:
        took, reads = took + _consume(bootstrap, topic, want, partitions), reads + 1
    return took, reads


def _consume(bootstrap: str, topic: str, want: int, partitions: int) -> float:
    """Seconds for an assign-mode consumer to read ``want`` messages from offset 0.

    Settings (:data:`CONSUMER`), measured with one broker of each kind, 1 GiB topic of 4
    partitions produced afresh before each of 8 rounds (MB/s, min-median-max): with 10 MiB per
    partition fetch, 1 GiB queued and the 1000 ms queue backoff (this benchmark until then),
    Spindle 864-954-1121, Kafka 405-469-548, and earlier runs bimodal for both; with the
    10 ms backoff, Spindle 959-1097-1184, Kafka 819-947-1036; with 10 ms and librdkafka's
    1 MiB per partition and 64 MiB queued, Spindle 1369-1471-1559, Kafka 803-1208-1330 (its
    first round: the JIT), and the client page-faults ~30-50K pages a round instead of ~270K
    (each 40 MB response had been a fresh mapping). With 1 MiB and the 1000 ms backoff, both
    brokers' rounds were bimodal again (Spindle 392-635-1348)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", **CONSUMER})
    consumer.list_topics(topic, timeout=30)  # connection and metadata, outside the window
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    while got < want:
        # consume() waits until it has num_messages or the timeout passes: never ask for more
        # than what is left, or the last call would time the timeout instead of the broker.
        msgs = consumer.consume(num_messages=min(10_000, want - got), timeout=10)
        if not msgs:
            raise RuntimeError(f"consumer stalled at {got}/{want}")
        got += sum(1 for m in msgs if m.error() is None)
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


MOVES_PER_ROUND = 2
"""A round's move phase moves every partition to the other directory and back: two moves,
back to back, no settling between them (what the first left dirty -- Kafka does not fsync a
moved replica, Spindle's mover does -- is written back during the second), timed together.
A fixed pair, not a time window: a round's first move runs faster than the ones after it
(Spindle, topics of 5.4-6.5 GB: 1.5-1.8 GB/s against 1.2-1.6; the source fresh in the page
cache), so a window that fitted three moves in some rounds and two in others made a round's
rate depend on how many fitted -- in one run Spindle's three-move rounds were its three
fastest (1,634-1,759 MB/s, two-move rounds 1,343-1,517: spread 0.28), while Kafka's slower
moves always fitted two. A pair is also the same work for both brokers. Each move is of the
whole topic the produce phase wrote (4-7 GiB), seconds on either broker; timed alone, a
1 GiB move (completion seen by polling DescribeLogDirs every 50 ms, one write-back burst of
the host's disk inside it) spread Spindle's rounds by 0.89 of their median (stop 29)."""


def move_window(port: int, topic: str, partitions: int) -> tuple[float, int]:
    """:data:`MOVES_PER_ROUND` moves (:func:`move_all`): seconds and bytes moved."""
    took, moved = 0.0, 0
    for _ in range(MOVES_PER_ROUND):
        t, b = move_all(port, topic, partitions)
        took, moved = took + t, moved + b
    return took, moved


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


def run_rounds(
    args: argparse.Namespace,
    brokers: dict[str, tuple[int, PeakRss, list[Path]]],
    etcd_pid: int,
) -> tuple[dict[str, list[dict[str, float]]], list[list[float]]]:
    """Warm-up rounds (printed, not kept), then ``--rounds`` alternating rounds, then more, up
    to ``--max-rounds``, while any metric of either broker spreads wider than SPREAD_LIMIT.
    Returns each broker's counted rounds and the load average after every round."""
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in brokers}
    loads: list[list[float]] = []
    r = 0
    while True:
        counted = r - args.warmup
        if counted >= args.rounds:
            spread = [m for n in rounds for m in METRICS if wide([x[m] for x in rounds[n]])]
            if counted >= args.max_rounds or not spread:
                return rounds, loads
            print(f"wide spread in {sorted(set(spread))}: one more round", flush=True)
        label = "warmup" if counted < 0 else f"round {counted}"
        # Alternate who goes first, so that neither always runs after the other's phases.
        order = list(brokers.items()) if r % 2 == 0 else list(reversed(brokers.items()))
        for name, (port, probe, log_dirs) in order:
            got = measure(
                port,
                probe,
                topic=f"bench-{r}",
                mb=args.mb,
                partitions=args.partitions,
                log_dirs=log_dirs,
                bystanders={
                    "etcd": etcd_pid,
                    **{n: b[1].pid for n, b in brokers.items() if n != name},
                },
            )
            got["rss_after_round_mb"] = round(rss_mb(probe.pid), 1)
            if counted >= 0:
                rounds[name].append(got)
            print(
                f"{label:9} {name:8}",
                json.dumps({k: round(v, 1) for k, v in got.items()}),
                flush=True,
            )
        if counted >= 0:
            loads.append(load_average())
        print(f"{label:9} load average {load_average()}", flush=True)
        r += 1


def report(
    args: argparse.Namespace,
    rounds: dict[str, list[dict[str, float]]],
    loads: list[list[float]],
    etcd_rss: float,
) -> dict[str, Any]:
    """The final JSON: per metric the median (headline) with min/max/spread per broker and
    the ratio of medians; best rounds as context; peak RSS per phase; RSS growth."""
    out: dict[str, Any] = {
        "bench": "kafka_compare",
        "mb": args.mb,
        "produce_window_s": PRODUCE_WINDOW_S,
        "consume_window_s": CONSUME_WINDOW_S,
        "moves_per_round": MOVES_PER_ROUND,
        "partitions": args.partitions,
        "dirs": args.dirs,
        "message_bytes": MSG_SIZE,
        "warmup_rounds": args.warmup,
        "rounds": len(rounds["spindle"]),
        "headline": "median of the counted rounds (after the warm-up); best round as context",
        "spindle_set": args.spindle_set,
        "client": (
            f"librdkafka (confluent-kafka), acks=1, no compression, produce_batch of "
            f"{PRODUCE_BATCH}, malloc thresholds fixed: {args.client_allocator_fixed}"
        ),
        "producer": PRODUCER,
        "consumer": CONSUMER,
        "load_average_per_round": loads,
    }
    for metric in METRICS:
        k = summary([x[metric] for x in rounds["kafka"]])
        s = summary([x[metric] for x in rounds["spindle"]])
        out[metric] = {
            "kafka": k,
            "spindle": s,
            "ratio": round(s["median"] / k["median"], 3),
            "best_round_ratio": round(s["max"] / k["max"], 3),
            "target": f">= {TARGETS[metric]}",
            "met": s["median"] / k["median"] >= TARGETS[metric] and s["spread"] <= SPREAD_LIMIT,
        }
    out["peak_rss_mb"] = {
        phase: {
            name: summary([x[f"{phase}_peak_rss_mb"] for x in rs]) for name, rs in rounds.items()
        }
        for phase in PHASES
    }
    out["peak_rss_mb"]["etcd_for_spindle_at_end"] = round(etcd_rss, 1)
    out["broker_cpu_s"] = {
        phase: {
            name: summary([x[f"{phase}_cpu_s"] for x in rs], digits=2)
            for name, rs in rounds.items()
        }
        for phase in PHASES
    }
    out["cpu_during_phase"] = {
        phase: {
            name: {
                part: summary([x[f"{phase}_{part}"] for x in rs], digits=2)
                for part in ("client_cpu_s", "bystanders_cpu_s", "machine_busy", "steal_s")
            }
            for name, rs in rounds.items()
        }
        for phase in PHASES
    }
    out["rss_across_rounds"] = {
        name: growth([x["rss_after_round_mb"] for x in rs]) for name, rs in rounds.items()
    }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="MiB produced per broker and round")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--dirs", type=int, default=2, help="log directories per broker")
    parser.add_argument(
        "--warmup", type=int, default=WARMUP_ROUNDS, help="rounds run first, not counted"
    )
    parser.add_argument("--rounds", type=int, default=5, help="counted rounds (median kept)")
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=9,
        help="counted rounds at most, added one by one while a metric spreads wide",
    )
    parser.add_argument(
        "--spindle-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spindle broker config line (repeatable)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    args.max_rounds = max(args.max_rounds, args.rounds)
    args.client_allocator_fixed = steady_client_allocator()
    work = Path(tempfile.mkdtemp(prefix="spindle-bench-"))
    procs: list[subprocess.Popen[bytes]] = []
    print(f"load average at start {load_average()}", flush=True)
    try:
        # Both brokers run for the whole benchmark and are measured in alternation, so that
        # load from other processes on a shared machine hits both alike.
        kafka, kport = start_kafka(work, args.dirs)
        procs.append(kafka)
        etcd, url = start_etcd(work)
        procs.append(etcd)
        spindle, sport = start_spindle(work, args.dirs, url, args.spindle_set)
        procs.append(spindle)
        brokers = {
            "kafka": (kport, PeakRss(kafka.pid), [work / f"kafka-d{i}" for i in range(args.dirs)]),
            "spindle": (
                sport,
                PeakRss(spindle.pid),
                [work / f"spindle-d{i}" for i in range(args.dirs)],
            ),
        }
        rounds, loads = run_rounds(args, brokers, etcd.pid)
        etcd_rss = rss_mb(etcd.pid)
    except BaseException:
        # The data goes (gigabytes a round); the processes' logs stay for the post-mortem.
        kept = Path(tempfile.mkdtemp(prefix="spindle-bench-logs-"))
        for log in work.glob("*.log"):
            shutil.copy(log, kept / log.name)
        print(f"benchmark failed; the brokers' and etcd's logs are in {kept}", file=sys.stderr)
        raise
    finally:
        for p in reversed(procs):
            stop(p)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report(args, rounds, loads, etcd_rss), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
