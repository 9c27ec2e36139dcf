"""The rebalance scenario's live producer, run as a process on the node (its network namespace,
the cluster's DNS: see ``controlplane.node.cluster_dns_command``), talking to the test through
files in WORKDIR:

1. an idempotent acks=all producer (``tests/broker/verifiable.py``, librdkafka: the client whose
   idempotence rides out leader changes and retries as Kafka's Java client does) writes to
   every partition of TOPIC, its acknowledged count in ``progress.json`` every half second,
   until the test creates ``stop``;
2. then it checks that every acknowledged record is read back, at its offset, once and in
   order: ``verify.json``.

Usage: ``python live_producer.py BOOTSTRAP TOPIC PARTITIONS WORKDIR``
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))

from verifiable import VerifiableProducer, Verification, verify_consumed


def produce_until_stopped(
    bootstrap: str, topic: str, partitions: Iterable[int], work: Path, *, rate: float
) -> VerifiableProducer:
    """An idempotent acks=all producer writing to ``partitions`` at ``rate``, its acknowledged
    count in ``progress.json`` every half second, until the test creates ``stop``; the
    producer, to verify what it was told was written (``acked_client.py`` runs this too)."""
    producer = VerifiableProducer(bootstrap, topic, partitions, rate=rate).start()
    while not (work / "stop").exists():
        (work / "progress.tmp").write_text(json.dumps({"acked": producer.acked_count()}))
        (work / "progress.tmp").replace(work / "progress.json")
        time.sleep(0.5)
    return producer


def report(verification: Verification) -> dict[str, Any]:
    """The part of ``verify.json`` both scenarios write: the summary, how many records were
    acknowledged, and the first 20 missing, misplaced and duplicated."""
    return {
        "summary": str(verification),
        "acked": verification.acked,
        "missing": verification.missing[:20],
        "misplaced": verification.misplaced[:20],
        "duplicated": verification.duplicated[:20],
    }


def main(bootstrap: str, topic: str, partitions: str, workdir: str) -> None:
    work = Path(workdir)
    producer = produce_until_stopped(bootstrap, topic, range(int(partitions)), work, rate=30.0)
    verification = verify_consumed(bootstrap, producer, timeout_s=300)
    (work / "verify.json").write_text(
        json.dumps({**report(verification), "out_of_order": verification.out_of_order[:20]})
    )


if __name__ == "__main__":
    main(*sys.argv[1:5])
