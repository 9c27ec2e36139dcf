"""The records of ``__consumer_offsets``: Kafka's key/value formats, schema-driven.

Each record's key and value start with an int16 version; the rest follows the schema of that
version (Kafka's ``OffsetCommitKey``/``OffsetCommitValue``/``GroupMetadataKey``/
``GroupMetadataValue`` in ``group-coordinator/src/main/resources/common/message``). The key
version says what the record is:

    key v0/v1  OffsetCommitKey    group string, topic string, partition int32
    key v2     GroupMetadataKey   group string

    OffsetCommitValue  v3 (what Kafka writes): offset int64, leaderEpoch int32,
                       metadata string, commitTimestamp int64
    GroupMetadataValue v3 (what Kafka writes): protocolType string, generation int32,
                       protocol nullable string, leader nullable string,
                       currentStateTimestamp int64, members [memberId, groupInstanceId,
                       clientId, clientHost, rebalanceTimeout, sessionTimeout,
                       subscription bytes, assignment bytes]

A null value is a tombstone (offset deleted, group deleted). Writing the same bytes Kafka writes
means Kafka's own ``OffsetsMessageFormatter``/``GroupMetadataMessageFormatter`` read this topic.

kafka-python does not ship these four schemas (they are not request/response messages), so
the JSON files sit next to this module (same fields and versions as Kafka's) and kafka-python's
schema codec (``ApiData``, whose int16 version prefix is exactly this framing) encodes them.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from spindle.broker.records.batch import build_batch

_package = sys.modules[__package__ or "spindle.broker.group"]
"""This package: the schema JSON files are its resources."""

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources.read_text (deprecated in 3.11).
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.api_data import ApiData
    from kafka.record.default_records import DefaultRecordBatch

    class OffsetCommitKey(ApiData, load_json=_package):  # type: ignore[misc,call-arg]
        """Key of a committed offset (versions 0 and 1 are the same bytes)."""

    class OffsetCommitValue(ApiData, load_json=_package):  # type: ignore[misc,call-arg]
        """A committed offset."""

    class GroupMetadataKey(ApiData, load_json=_package):  # type: ignore[misc,call-arg]
        """Key of a group's metadata (version 2)."""

    class GroupMetadataValue(ApiData, load_json=_package):  # type: ignore[misc,call-arg]
        """A group's generation, protocol, leader and members with their assignments."""


OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3


class RecordFormatError(ValueError):
    """A ``__consumer_offsets`` record that cannot be read (unknown version, truncated)."""


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    """A committed offset, or its deletion (``offset is None``)."""

    group: str
    topic: str
    partition: int
    offset: int | None
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A group's metadata, or its deletion (``generation is None``)."""

    group: str
    protocol_type: str = ""
    generation: int | None = None
    protocol: str | None = None
    leader: str | None = None
    state_timestamp: int = -1
    members: tuple[MemberRecord, ...] = ()


def encode_offset(rec: OffsetRecord) -> tuple[bytes, bytes | None]:
    key = OffsetCommitKey(
        version=OFFSET_KEY_VERSION, group=rec.group, topic=rec.topic, partition=rec.partition
    ).encode()
    if rec.offset is None:
        return bytes(key), None
    value = OffsetCommitValue(
        version=OFFSET_VALUE_VERSION,
        offset=rec.offset,
        leader_epoch=rec.leader_epoch,
        metadata=rec.metadata,
        commit_timestamp=rec.commit_timestamp,
    ).encode()
    return bytes(key), bytes(value)


def encode_group(rec: GroupRecord) -> tuple[bytes, bytes | None]:
    key = GroupMetadataKey(version=GROUP_KEY_VERSION, group=rec.group).encode()
    if rec.generation is None:
        return bytes(key), None
    members = [
        GroupMetadataValue.MemberMetadata(
            version=GROUP_VALUE_VERSION,
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms,
            subscription=m.subscription,
            assignment=m.assignment,
        )
        for m in rec.members
    ]
    value = GroupMetadataValue(
        version=GROUP_VALUE_VERSION,
        protocol_type=rec.protocol_type,
        generation=rec.generation,
        protocol=rec.protocol,
        leader=rec.leader,
        current_state_timestamp=rec.state_timestamp,
        members=members,
    ).encode()
    return bytes(key), bytes(value)


def decode(key: bytes, value: bytes | None) -> OffsetRecord | GroupRecord:
    """Read one record; RecordFormatError if it is not a known key/value format."""
    if len(key) < 2:
        raise RecordFormatError(f"key of {len(key)} bytes has no version")
    version = int.from_bytes(key[:2], "big", signed=True)
    try:
        if version in (0, 1):
            k: Any = OffsetCommitKey.decode(key)
            if value is None:
                return OffsetRecord(k.group, k.topic, k.partition, None)
            v: Any = OffsetCommitValue.decode(value)
            return OffsetRecord(
                k.group,
                k.topic,
                k.partition,
                v.offset,
                v.leader_epoch if v.version >= 3 else -1,
                v.metadata or "",
                v.commit_timestamp,
            )
        if version == GROUP_KEY_VERSION:
            k = GroupMetadataKey.decode(key)
            if value is None:
                return GroupRecord(k.group)
            v = GroupMetadataValue.decode(value)
            return GroupRecord(
                k.group,
                v.protocol_type or "",
                v.generation,
                v.protocol,
                v.leader,
                v.current_state_timestamp if v.version >= 2 else -1,
                tuple(
                    MemberRecord(
                        m.member_id,
                        m.group_instance_id if v.version >= 3 else None,
                        m.client_id,
                        m.client_host,
                        m.rebalance_timeout if v.version >= 1 else m.session_timeout,
                        m.session_timeout,
                        bytes(m.subscription or b""),
                        bytes(m.assignment or b""),
                    )
                    for m in v.members
                ),
            )
    except RecordFormatError:
        raise
    except Exception as exc:  # the codec raises struct.error, ValueError, ...
        raise RecordFormatError(f"cannot decode a key of version {version}: {exc}") from None
    raise RecordFormatError(f"unknown key version {version}")


def build_records_batch(records: list[tuple[bytes, bytes | None]], *, timestamp_ms: int) -> bytes:
    """One uncompressed v2 batch holding ``records`` (key, value) in order."""
    return build_batch(
        [v for _, v in records], keys=[k for k, _ in records], timestamp_ms=timestamp_ms
    )


def iter_records(data: bytes) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in ``data`` (whole v2 batches, any compression);
    control batches are skipped."""
    pos = 0
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
        if pos + size > len(data):
            break
        batch = DefaultRecordBatch(memoryview(data)[pos : pos + size])
        pos += size
        if batch.is_control_batch:
            continue
        for record in batch:
            key = None if record.key is None else bytes(record.key)
            value = None if record.value is None else bytes(record.value)
            yield record.offset, key, value
