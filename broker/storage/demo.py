"""Spindle's main job for now: one broker's storage engine over three log directories.

``python -m spindle.broker.storage.demo [--dir PATH ...]`` opens a LogManager over the given
directories (default: three under a fresh temporary directory), creates two partitions,
appends a few record batches, prints ``describe_dirs()`` as JSON and shuts down cleanly.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from typing import Any

from spindle.broker.common.ids import TopicPartition
from spindle.broker.common.kafka_uuid import to_kafka_str
from spindle.broker.records.batch import build_batch
from spindle.broker.storage.descriptions import LogDirDescription
from spindle.broker.storage.manager import LogManager
from spindle.broker.storage.settings import StorageSettings


def describe_as_json(dirs: list[LogDirDescription]) -> list[dict[str, Any]]:
    """DescribeLogDirs data as plain JSON (names follow ``kafka-log-dirs.sh --describe``)."""
    return [
        {
            "logDir": d.path,
            "directoryId": to_kafka_str(d.directory_id) if d.directory_id else None,
            "error": d.error.name,
            "totalBytes": d.total_bytes,
            "usableBytes": d.usable_bytes,
            "partitions": [
                {
                    "partition": str(p.tp),
                    "size": p.size,
                    "offsetLag": p.offset_lag,
                    "isFuture": p.is_future,
                }
                for p in d.partitions
            ],
        }
        for d in dirs
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dir", action="append", default=[], help="a log directory (repeat)")
    parser.add_argument("--cluster-id", default="spindle-demo")
    parser.add_argument("--node-id", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="spindle-demo-") as tmp:
        dirs = args.dir or [f"{tmp}/disk{i}" for i in range(3)]
        settings = StorageSettings.model_validate({"log.dirs": dirs})
        lm = LogManager.open(settings, cluster_id=args.cluster_id, node_id=args.node_id)
        try:
            for partition in range(2):
                log = lm.get_or_create_log(TopicPartition("demo", partition))
                for i in range(3):
                    log.append(build_batch([f"record {i}-{j}".encode() for j in range(4)]))
                log.high_watermark = log.log_end_offset
            json.dump(
                {"brokerId": args.node_id, "logDirs": describe_as_json(lm.describe_dirs())},
                sys.stdout,
                indent=2,
            )
            sys.stdout.write("\n")
        finally:
            lm.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
