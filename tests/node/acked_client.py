"""The remediation scenario's Kafka client, run as a process on the node (in its network
namespace, resolving the brokers' advertised names through cluster DNS: see
``controlplane.node.cluster_dns_command``), talking to the test through files in WORKDIR.

1. ``bulk``: BULK_MB of 100 KB records, acks=all, into partition 0 (what the failed disk
   will hold); every acknowledged offset goes to ``bulk.json``;
2. then an idempotent acks=all producer (``tests/broker/verifiable.py``) writes to the same
   partition, its acknowledged count in ``progress.json`` every half second, until the test
   creates ``stop`` (``live_producer.produce_until_stopped``, as in the rebalance scenario);
3. then it checks that every acknowledged record -- bulk and the rest -- is read back, at its
   offset, once: ``verify.json``.

Usage: ``python acked_client.py BOOTSTRAP TOPIC WORKDIR BULK_MB``
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))

from confluent_kafka import KafkaError, Message, Producer
from live_producer import produce_until_stopped, report  # this file's folder: sys.path[0]
from verifiable import consume_all, verify_consumed

RECORD = 100_000


def bulk(bootstrap: str, topic: str, megabytes: int) -> list[int]:
    """Write ``megabytes`` MB to partition 0; the offsets acknowledged."""
    acked: list[int] = []
    failed: list[str] = []

    def done(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked.append(int(msg.offset() or 0))
        else:
            failed.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 20,
            "message.timeout.ms": 300_000,
        }
    )
    count = megabytes * 1_000_000 // RECORD
    for seq in range(count):
        value = f"bulk/{seq}/".encode().ljust(RECORD, b"x")
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(300)
    if failed:
        raise SystemExit(f"bulk: {len(failed)} records failed: {failed[:3]}")
    return sorted(acked)


def main(bootstrap: str, topic: str, workdir: str, megabytes: str) -> None:
    work = Path(workdir)
    started = time.monotonic()
    offsets = bulk(bootstrap, topic, int(megabytes))
    (work / "bulk.json").write_text(
        json.dumps({"records": len(offsets), "seconds": time.monotonic() - started})
    )
    producer = produce_until_stopped(bootstrap, topic, [0], work, rate=40.0)
    verification = verify_consumed(bootstrap, producer, timeout_s=900)
    end = max(offsets) + 1 if offsets else 0
    read = consume_all(bootstrap, topic, {0: end}, timeout_s=900)[0] if offsets else []
    found = {o for o, v in read if v.startswith("bulk/")}
    missing_bulk = sorted(set(offsets) - found)
    (work / "verify.json").write_text(
        json.dumps(
            {
                **report(verification),
                "bulk_acked": len(offsets),
                "bulk_missing": missing_bulk[:20],
                "bulk_missing_count": len(missing_bulk),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:5])
