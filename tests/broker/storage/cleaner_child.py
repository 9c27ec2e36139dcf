"""A storage engine in a child process that fills a compacted partition and cleans it, pausing
forever at one cleaner step (``{"paused": step}`` on stdout) so the parent can SIGKILL it there.

Run as ``python cleaner_child.py CONFIG_JSON`` with ``dirs``, ``settings`` and ``pause_at``.
"""

from __future__ import annotations

import json
import sys
import time

from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch
from spindle.broker.storage import LogManager, StorageSettings
from spindle.broker.storage.cleaner import CompactionConfig, LogCleaner

TS = 1_700_000_000_000


def fill(lm: LogManager, tp: TopicPartition) -> dict[str, str | None]:
    """Ten keys updated 30 times each, key 3 finally deleted; returns the latest values."""
    log = lm.get_or_create_log(tp)
    latest: dict[str, str | None] = {}
    for round_ in range(30):
        keys = [f"k{i}".encode() for i in range(10)]
        values: list[bytes | None] = [f"v{round_}-{i}".encode() for i in range(10)]
        if round_ == 29:
            values[3] = None
        log.append(build_batch(values, keys=keys, timestamp_ms=TS + round_))
        for k, v in zip(keys, values, strict=True):
            latest[k.decode()] = None if v is None else v.decode()
    log.roll()
    log.high_watermark = log.log_end_offset
    return latest


def main() -> None:
    config = json.loads(sys.argv[1])

    def hook(step: str, tp: TopicPartition) -> None:
        if step == config.get("pause_at"):
            sys.stdout.write(json.dumps({"paused": step}) + "\n")
            sys.stdout.flush()
            while True:
                time.sleep(60)

    settings = StorageSettings.model_validate({"log.dirs": config["dirs"], **config["settings"]})
    lm = LogManager.open(settings, cluster_id="test-cluster", node_id=1, background=False)
    tp = TopicPartition("c", 0)
    latest = fill(lm, tp)
    lm.flush_and_checkpoint()
    sys.stdout.write(json.dumps({"latest": latest}) + "\n")
    sys.stdout.flush()
    log = lm.get_log(tp)
    assert log is not None
    cleaner = LogCleaner(clock=lm.clock, hook=hook)
    result = cleaner.clean(log, CompactionConfig(delete_retention_ms=1 << 40), force=True)
    sys.stdout.write(json.dumps({"done": result is not None}) + "\n")
    sys.stdout.flush()
    time.sleep(600)


if __name__ == "__main__":
    main()
