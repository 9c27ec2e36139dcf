"""Storage settings under Kafka's names, validated once at start-up.

Field names are Kafka's config keys with underscores for dots (``KafkaSettings`` derives the
keys), so a broker config file written for Kafka maps onto this model unchanged. Unknown keys are refused rather than ignored:
a misspelt ``log.retention.ms`` silently keeping data forever is worse than a start-up error.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator
from spindle.broker.common.settings import KafkaSettings


def _split_dirs(value: Any) -> Any:
    """Kafka writes ``log.dirs`` as one comma-separated string; accept that or a list."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class StorageSettings(KafkaSettings):
    """Every setting of the storage engine (Kafka's defaults unless noted)."""

    log_dirs: Annotated[list[str], BeforeValidator(_split_dirs)] = Field(
        min_length=1, description="Absolute paths of the log directories (JBOD)."
    )
    log_segment_bytes: int = Field(
        1 << 30,
        ge=14,
        le=(1 << 31) - 1,
        description="Roll a segment at this size (index positions are 32-bit, as in Kafka).",
    )
    log_roll_ms: int = Field(7 * 24 * 3600 * 1000, ge=1, description="Roll a segment at this age.")
    log_retention_bytes: int = Field(-1, description="Per-partition size limit; -1 = none.")
    log_retention_ms: int = Field(
        7 * 24 * 3600 * 1000,
        description="Delete segments whose newest record is older than this; -1 = keep forever.",
    )
    log_retention_check_interval_ms: int = Field(300_000, ge=1, description="Retention period.")
    log_index_interval_bytes: int = Field(4096, ge=0, description="Bytes between index entries.")
    log_flush_offset_checkpoint_interval_ms: int = Field(
        60_000,
        ge=1,
        description="How often recovery points (flushed offsets) are checkpointed.",
    )
    log_flush_start_offset_checkpoint_interval_ms: int = Field(
        60_000,
        ge=1,
        description="How often log start offsets are checkpointed.",
    )
    replica_high_watermark_checkpoint_interval_ms: int = Field(
        5_000,
        ge=1,
        description="How often high watermarks are checkpointed.",
    )
    file_delete_delay_ms: int = Field(
        60_000,
        ge=0,
        description="Delay before a -delete directory is removed from disk.",
    )
    num_replica_alter_log_dirs_threads: int | None = Field(
        None,
        ge=1,
        description="Replica mover threads; None = number of log directories (Kafka's default).",
    )
    replica_alter_log_dirs_io_max_bytes_per_second: int = Field(
        (1 << 63) - 1,
        ge=1,
        description="Global copy throttle for all movers together (dynamic).",
    )
    log_cleanup_policy: str = Field(
        "delete",
        pattern=r"^(delete|compact|compact,delete|delete,compact)$",
        description="Default cleanup.policy of topics.",
    )
    log_cleaner_enable: bool = Field(True, description="Run the log cleaner (compaction).")
    log_cleaner_backoff_ms: int = Field(
        15_000, ge=1, description="Pause between cleaner passes over the compacted logs."
    )
    log_cleaner_delete_retention_ms: int = Field(
        86_400_000, ge=0, description="Default delete.retention.ms: how long tombstones stay."
    )
    log_cleaner_min_cleanable_ratio: float = Field(
        0.5, ge=0, le=1, description="Default min.cleanable.dirty.ratio."
    )
    log_cleaner_min_compaction_lag_ms: int = Field(
        0, ge=0, description="Default min.compaction.lag.ms."
    )
    message_max_bytes: int = Field(
        1_048_588,
        ge=0,
        description="Largest record batch accepted by append (MESSAGE_TOO_LARGE above).",
    )

    @field_validator("log_dirs")
    @classmethod
    def _absolute_unique(cls, dirs: list[str]) -> list[str]:
        seen: set[str] = set()
        for d in dirs:
            if not d.startswith("/"):
                raise ValueError(f"log.dirs entry {d!r} is not an absolute path")
            if d.rstrip("/") in seen:
                raise ValueError(f"log.dirs lists {d!r} twice")
            seen.add(d.rstrip("/"))
        return [d.rstrip("/") or "/" for d in dirs]

    @property
    def mover_threads(self) -> int:
        return self.num_replica_alter_log_dirs_threads or len(self.log_dirs)
