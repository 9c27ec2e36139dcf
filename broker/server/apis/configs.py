"""Config APIs: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs, for topics and this
broker.

A broker's effective config is layered as in Kafka: static (the ``.properties`` file), then
the cluster-wide dynamic default (resource name ``""``), then this broker's dynamic configs;
each entry says which layer it came from. Below all layers every known key has its default
(``DEFAULT_CONFIG``, ``is_default``), so ``kafka-configs --describe --all`` lists them; a topic's
defaults come from the broker's ``log.*`` settings as in Kafka. AlterConfigs (the legacy,
non-incremental API that 3.9's ``kafka-configs`` uses for brokers) replaces a resource's whole
set of dynamic configs: keys it does not name are deleted. Altering a broker config pushes the new effective
values into storage at once (the replica manager applies them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.controller.controller import ConfigChange
from spindle.broker.protocol.apis import ApiKey, Request
from spindle.broker.protocol.constants import AlterConfigOp, ConfigResourceType, ConfigSource

from ..security.authorizer import CLUSTER_NAME, Operation, RequestContext, ResourceType
from .base import ApiContext, Handlers, config_entry, errors_into

MAX_LONG = str((1 << 63) - 1)
TOPIC_DEFAULTS: dict[str, str] = {
    # topic config -> the broker setting holding its default, or the default itself ("=...")
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "=producer",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "file.delete.delay.ms",
    "flush.messages": "=" + MAX_LONG,
    "flush.ms": "=" + MAX_LONG,
    "follower.replication.throttled.replicas": "=",
    "index.interval.bytes": "log.index.interval.bytes",
    "leader.replication.throttled.replicas": "=",
    "max.compaction.lag.ms": "=" + MAX_LONG,
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.difference.max.ms": "=" + MAX_LONG,
    "message.timestamp.type": "=CreateTime",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "=1",
    "preallocate": "=false",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "=10485760",
    "segment.jitter.ms": "=0",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "=false",
}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)


def _settings_values(*models: BaseModel) -> dict[str, str]:
    """Every setting of the broker by its Kafka key, as the broker runs with it."""
    out: dict[str, str] = {}
    for model in models:
        for name, info in type(model).model_fields.items():
            value = getattr(model, name)
            if not isinstance(value, dict):  # ssl_configs: its keys are listed as given
                out[info.alias or name] = _text(value)
    return out


def _default_entry(name: str, value: str, static: bool) -> dict[str, Any]:
    source = ConfigSource.STATIC_BROKER_CONFIG if static else ConfigSource.DEFAULT_CONFIG
    entry = config_entry(name, value, source)
    entry["is_default"] = not static
    return entry


def _broker_config_entries(
    broker: ApiContext, scope: str, keys: set[str] | None
) -> list[dict[str, Any]]:
    store = broker.controller.store.broker_configs
    own_dyn = store.get(str(broker.node_id), {}) if scope != "" else {}
    merged: dict[str, tuple[str, ConfigSource]] = {
        k: (v, ConfigSource.DEFAULT_CONFIG)
        for k, v in _settings_values(broker.settings, broker.logs.settings).items()
    }
    for layer, source in (
        (broker.static_configs, ConfigSource.STATIC_BROKER_CONFIG),
        (store.get("", {}), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (own_dyn, ConfigSource.DYNAMIC_BROKER_CONFIG),
    ):
        merged.update({k: (v, source) for k, v in layer.items()})
    return [
        _default_entry(k, v, False)
        if src is ConfigSource.DEFAULT_CONFIG
        else config_entry(k, v, src)
        for k in sorted(merged)
        if keys is None or k in keys
        for v, src in [merged[k]]
    ]


def _topic_defaults(broker: ApiContext) -> dict[str, dict[str, Any]]:
    values = _settings_values(broker.logs.settings)
    out = {}
    for name, source in TOPIC_DEFAULTS.items():
        if source.startswith("="):
            out[name] = _default_entry(name, source[1:], False)
        else:
            out[name] = _default_entry(name, values[source], source in broker.static_configs)
    return out


def _topic_config_entries(
    broker: ApiContext, name: str, keys: set[str] | None
) -> list[dict[str, Any]]:
    topic = broker.topics.get(name)
    if topic is None:
        raise KafkaError(f"topic {name!r} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    entries = _topic_defaults(broker)
    entries.update(
        {k: config_entry(k, v, ConfigSource.TOPIC_CONFIG) for k, v in topic.configs.items()}
    )
    return [entries[k] for k in sorted(entries) if keys is None or k in keys]


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


async def _alter(
    broker: ApiContext,
    kind: ConfigResourceType,
    name: str,
    changes: list[ConfigChange],
    validate_only: bool,
) -> None:
    """Apply ``changes`` to a topic's or a broker scope's configs; a broker change takes
    effect in storage at once."""
    if kind is ConfigResourceType.TOPIC:
        await broker.controller.alter_topic_configs(name, changes, validate_only=validate_only)
        return
    await broker.controller.alter_broker_configs(name, changes, validate_only=validate_only)
    if not validate_only:
        broker.replicas.apply_dynamic_broker_configs()


ChangesOf = Callable[[ApiContext, ConfigResourceType, Any], list[ConfigChange]]


async def _alter_resources(
    broker: ApiContext, ctx: RequestContext, req: Request, changes_of: ChangesOf
) -> dict[str, Any]:
    """Alter each resource of an (Incremental)AlterConfigs request by ``changes_of`` it,
    answering per resource."""
    validate_only = bool(req.body.validate_only)
    out = []
    for r in req.body.resources:
        res: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
        }
        with errors_into(res):
            kind = _config_resource(broker, ctx, Operation.ALTER_CONFIGS, r)
            changes = changes_of(broker, kind, r)
            await _alter(broker, kind, r.resource_name, changes, validate_only)
        out.append(res)
    return {"throttle_time_ms": 0, "responses": out}


def _incremental_changes(
    broker: ApiContext, kind: ConfigResourceType, r: Any
) -> list[ConfigChange]:
    return [ConfigChange(c.name, c.config_operation, c.value) for c in r.configs]


def _replace_all_changes(
    broker: ApiContext, kind: ConfigResourceType, r: Any
) -> list[ConfigChange]:
    """AlterConfigs replaces a resource's whole dynamic config: set what is given, delete
    the rest."""
    wanted = {c.name: c.value for c in r.configs}
    if kind is ConfigResourceType.TOPIC:
        topic = broker.topics.get(r.resource_name)
        current = dict(topic.configs) if topic is not None else {}
    else:
        current = dict(broker.controller.store.broker_configs.get(r.resource_name, {}))
    changes = [ConfigChange(k, AlterConfigOp.SET, v) for k, v in wanted.items()]
    return changes + [
        ConfigChange(k, AlterConfigOp.DELETE, None) for k in current if k not in wanted
    ]


async def incremental_alter_configs(
    broker: ApiContext, ctx: RequestContext, req: Request
) -> dict[str, Any]:
    return await _alter_resources(broker, ctx, req, _incremental_changes)


async def alter_configs(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    return await _alter_resources(broker, ctx, req, _replace_all_changes)


HANDLERS: Handlers = {
    ApiKey.ALTER_CONFIGS: alter_configs,
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
}
