"""Kafka clients the node tests run on the node itself: ``python -P kafka_on_node.py CMD ...``
started through ``controlplane.node.cluster_dns_command`` (the node's network namespace, the
cluster's DNS), so kafka-python reaches the brokers by the names they advertise, as a client in
the cluster would. Standalone on purpose (no imports from the tests): it runs in another
process and mount namespace. Every command prints one JSON document.

Records are ``<partition>:<seq>:`` padded with ``x`` to their size, so a reader can say which
ones it got and compare every byte with what was written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import socket
import sys
import time
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic


def value(partition: int, seq: int, size: int) -> bytes:
    return f"{partition}:{seq}:".encode().ljust(size, b"x")


def create(args: argparse.Namespace) -> dict[str, Any]:
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap)
    admin.create_topics([NewTopic(args.topic, args.partitions, args.replication)])
    admin.close()
    return {"created": args.topic}


def produce(args: argparse.Namespace) -> dict[str, Any]:
    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap, acks="all", batch_size=256 * 1024, linger_ms=20
    )
    # A topic an earlier step failed to create fails here, by name: the metadata request may
    # auto-create it with one partition, which used to fail later as "Unrecognized partition".
    have = producer.partitions_for(args.topic) or set()
    if len(have) < args.partitions:
        producer.close()
        raise SystemExit(f"topic {args.topic} has partitions {sorted(have)}, not {args.partitions}")
    futures = [
        producer.send(args.topic, value(p, seq, args.size), partition=p)
        for seq in range(args.records)
        for p in range(args.partitions)
    ]
    producer.flush()
    for future in futures:
        future.get(timeout=60)  # raises if any record was not acknowledged
    producer.close()
    return {"produced": len(futures)}


def read(args: argparse.Namespace) -> dict[str, Any]:
    """Every record of every partition, start to end: per partition the count, the sha256 of
    all values in offset order, and which (partition, seq) were there."""
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(args.topic, p) for p in range(args.partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(tps)
    digests = {tp.partition: hashlib.sha256() for tp in tps}
    counts = dict.fromkeys(range(args.partitions), 0)
    seqs: dict[int, list[int]] = {p: [] for p in range(args.partitions)}
    deadline = time.monotonic() + 120
    while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=1000).items():
            for record in records:
                if record.offset >= ends[tp]:
                    continue
                digests[tp.partition].update(record.value)
                counts[tp.partition] += 1
                seqs[tp.partition].append(int(record.value.split(b":", 2)[1]))
    consumer.close()
    return {
        "counts": counts,
        "sha256": {p: d.hexdigest() for p, d in digests.items()},
        "seqs": seqs if args.seqs else {},
    }


def dirs(args: argparse.Namespace) -> dict[str, Any]:
    """DescribeLogDirs of each broker: {broker: {dir: {"topic-partition": size}}}, future
    replicas marked with a trailing ``*``."""
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap)
    out: dict[str, Any] = {}
    for broker in args.brokers:
        answer = admin.describe_log_dirs(brokers=[broker])[0]
        out[str(broker)] = {
            d["log_dir"]: {
                f"{t['name']}-{p['partition_index']}{'*' if p['is_future_key'] else ''}": p[
                    "partition_size"
                ]
                for t in d.get("topics") or ()
                for p in t["partitions"]
            }
            for d in answer["log_dirs"]
        }
    admin.close()
    return out


def replicas(args: argparse.Namespace) -> dict[str, Any]:
    """Each partition's replicas, preferred leader first (Metadata)."""
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap)
    (topic,) = admin.describe_topics([args.topic])
    admin.close()
    return {str(p["partition_index"]): p["replica_nodes"] for p in topic["partitions"]}


def reach(args: argparse.Namespace) -> dict[str, Any]:
    """Each bootstrap address resolved and connected to (TCP, 3 s): {host: "ok <ip>" or why
    not}. Answers whatever it finds, so a caller can wait on it and show the last answer."""
    out: dict[str, str] = {}
    for address in args.bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        try:
            ip = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0][4][0]
        except OSError as e:
            out[host] = f"not resolved: {e}"
            continue
        try:
            with socket.create_connection((ip, int(port)), timeout=3):
                out[host] = f"ok {ip}"
        except OSError as e:
            out[host] = f"{ip}: {e}"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(prog="kafka_on_node")
    parser.add_argument("--bootstrap", required=True)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("create", "produce", "read", "replicas"):
        cmd = sub.add_parser(name)
        cmd.add_argument("--topic", required=True)
        cmd.add_argument("--partitions", type=int, required=True)
        cmd.add_argument("--replication", type=int, default=3)
        cmd.add_argument("--records", type=int, default=0)
        cmd.add_argument("--size", type=int, default=1000)
        cmd.add_argument("--seqs", action="store_true")
    sub.add_parser("dirs").add_argument("--brokers", type=int, nargs="+", required=True)
    sub.add_parser("reach")
    args = parser.parse_args()
    # kafka-python's warnings (connections refused, names not resolved) on stderr, which the
    # node tests print when a command fails: "Unable to bootstrap" alone says not why.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    run = {
        "create": create,
        "produce": produce,
        "read": read,
        "dirs": dirs,
        "replicas": replicas,
        "reach": reach,
    }
    print(json.dumps(run[args.command](args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
