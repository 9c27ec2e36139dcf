"""When and with which settings the log cleaner runs (storage's ``LogCleaner`` does the work).

Topic configs live in the cluster metadata, which storage does not read, so the broker passes
them down: every ``log.cleaner.backoff.ms`` it marks each local replica compact-only or not
(``cleanup.policy``; compact-only logs are exempt from time/size retention) and runs one
cleaner pass, on a thread, over the replicas whose policy includes ``compact``, with the topic's
``delete.retention.ms``, ``min.cleanable.dirty.ratio`` and ``min.compaction.lag.ms`` (else the
broker defaults).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from spindle.broker.common.clock import Clock
from spindle.broker.common.errors import KafkaError
from spindle.broker.storage import Log, LogManager, StorageSettings
from spindle.broker.storage.cleaner import CompactionConfig, LogCleaner

log = logging.getLogger(__name__)

TopicConfigs = Callable[[str], Mapping[str, str] | None]


def compaction_config(configs: Mapping[str, str], defaults: StorageSettings) -> CompactionConfig:
    return CompactionConfig(
        delete_retention_ms=int(
            configs.get("delete.retention.ms", defaults.log_cleaner_delete_retention_ms)
        ),
        min_cleanable_dirty_ratio=float(
            configs.get("min.cleanable.dirty.ratio", defaults.log_cleaner_min_cleanable_ratio)
        ),
        min_compaction_lag_ms=int(
            configs.get("min.compaction.lag.ms", defaults.log_cleaner_min_compaction_lag_ms)
        ),
    )


class CompactionScheduler:
    """Runs the cleaner over compacted topics' replicas (see module docstring)."""

    def __init__(
        self,
        logs: LogManager,
        topic_configs: TopicConfigs,
        *,
        settings: StorageSettings,
        clock: Clock,
    ) -> None:
        self._logs = logs
        self._topic_configs = topic_configs
        self._settings = settings
        self.cleaner = LogCleaner(clock=clock)

    def plan(self) -> list[tuple[Log, CompactionConfig]]:
        """Mark every local replica's policy; the compacted ones with their settings."""
        out = []
        for tp, lg in self._logs.logs().items():
            configs = self._topic_configs(tp.topic)
            if configs is None:
                continue
            policy = configs.get("cleanup.policy", self._settings.log_cleanup_policy)
            kinds = {p.strip() for p in policy.split(",")}
            lg.compact_only = kinds == {"compact"}
            if "compact" in kinds:
                out.append((lg, compaction_config(configs, self._settings)))
        return out

    def run_once(self, plan: list[tuple[Log, CompactionConfig]]) -> int:
        """One pass (blocking: call on a thread); returns the records removed."""
        removed = 0
        for lg, config in plan:
            try:
                result = self.cleaner.clean(lg, config)
            except KafkaError as exc:  # the failure channel has handled the directory
                log.warning("cleaning %s failed: %s", lg.tp, exc)
                continue
            removed += result.records_removed if result else 0
        return removed

    async def run_forever(self) -> None:
        interval = self._settings.log_cleaner_backoff_ms / 1000
        while True:
            try:
                plan = self.plan()
                if self._settings.log_cleaner_enable and plan:
                    await asyncio.to_thread(self.run_once, plan)
            except Exception:
                log.exception("log cleaner pass failed")
            await asyncio.sleep(interval)
