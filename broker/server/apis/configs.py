"""Config APIs: DescribeConfigs and IncrementalAlterConfigs, for topics and this broker.

A broker's effective config is layered as in Kafka: static (the ``.properties`` file), then
the cluster-wide dynamic default (resource name ``""``), then this broker's dynamic configs;
each entry says which layer it came from. Altering a broker config pushes the new effective
values into storage at once (the replica manager applies them).
"""

from __future__ import annotations

from typing import Any

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.controller.controller import ConfigChange
from spindle.broker.protocol.apis import ApiKey, Request
from spindle.broker.protocol.constants import ConfigResourceType, ConfigSource

from ..authorizer import CLUSTER_NAME, Operation, RequestContext, ResourceType
from .base import ApiContext, Handlers, config_entry, errors_into


def _broker_config_entries(
    broker: ApiContext, scope: str, keys: set[str] | None
) -> list[dict[str, Any]]:
    store = broker.controller.store.broker_configs
    own_dyn = store.get(str(broker.node_id), {}) if scope != "" else {}
    merged: dict[str, tuple[str, ConfigSource]] = {}
    for layer, source in (
        (broker.static_configs, ConfigSource.STATIC_BROKER_CONFIG),
        (store.get("", {}), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (own_dyn, ConfigSource.DYNAMIC_BROKER_CONFIG),
    ):
        merged.update({k: (v, source) for k, v in layer.items()})
    return [config_entry(k, *merged[k]) for k in sorted(merged) if keys is None or k in keys]


def _topic_config_entries(
    broker: ApiContext, name: str, keys: set[str] | None
) -> list[dict[str, Any]]:
    topic = broker.topics.get(name)
    if topic is None:
        raise KafkaError(f"topic {name!r} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return [
        config_entry(k, v, ConfigSource.TOPIC_CONFIG)
        for k, v in sorted(topic.configs.items())
        if keys is None or k in keys
    ]


def _config_resource(
    broker: ApiContext, ctx: RequestContext, op: Operation, r: Any
) -> ConfigResourceType:
    """The type of a DescribeConfigs/IncrementalAlterConfigs resource once ``op`` on it is
    allowed: a topic, or this broker (``""`` = the cluster default); else KafkaError."""
    if r.resource_type == ConfigResourceType.TOPIC:
        broker.authorize(ctx, op, ResourceType.TOPIC, r.resource_name)
    elif r.resource_type == ConfigResourceType.BROKER:
        broker.authorize(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME)
        if r.resource_name not in ("", str(broker.node_id)):
            raise KafkaError(
                f"broker {r.resource_name} is not this broker ({broker.node_id})",
                ErrorCode.INVALID_REQUEST,
            )
    else:
        raise KafkaError(
            f"resource type {r.resource_type} is not served", ErrorCode.INVALID_REQUEST
        )
    return ConfigResourceType(r.resource_type)


async def describe_configs(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    results = []
    for r in req.body.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        res: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
            "configs": [],
        }
        with errors_into(res):
            kind = _config_resource(broker, ctx, Operation.DESCRIBE_CONFIGS, r)
            if kind is ConfigResourceType.TOPIC:
                res["configs"] = _topic_config_entries(broker, r.resource_name, keys)
            else:
                res["configs"] = _broker_config_entries(broker, r.resource_name, keys)
        results.append(res)
    return {"throttle_time_ms": 0, "results": results}


async def incremental_alter_configs(
    broker: ApiContext, ctx: RequestContext, req: Request
) -> dict[str, Any]:
    body = req.body
    validate_only = bool(body.validate_only)
    out = []
    for r in body.resources:
        res: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
        }
        changes = [ConfigChange(c.name, c.config_operation, c.value) for c in r.configs]
        with errors_into(res):
            kind = _config_resource(broker, ctx, Operation.ALTER_CONFIGS, r)
            if kind is ConfigResourceType.TOPIC:
                await broker.controller.alter_topic_configs(
                    r.resource_name, changes, validate_only=validate_only
                )
            else:
                await broker.controller.alter_broker_configs(
                    r.resource_name, changes, validate_only=validate_only
                )
                if not validate_only:
                    broker.replicas.apply_dynamic_broker_configs()
        out.append(res)
    return {"throttle_time_ms": 0, "responses": out}


HANDLERS: Handlers = {
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
}
