"""The operator's one door to Kafka: every admin call the operator makes goes through here.

The rest of the operator speaks Kubernetes (``spindle.operator.kube``) or is pure; only this
module imports a Kafka client (import-linter keeps it so), the way the operator talks to
brokers only through their wire protocol, never their internals.

Today that is the planner's snapshot: ``gather_snapshot`` asks the live cluster three things
and hands the answers to the pure builder in ``spindle.operator.snapshot``, which holds every
rule about what the answers mean. kafka-python's admin client blocks, so kopf handlers use
``gather_snapshot_async``, which runs it off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from kafka.admin import KafkaAdminClient
from spindle.operator.snapshot import (
    SnapshotOptions,
    brokers_from_admin,
    build_snapshot,
    partitions_from_admin,
)


def gather_snapshot(
    bootstrap_servers: str | Sequence[str],
    *,
    client_config: Mapping[str, Any] | None = None,
    **options: Unpack[SnapshotOptions],
) -> dict[str, Any]:
    """Ask the live cluster and build its snapshot (``options``: see ``SnapshotOptions``).
    The three calls are not one atomic read: a topic created or a move finished between them
    may make the build fail with a message saying to snapshot again, never produce a snapshot
    that mixes two states silently."""
    servers = [bootstrap_servers] if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
    admin = KafkaAdminClient(bootstrap_servers=servers, **dict(client_config or {}))
    try:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics()
        broker_ids = sorted(int(b["broker_id"]) for b in cluster["brokers"])
        log_dirs = admin.describe_log_dirs(brokers=broker_ids)
    finally:
        admin.close()
    return build_snapshot(
        brokers_from_admin(cluster, log_dirs), partitions_from_admin(topics), **options
    )


async def gather_snapshot_async(
    bootstrap_servers: str | Sequence[str],
    *,
    client_config: Mapping[str, Any] | None = None,
    **options: Unpack[SnapshotOptions],
) -> dict[str, Any]:
    """``gather_snapshot`` off the event loop (kafka-python's admin client blocks)."""
    return await asyncio.to_thread(
        gather_snapshot, bootstrap_servers, client_config=client_config, **options
    )
