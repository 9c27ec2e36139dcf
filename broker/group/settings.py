"""The group coordinator's settings, under Kafka's broker config keys and defaults.

The broker's settings model inherits these fields, so they are ordinary broker config keys
(``group.initial.rebalance.delay.ms=0`` in ``server.properties``) validated like the others.
"""

from __future__ import annotations

from pydantic import Field
from spindle.broker.common.settings import KafkaSettings


class GroupSettings(KafkaSettings):
    """Settings of the classic group coordinator and of ``__consumer_offsets``."""

    group_min_session_timeout_ms: int = Field(
        6000, ge=1, description="Smallest session.timeout.ms a member may ask for."
    )
    group_max_session_timeout_ms: int = Field(
        1_800_000, ge=1, description="Largest session.timeout.ms a member may ask for."
    )
    group_initial_rebalance_delay_ms: int = Field(
        3000, ge=0, description="How long an empty group's first rebalance waits for members."
    )
    group_max_size: int = Field(2_147_483_647, ge=1, description="Most members a group may have.")
    offsets_topic_num_partitions: int = Field(
        50, ge=1, description="Partitions of __consumer_offsets (fixed once it exists)."
    )
    offsets_topic_replication_factor: int = Field(
        3,
        ge=1,
        description="Replicas of __consumer_offsets; capped at the registered brokers (Spindle).",
    )
    offsets_topic_segment_bytes: int = Field(
        104_857_600, ge=14, description="segment.bytes of __consumer_offsets."
    )
    offsets_retention_ms: int = Field(
        7 * 24 * 3600 * 1000,
        ge=1,
        description="How long an empty group's committed offsets are kept.",
    )
    offsets_retention_check_interval_ms: int = Field(
        600_000, ge=1, description="How often expired offsets are removed."
    )
    offsets_commit_timeout_ms: int = Field(
        5000, ge=1, description="How long a commit waits for the in-sync replicas."
    )
    offset_metadata_max_bytes: int = Field(
        4096, ge=0, description="Largest metadata string of a committed offset."
    )
