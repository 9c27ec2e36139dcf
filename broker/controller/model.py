"""Cluster metadata records and the pure planners that build them. No I/O here.

Records are plain dataclasses serialised to JSON in etcd, one key per topic (its partitions,
assignments with directory ids, leader/ISR with epochs, ongoing reassignment, configs), one per
broker registration and one per broker config scope. Directory ids use Kafka's Uuid text form
(URL-safe base64 without padding, 22 characters; ``common.kafka_uuid``), as DescribeLogDirs and
the CLI tools show them.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.kafka_uuid import UNASSIGNED_DIR, to_kafka_str


@dataclass
class PartitionState:
    """One partition's assignment, leadership and ongoing reassignment (KIP-455)."""

    partition: int
    replicas: list[int]
    directories: list[str]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


@dataclass
class TopicState:
    """One topic: its id, partitions and topic-level config overrides."""

    name: str
    topic_id: str
    partitions: dict[int, PartitionState]
    configs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        data = asdict(self)
        data["partitions"] = [asdict(p) for p in self.partitions.values()]
        return json.dumps(data, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> TopicState:
        data: dict[str, Any] = json.loads(raw)
        parts = {p["partition"]: PartitionState(**p) for p in data["partitions"]}
        return cls(data["name"], data["topic_id"], parts, dict(data.get("configs", {})))


@dataclass
class BrokerRegistration:
    """A live broker: where clients reach it and which directories it has (KIP-858)."""

    node_id: int
    host: str
    port: int
    rack: str | None
    directories: list[str]
    directory_paths: dict[str, str] = field(default_factory=dict)
    """Directory id -> its ``log.dirs`` path. Spindle's addition to KIP-858's registration,
    which carries ids only: no Kafka API pairs a directory's id with its path (DescribeLogDirs
    has paths, no ids), and the operator names each LogVolume's ``directoryId`` from here."""
    listeners: dict[str, str] = field(default_factory=dict)
    """Listener name -> its advertised ``host:port``, every listener's (Kafka registers each
    advertised endpoint): Metadata tells a client the addresses of the listener it came in on.
    ``host``/``port`` are the inter-broker listener's, where followers connect."""

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """Where this broker is reached on ``listener``; None if it has no such listener. A
        registration without listeners (a broker from before them) has one, everywhere."""
        if not self.listeners:
            return self.host, self.port
        where = self.listeners.get(listener)
        if where is None:
            return None
        host, _, port = where.rpartition(":")
        return host, int(port)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> BrokerRegistration:
        """Fields this version does not know (a newer broker's) are ignored, not refused:
        brokers of two versions share the registrations during a rolling upgrade."""
        data = json.loads(raw)
        return cls(**{k: v for k, v in data.items() if k in _REGISTRATION_FIELDS})


_REGISTRATION_FIELDS = frozenset(BrokerRegistration.__dataclass_fields__)


@dataclass
class BrokerSession:
    """A broker's liveness record (``P/sessions/<id>``, under the broker's session lease).

    The key exists while the broker heartbeats (a broker whose key is gone is lost, as Kafka's
    session expiry); its value is what Kafka's BrokerHeartbeat carries: the offline directory
    ids (KIP-858, repeated until restart), ``wants_fence`` (the broker keeps itself fenced
    until it has told where each of its replicas is) and the cordoned directory ids
    (KIP-1066's ``CordonedLogDirs``, current on every change of ``cordoned.log.dirs``). ``epoch`` is the key's create revision in
    etcd, so every new session of a broker has a larger one (Kafka's broker epoch); it is not
    part of the stored value.
    """

    node_id: int
    offline_dirs: list[str] = field(default_factory=list)
    wants_fence: bool = True
    epoch: int = 0
    cordoned_dirs: list[str] = field(default_factory=list)
    """KIP-1066: ids of the directories ``cordoned.log.dirs`` names (no new replicas there)."""

    def to_json(self) -> bytes:
        data = asdict(self)
        data.pop("epoch")
        return json.dumps(data, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes, *, epoch: int) -> BrokerSession:
        data = json.loads(raw)
        return cls(
            int(data["node_id"]),
            list(data.get("offline_dirs", [])),
            bool(data.get("wants_fence", True)),
            epoch,
            list(data.get("cordoned_dirs", [])),
        )


def parse_controller(value: bytes) -> tuple[int, int]:
    """``P/controller``'s value -> (node id, epoch)."""
    data = json.loads(value)
    return int(data["node_id"]), int(data["epoch"])


def is_fenced(session: BrokerSession | None) -> bool:
    """Kafka's fencing rule: a broker without a live session, or one that asks to stay fenced
    (directory assignments not yet known), may not lead or join the ISR of new partitions."""
    return session is None or session.wants_fence


_LEGAL_TOPIC = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_TOPIC_NAME = 249


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: 1-249 chars of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``."""
    if not name or name in (".", ".."):
        raise KafkaError(f"topic name {name!r} is illegal", ErrorCode.INVALID_TOPIC_EXCEPTION)
    if len(name) > MAX_TOPIC_NAME:
        raise KafkaError(
            f"topic name is {len(name)} characters, more than {MAX_TOPIC_NAME}",
            ErrorCode.INVALID_TOPIC_EXCEPTION,
        )
    bad = sorted(set(name) - _LEGAL_TOPIC)
    if bad:
        raise KafkaError(
            f"topic name {name!r} contains illegal characters {''.join(bad)!r}",
            ErrorCode.INVALID_TOPIC_EXCEPTION,
        )


def plan_partitions(
    *,
    first: int,
    count: int,
    replication_factor: int,
    brokers: list[int],
    manual: list[list[int]] | None = None,
) -> list[PartitionState]:
    """Assign partitions ``first .. first+count-1`` round-robin over ``brokers`` (or as given).

    Raises KafkaError with Kafka's code when the request cannot be met: too few brokers for
    the replication factor, or a manual assignment naming unknown or duplicate brokers.
    """
    if count < 1:
        raise KafkaError(
            f"number of partitions must be at least 1, got {count}", ErrorCode.INVALID_PARTITIONS
        )
    known = sorted(brokers)
    out: list[PartitionState] = []
    if manual is not None:
        if len(manual) != count:
            raise KafkaError(
                f"{len(manual)} assignments given for {count} new partitions",
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            )
        for i, replicas in enumerate(manual):
            if not replicas or len(set(replicas)) != len(replicas):
                raise KafkaError(
                    f"assignment {replicas} of partition {first + i} is empty or repeats a broker",
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                )
            unknown = sorted(set(replicas) - set(known))
            if unknown:
                raise KafkaError(
                    f"assignment of partition {first + i} names unknown brokers {unknown}",
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                )
            out.append(_new_partition(first + i, list(replicas)))
        return out
    if replication_factor < 1 or replication_factor > len(known):
        raise KafkaError(
            f"replication factor {replication_factor} is not between 1 and the "
            f"{len(known)} available broker(s)",
            ErrorCode.INVALID_REPLICATION_FACTOR,
        )
    for i in range(count):
        p = first + i
        replicas = [known[(p + r) % len(known)] for r in range(replication_factor)]
        out.append(_new_partition(p, replicas))
    return out


def _new_partition(partition: int, replicas: list[int]) -> PartitionState:
    return PartitionState(
        partition=partition,
        replicas=replicas,
        directories=[UNASSIGNED_DIR] * len(replicas),
        leader=replicas[0],
        isr=list(replicas),
    )


def new_topic_id() -> str:
    """A random topic id that is not one of Kafka's reserved ids (ZERO, METADATA)."""
    while True:
        value = uuid.uuid4()
        if value.int >> 64 != 0:
            return to_kafka_str(value)
