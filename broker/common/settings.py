"""The base of settings models whose keys are Kafka's configuration keys.

A field is named after its key with dots turned into underscores (``log_retention_ms`` is
``log.retention.ms``), so the key is derived rather than written out again beside each field;
a field whose key differs (a Spindle-specific key, a Kafka key that does not follow its name)
says so with an explicit ``alias``. Unknown keys are refused rather than ignored: a misspelt
setting silently left at its default is worse than a start-up error.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


def kafka_key(field_name: str) -> str:
    """``log_retention_ms`` → ``log.retention.ms``."""
    return field_name.replace("_", ".")


class KafkaSettings(BaseModel):
    """Frozen settings validated once, under Kafka's keys (see module docstring)."""

    model_config = ConfigDict(
        populate_by_name=True, extra="forbid", frozen=True, alias_generator=kafka_key
    )
