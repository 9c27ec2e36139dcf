"""Controller operations: validate a metadata change, apply it to the store, report Kafka codes.

``Controller`` is what the request handlers call. ``SingleBrokerController`` serves a
one-broker cluster, where this broker is the only replica, leader and ISR of every partition,
so reassignments between brokers cannot happen and a log-dir-only plan completes at once. The
multi-broker controller will implement the same protocol (lease election, LeaderAndIsr fan-out)
over the same :class:`MetadataStore`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.common.throttled_replicas import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    parse_throttled_replicas,
)

from .model import (
    BrokerRegistration,
    PartitionState,
    TopicState,
    new_topic_id,
    plan_partitions,
    validate_topic_name,
)
from .partition_change import change_partition
from .store import ControllerFenced, MetadataConflict, MetadataStore

TOPIC_CONFIGS = frozenset(
    {
        "cleanup.policy",
        "compression.type",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "index.interval.bytes",
        "leader.replication.throttled.replicas",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.timestamp.type",
        "message.timestamp.difference.max.ms",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "preallocate",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
    }
)
"""Topic-level configs Spindle accepts (Kafka's names); others are INVALID_CONFIG."""

DYNAMIC_BROKER_CONFIGS = frozenset(
    {
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "cordoned.log.dirs",
    }
)
"""Broker configs that can change at run time (the throttles the JBOD tools set, and KIP-1066's
``cordoned.log.dirs``: directories that take no new replicas); also a listener's TLS stores,
``listener.name.<name>.ssl.keystore.*`` / ``.ssl.key.password`` / ``.ssl.truststore.*``
(:data:`DYNAMIC_LISTENER_SSL`), per broker only, as Kafka has them."""
DYNAMIC_LISTENER_SSL = re.compile(r"^listener\.name\.[a-z0-9_]+\.ssl\.(keystore|key|truststore)\.")
"""Kafka's per-listener dynamic TLS configs (``DynamicListenerConfig``'s reconfigurable ones)."""

MAX_LONG = (1 << 63) - 1
ASSIGN_ATTEMPTS = 20
"""Tries of one directory report against concurrent writers of the same topic key."""


@dataclass(frozen=True)
class ConfigChange:
    """One IncrementalAlterConfigs operation: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT."""

    name: str
    op: int
    value: str | None


def apply_config_changes(
    current: Mapping[str, str], changes: Sequence[ConfigChange], *, allowed: frozenset[str]
) -> dict[str, str]:
    """Pure: the config map after ``changes``; INVALID_CONFIG names the first bad change."""
    out = dict(current)
    for c in changes:
        if c.name not in allowed:
            raise KafkaError(f"config {c.name!r} cannot be altered here", ErrorCode.INVALID_CONFIG)
        if c.op == 0:
            if c.value is None:
                raise KafkaError(f"SET of {c.name!r} without a value", ErrorCode.INVALID_CONFIG)
            if c.name.endswith((".rate", ".per.second")) and not _is_long(c.value):
                raise KafkaError(
                    f"config {c.name!r} must be a long, got {c.value!r}", ErrorCode.INVALID_CONFIG
                )
            out[c.name] = c.value
        elif c.op == 1:
            out.pop(c.name, None)
        elif c.op in (2, 3):
            items = [v for v in out.get(c.name, "").split(",") if v]
            new = [v for v in (c.value or "").split(",") if v]
            if c.op == 2:
                items += [v for v in new if v not in items]
            else:
                items = [v for v in items if v not in new]
            out[c.name] = ",".join(items)
        else:
            raise KafkaError(f"unknown config operation {c.op}", ErrorCode.INVALID_REQUEST)
        _check_list(c.name, out.get(c.name))
    return out


def _check_list(name: str, value: str | None) -> None:
    """The throttled-replica lists must parse (Kafka's ThrottledReplicaListValidator)."""
    if value is None or name not in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
        return
    try:
        parse_throttled_replicas(value)
    except ValueError as exc:
        raise KafkaError(f"invalid {name}: {exc}", ErrorCode.INVALID_CONFIG) from None


def _is_long(value: str) -> bool:
    try:
        return 0 <= int(value) <= MAX_LONG
    except ValueError:
        return False


class Controller(Protocol):
    """The metadata operations the request handlers need."""

    store: MetadataStore

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: list[list[int]] | None,
        configs: Mapping[str, str],
        *,
        validate_only: bool = False,
    ) -> TopicState: ...

    async def delete_topic(self, name: str) -> TopicState: ...

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None,
        *,
        validate_only: bool = False,
    ) -> None: ...

    async def alter_topic_configs(
        self, name: str, changes: Sequence[ConfigChange], *, validate_only: bool = False
    ) -> None: ...

    async def alter_broker_configs(
        self, scope: str, changes: Sequence[ConfigChange], *, validate_only: bool = False
    ) -> dict[str, str]: ...

    async def alter_reassignment(self, tp: TopicPartition, target: list[int] | None) -> None: ...

    async def assign_replica_dir(self, tp: TopicPartition, node_id: int, dir_id: str) -> None: ...

    async def assign_replica_dirs(
        self, node_id: int, assignments: Mapping[TopicPartition, str]
    ) -> None: ...

    async def allocate_producer_ids(self, block_size: int) -> int: ...

    async def elect_leader(self, tp: TopicPartition, *, unclean: bool) -> None: ...


class SingleBrokerController:
    """The controller of a one-broker cluster (this broker); see module docstring."""

    def __init__(self, store: MetadataStore, *, node_id: int) -> None:
        self.store = store
        self.node_id = node_id

    async def register(self, registration: BrokerRegistration) -> None:
        await self.store.register_broker(registration)

    def _brokers(self) -> list[int]:
        return sorted(self.store.brokers) or [self.node_id]

    def _plan(
        self, first: int, count: int, replication_factor: int, manual: list[list[int]] | None
    ) -> list[PartitionState]:
        """Replicas, leader and ISR of new partitions ``first .. first+count-1``."""
        return plan_partitions(
            first=first,
            count=count,
            replication_factor=replication_factor,
            brokers=self._brokers(),
            manual=manual,
        )

    def _topic(self, name: str) -> TopicState:
        topic = self.store.topics.get(name)
        if topic is None:
            raise KafkaError(f"topic {name!r} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return topic

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: list[list[int]] | None,
        configs: Mapping[str, str],
        *,
        validate_only: bool = False,
    ) -> TopicState:
        validate_topic_name(name)
        if name in self.store.topics:
            raise KafkaError(f"topic {name!r} already exists", ErrorCode.TOPIC_ALREADY_EXISTS)
        unknown = sorted(set(configs) - TOPIC_CONFIGS)
        if unknown:
            raise KafkaError(f"unknown topic config {unknown[0]!r}", ErrorCode.INVALID_CONFIG)
        for key, value in configs.items():
            _check_list(key, value)
        if assignments:
            num_partitions = len(assignments)
        parts = self._plan(0, num_partitions, replication_factor, assignments or None)
        topic = TopicState(name, new_topic_id(), {p.partition: p for p in parts}, dict(configs))
        if not validate_only:
            await self.store.put_topic(topic)
        return topic

    async def delete_topic(self, name: str) -> TopicState:
        topic = self._topic(name)
        await self.store.delete_topic(name)
        return topic

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None,
        *,
        validate_only: bool = False,
    ) -> None:
        topic = self._topic(name)
        have = len(topic.partitions)
        if count <= have:
            raise KafkaError(
                f"topic {name!r} has {have} partitions; the new count {count} must be larger",
                ErrorCode.INVALID_PARTITIONS,
            )
        rf = len(next(iter(topic.partitions.values())).replicas)
        parts = self._plan(have, count - have, rf, assignments)
        if validate_only:
            return
        new = replace(topic, partitions={**topic.partitions, **{p.partition: p for p in parts}})
        await self.store.put_topic(new, base=topic)

    async def alter_topic_configs(
        self, name: str, changes: Sequence[ConfigChange], *, validate_only: bool = False
    ) -> None:
        topic = self._topic(name)
        configs = apply_config_changes(topic.configs, changes, allowed=TOPIC_CONFIGS)
        if not validate_only and configs != topic.configs:
            await self.store.put_topic(replace(topic, configs=configs), base=topic)

    async def alter_broker_configs(
        self, scope: str, changes: Sequence[ConfigChange], *, validate_only: bool = False
    ) -> dict[str, str]:
        current = self.store.broker_configs.get(scope, {})
        listener_ssl = {c.name for c in changes if DYNAMIC_LISTENER_SSL.match(c.name)}
        if listener_ssl and scope == "":
            raise KafkaError(
                f"Cannot update these configs at default cluster level, broker id must be "
                f"specified: {', '.join(sorted(listener_ssl))}",
                ErrorCode.INVALID_REQUEST,
            )
        configs = apply_config_changes(
            current, changes, allowed=DYNAMIC_BROKER_CONFIGS | listener_ssl
        )
        if not validate_only and configs != current:
            await self.store.put_broker_configs(scope, configs)
        return configs

    async def alter_reassignment(self, tp: TopicPartition, target: list[int] | None) -> None:
        """KIP-455 on one broker: the only valid target is this broker, and it completes at once
        (no replica is being added); a cancel finds nothing in progress."""
        topic = self._topic(tp.topic)
        part = topic.partitions.get(tp.partition)
        if part is None:
            raise KafkaError(f"partition {tp} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if target is None:
            if not part.adding and not part.removing:
                raise KafkaError(
                    f"no reassignment of {tp} is in progress", ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
                )
            return
        if not target or len(set(target)) != len(target):
            raise KafkaError(
                f"target replicas {target} of {tp} are empty or repeat a broker",
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            )
        unknown = sorted(set(target) - set(self._brokers()))
        if unknown:
            raise KafkaError(
                f"target replicas of {tp} name unknown brokers {unknown}",
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            )
        if target != part.replicas:
            dirs = [
                part.directories[part.replicas.index(b)] if b in part.replicas else ""
                for b in target
            ]
            new_part = PartitionState(
                partition=part.partition,
                replicas=list(target),
                directories=dirs,
                leader=target[0],
                leader_epoch=part.leader_epoch + 1,
                partition_epoch=part.partition_epoch + 1,
                isr=list(target),
            )
            await self.store.put_topic(
                replace(topic, partitions={**topic.partitions, tp.partition: new_part}),
                base=topic,
            )

    async def assign_replica_dir(self, tp: TopicPartition, node_id: int, dir_id: str) -> None:
        """Record which directory holds ``node_id``'s replica of ``tp`` (AssignReplicasToDirs)."""
        await self.assign_replica_dirs(node_id, {tp: dir_id})

    async def assign_replica_dirs(
        self, node_id: int, assignments: Mapping[TopicPartition, str]
    ) -> None:
        """AssignReplicasToDirs for many replicas of ``node_id``: one write per topic.

        Brokers hosting replicas of one topic report at the same moment (right after it was
        created), and all write the topic's key: a report that lost the race is re-applied to
        the reloaded topic rather than failing the request that triggered it.
        """
        by_topic: dict[str, dict[int, str]] = {}
        for tp, dir_id in assignments.items():
            by_topic.setdefault(tp.topic, {})[tp.partition] = dir_id
        for name, dirs in sorted(by_topic.items()):
            for attempt in range(ASSIGN_ATTEMPTS):
                topic = self.store.topics.get(name)
                if topic is None:
                    break
                changed = _dir_changes(topic, node_id, dirs)
                if not changed:
                    break
                try:
                    await self.store.put_topic(
                        replace(topic, partitions={**topic.partitions, **changed}), base=topic
                    )
                    break
                except ControllerFenced:
                    raise
                except MetadataConflict:
                    if attempt == ASSIGN_ATTEMPTS - 1:
                        raise

    async def allocate_producer_ids(self, block_size: int) -> int:
        return await self.store.allocate_producer_ids(block_size)

    async def elect_leader(self, tp: TopicPartition, *, unclean: bool) -> None:
        """ElectLeaders on one broker: it is every partition's only replica and leader."""
        topic = self._topic(tp.topic)
        if tp.partition not in topic.partitions:
            raise KafkaError(f"partition {tp} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        raise KafkaError(f"{tp} already has its leader", ErrorCode.ELECTION_NOT_NEEDED)

    def _eligible(self, broker: int) -> bool:
        """May ``broker`` lead or join an ISR? (One broker: always; see ClusterController.)"""
        return True

    def _ineligible_joiners(self, part: PartitionState, isr: list[int]) -> list[int]:
        """The brokers ``isr`` adds to ``part``'s ISR that may not join it."""
        return [b for b in isr if b not in part.isr and not self._eligible(b)]

    async def alter_partition_isr(
        self, tp: TopicPartition, leader_id: int, leader_epoch: int, isr: list[int]
    ) -> None:
        """Kafka's AlterPartition: the leader of ``tp`` at ``leader_epoch`` asks for ``isr``.

        Refused with NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH when the leadership has
        moved on, INVALID_REQUEST for an ISR that is not a subset of the replicas holding the
        leader, INELIGIBLE_REPLICA-like INVALID_REPLICA_ASSIGNMENT for a fenced broker added.
        A reassignment whose adding replicas are now all in sync completes in the same write.
        """
        for attempt in range(ASSIGN_ATTEMPTS):
            topic = self._topic(tp.topic)
            part = _isr_request_checked(topic, tp, leader_id, leader_epoch, isr)
            added = self._ineligible_joiners(part, isr)
            if added:
                raise KafkaError(
                    f"brokers {added} are fenced or offline, or their replica's directory is, "
                    f"and cannot join the isr of {tp}",
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                )
            new = change_partition(part, isr=list(isr), acceptable=self._eligible)
            if new is None:
                return
            try:
                await self.store.put_topic(
                    replace(topic, partitions={**topic.partitions, tp.partition: new}),
                    base=topic,
                )
                return
            except ControllerFenced:
                raise
            except MetadataConflict:
                if attempt == ASSIGN_ATTEMPTS - 1:
                    raise


def _dir_changes(
    topic: TopicState, node_id: int, dirs: Mapping[int, str]
) -> dict[int, PartitionState]:
    """The partitions of ``topic`` whose ``node_id`` replica moves to the directory ``dirs``
    names for it (partitions it does not host, or already there, are left out)."""
    changed = {}
    for p, dir_id in dirs.items():
        part = topic.partitions.get(p)
        if part is None or node_id not in part.replicas:
            continue
        i = part.replicas.index(node_id)
        if part.directories[i] != dir_id:
            new_dirs = list(part.directories)
            new_dirs[i] = dir_id
            changed[p] = replace(part, directories=new_dirs)
    return changed


def _isr_request_checked(
    topic: TopicState, tp: TopicPartition, leader_id: int, leader_epoch: int, isr: list[int]
) -> PartitionState:
    """The partition an AlterPartition request names, once the request is from its current
    leader and epoch and the ISR holds the leader and only replicas; else KafkaError."""
    part = topic.partitions.get(tp.partition)
    if part is None:
        raise KafkaError(f"partition {tp} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if part.leader != leader_id:
        raise KafkaError(
            f"broker {leader_id} does not lead {tp} (leader {part.leader})",
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
        )
    if part.leader_epoch != leader_epoch:
        raise KafkaError(
            f"leader epoch {leader_epoch} of {tp} is stale (now {part.leader_epoch})",
            ErrorCode.FENCED_LEADER_EPOCH,
        )
    if leader_id not in isr or not set(isr) <= set(part.replicas):
        raise KafkaError(
            f"isr {isr} of {tp} must hold the leader and only replicas {part.replicas}",
            ErrorCode.INVALID_REQUEST,
        )
    return part
