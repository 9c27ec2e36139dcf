"""Numbers the Kafka wire protocol gives a meaning to, other than API keys and error codes.

API keys are in :mod:`.apis` (beside the table of served versions) and error codes in
``spindle.broker.common.errors`` (every layer raises them); the rest live here, each with the
Kafka source that defines it, so request handlers never carry bare numbers.
"""

from __future__ import annotations

from enum import IntEnum


class OffsetSpec(IntEnum):
    """ListOffsets' special timestamps (``ListOffsetsRequest.EARLIEST_TIMESTAMP`` etc.)."""

    EARLIEST_TIMESTAMP = -2
    LATEST_TIMESTAMP = -1
    MAX_TIMESTAMP = -3


class ConfigResourceType(IntEnum):
    """DescribeConfigs/IncrementalAlterConfigs resource types (``ConfigResource.Type``)."""

    TOPIC = 2
    BROKER = 4


class ConfigSource(IntEnum):
    """Where a config value comes from (``DescribeConfigsResponse.ConfigSource``)."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class EndpointType(IntEnum):
    """DescribeCluster v1's ``endpoint_type`` (KIP-919): which endpoints are listed."""

    BROKERS = 1
    CONTROLLERS = 2


class AlterConfigOp(IntEnum):
    """IncrementalAlterConfigs' ``config_operation`` (``AlterConfigOp.OpType``)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3
