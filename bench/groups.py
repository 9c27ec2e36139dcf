"""Consumer groups, Spindle vs Apache Kafka on the same machine (not a test).

Starts, in one run, a real Apache Kafka broker (KRaft, from Maven Central jars), a real etcd
and a Spindle broker, both with ``group.initial.rebalance.delay.ms=0``. On each broker:

- consume MB/s with a group consumer: ``kafka-consumer-perf-test`` (Kafka's own tool, a fresh
  group each round) reads ``--mb`` MiB of 1 KiB messages from a 6-partition topic; the figure
  is its ``fetch.MB.sec`` (MiB/s while fetching, its rebalance excluded) and its
  ``rebalance.time.ms`` is reported beside it;
- rebalance time of a 3-member librdkafka group: two confluent-kafka members are stable, a third
  joins; the time from the third member's ``subscribe`` until the three assignments are
  disjoint, non-empty and cover all 6 partitions. Members heartbeat every 500 ms on both brokers
  (existing members learn of a rebalance from a heartbeat), eager assignment (range).

Rounds alternate between the brokers (``--rounds``, after one warm-up round each that is not
counted); the headline is the median of each metric, and the ratios Spindle/Kafka (targets:
consume >= 0.7x Kafka's, rebalance time <= 1.5x Kafka's). One line per round, then one JSON line.

    .venv/bin/python bench/groups.py --mb 64 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from kafka_compare import CACHE, MSG_SIZE, _produce, start_etcd, start_kafka, start_spindle, stop
from steady import summary

PARTITIONS = 6
TOPIC = "bench-groups"


def perf_test(bootstrap: str, messages: int) -> tuple[float, float]:
    """(fetch MiB/s, rebalance ms) of one ``kafka-consumer-perf-test`` run with a new group."""
    tool = shutil.which("kafka-consumer-perf-test") or str(
        CACHE / "bin" / "kafka-consumer-perf-test"
    )
    out = subprocess.run(
        [
            tool,
            "--bootstrap-server",
            bootstrap,
            "--topic",
            TOPIC,
            "--messages",
            str(messages),
            "--group",
            f"perf-{uuid.uuid4().hex[:8]}",
            "--timeout",
            "120000",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    header, values = out.strip().splitlines()[-2:]
    row = dict(zip([h.strip() for h in header.split(",")], values.split(","), strict=False))
    if int(row["data.consumed.in.nMsg"]) < messages:
        raise RuntimeError(f"perf test consumed {row['data.consumed.in.nMsg']} of {messages}")
    return float(row["fetch.MB.sec"]), float(row["rebalance.time.ms"])


class GroupMember:
    """A confluent-kafka consumer polling on its own thread; ``assigned`` follows callbacks."""

    def __init__(self, bootstrap: str, group: str) -> None:
        from confluent_kafka import Consumer

        self.assigned: set[int] = set()
        self._stop = threading.Event()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 500,
                "enable.auto.commit": False,
                "partition.assignment.strategy": "range",
            }
        )
        self.started = time.perf_counter()
        self.consumer.subscribe([TOPIC], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_assign(self, _c: Any, parts: list[Any]) -> None:
        self.assigned = {p.partition for p in parts}

    def _on_revoke(self, _c: Any, _parts: list[Any]) -> None:
        self.assigned = set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def _covered(members: list[GroupMember]) -> bool:
    parts = [p for m in members for p in m.assigned]
    return sorted(parts) == list(range(PARTITIONS)) and all(m.assigned for m in members)


def _wait(members: list[GroupMember], timeout: float = 120) -> float:
    deadline = time.perf_counter() + timeout
    while not _covered(members):
        if time.perf_counter() > deadline:
            raise RuntimeError("group did not settle")
        time.sleep(0.005)
    return time.perf_counter()


def rebalance_ms(bootstrap: str) -> float:
    """Milliseconds from a third member's subscribe until the 3-member assignment is done."""
    group = f"reb-{uuid.uuid4().hex[:8]}"
    members = [GroupMember(bootstrap, group), GroupMember(bootstrap, group)]
    try:
        _wait(members)
        third = GroupMember(bootstrap, group)
        members.append(third)
        done = _wait(members)
        return (done - third.started) * 1000
    finally:
        for m in members:
            m.close()


def prepare(port: int, mb: int) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        fut.result(60)
    count = mb * 1024 * 1024 // MSG_SIZE
    _produce(bootstrap, TOPIC, count, PARTITIONS)
    return count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=64, help="MiB in the topic the perf test reads")
    ap.add_argument("--rounds", type=int, default=3, help="counted rounds per broker")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="spindle-bench-groups-"))
    procs = []
    try:
        etcd, etcd_url = start_etcd(work)
        procs.append(etcd)
        spindle, sport = start_spindle(work, 1, etcd_url, ["group.initial.rebalance.delay.ms=0"])
        procs.append(spindle)
        kafka, kport = start_kafka(work, 1)
        procs.append(kafka)
        brokers = {"spindle": sport, "kafka": kport}
        counts = {name: prepare(port, args.mb) for name, port in brokers.items()}
        results: dict[str, dict[str, list[float]]] = {
            n: {"consume_mb_s": [], "perf_rebalance_ms": [], "rebalance_ms": []} for n in brokers
        }
        for round_ in range(args.rounds + 1):
            for name, port in brokers.items():
                bootstrap = f"127.0.0.1:{port}"
                mb_s, perf_reb = perf_test(bootstrap, counts[name])
                reb = rebalance_ms(bootstrap)
                label = "warm-up" if round_ == 0 else f"round {round_}"
                print(
                    f"{label} {name}: consume {mb_s:.1f} MiB/s (perf-test rebalance "
                    f"{perf_reb:.0f} ms), 3-member rebalance {reb:.0f} ms",
                    flush=True,
                )
                if round_ > 0:
                    results[name]["consume_mb_s"].append(mb_s)
                    results[name]["perf_rebalance_ms"].append(perf_reb)
                    results[name]["rebalance_ms"].append(reb)
        figures = {n: {k: summary(v) for k, v in r.items()} for n, r in results.items()}
        s, k = figures["spindle"], figures["kafka"]
        ratios = {
            "consume": round(s["consume_mb_s"]["median"] / k["consume_mb_s"]["median"], 3),
            "rebalance_time": round(s["rebalance_ms"]["median"] / k["rebalance_ms"]["median"], 3),
        }
        print(
            json.dumps(
                {
                    "bench": "groups",
                    "mb": args.mb,
                    "partitions": PARTITIONS,
                    "rounds": args.rounds,
                    "spindle": figures["spindle"],
                    "kafka": figures["kafka"],
                    "ratios": ratios,
                    "targets": {"consume": ">= 0.7", "rebalance_time": "<= 1.5"},
                    "targets_met": {
                        "consume": ratios["consume"] >= 0.7,
                        "rebalance_time": ratios["rebalance_time"] <= 1.5,
                    },
                }
            )
        )
        return 0
    finally:
        for proc in reversed(procs):
            stop(proc)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
