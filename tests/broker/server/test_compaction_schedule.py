"""Which replicas the broker hands to the log cleaner, with which settings, and which are exempt
from time/size retention (``cleanup.policy``: compact-only logs are never trimmed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch
from spindle.broker.server.compaction import CompactionScheduler
from spindle.broker.storage import LogManager

from ..storage.conftest import FakeClock, make_settings

CONFIGS = {
    "plain": {},
    "compacted": {
        "cleanup.policy": "compact",
        "delete.retention.ms": "5",
        "min.compaction.lag.ms": "7",
    },
    "both": {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.2"},
}


def test_policies_choose_logs_settings_and_retention_exemption(tmp_path: Path) -> None:
    clock = FakeClock()
    settings = make_settings(
        [str(tmp_path / "d0")], **{"log.retention.ms": 1000, "log.segment.bytes": 1024}
    )
    lm = LogManager.open(settings, cluster_id="c", node_id=1, clock=clock, background=False)
    try:
        check(lm, clock)
    finally:
        lm.close()


def check(lm: LogManager, clock: FakeClock) -> None:
    logs = {name: lm.get_or_create_log(TopicPartition(name, 0)) for name in CONFIGS}
    scheduler = CompactionScheduler(
        lm, lambda name: CONFIGS.get(name), settings=lm.settings, clock=clock
    )
    plan = {lg.tp.topic: config for lg, config in scheduler.plan()}
    assert sorted(plan) == ["both", "compacted"]
    assert plan["compacted"].delete_retention_ms == 5
    assert plan["compacted"].min_compaction_lag_ms == 7
    assert (
        plan["compacted"].min_cleanable_dirty_ratio == lm.settings.log_cleaner_min_cleanable_ratio
    )
    assert plan["both"].min_cleanable_dirty_ratio == 0.2
    assert [n for n, lg in logs.items() if lg.compact_only] == ["compacted"]
    # Old data: retention trims the delete-policy logs, never the compact-only one.
    for lg in logs.values():
        for _ in range(20):
            lg.append(build_batch([b"x" * 100], keys=[b"k"], timestamp_ms=clock.wall_ms()))
        lg.high_watermark = lg.log_end_offset
    clock.advance(5)
    trimmed: dict[str, Any] = {n: lg.apply_retention() for n, lg in logs.items()}
    assert trimmed["compacted"] == 0
    assert trimmed["plain"] > 0
    assert trimmed["both"] > 0
    removed = scheduler.run_once(list(scheduler.plan()))
    assert removed > 0
