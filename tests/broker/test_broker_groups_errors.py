"""Bad group requests on the wire get Kafka's error codes and never wedge a group: unknown
members, wrong generations, out-of-range session timeouts, member ids required (KIP-394),
metadata too large to store, a malformed body (connection closed, broker fine), and compaction
of a user topic ending with the latest value per key and no tombstones after
``delete.retention.ms``."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from .conftest import Broker, Etcd, make_broker
from .wire import Wire

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer.group import (
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

pytestmark = pytest.mark.slow

UNKNOWN_MEMBER_ID = 25
ILLEGAL_GENERATION = 22
INVALID_SESSION_TIMEOUT = 26
MEMBER_ID_REQUIRED = 79
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_SERVER_ERROR = -1
REBALANCE_IN_PROGRESS = 27


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Broker]:
    b = make_broker(
        tmp_path_factory.mktemp("groups-errors"),
        etcd,
        dirs=1,
        extra={
            "group.min.session.timeout.ms": "1000",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "3",
            "log.segment.bytes": "8192",
            "log.cleaner.backoff.ms": "300",
        },
    )
    b.start()
    yield b
    b.stop()


def join(wire: Wire, group: str, member: str = "", *, version: int = 5, **kw: Any) -> Any:
    req = JoinGroupRequest[version](
        group_id=group,
        session_timeout_ms=kw.get("session", 10_000),
        rebalance_timeout_ms=5_000,
        member_id=member,
        group_instance_id=None,
        protocol_type=kw.get("protocol_type", "consumer"),
        protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=kw.get("meta", b""))
        ],
    )
    return wire.call(req, JoinGroupResponse)


def sync(wire: Wire, group: str, member: str, generation: int, assignment: bytes = b"") -> Any:
    req = SyncGroupRequest[3](
        group_id=group,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
        assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=assignment)
        ],
    )
    return wire.call(req, SyncGroupResponse)


def heartbeat(wire: Wire, group: str, member: str, generation: int) -> int:
    req = HeartbeatRequest[3](
        group_id=group, generation_id=generation, member_id=member, group_instance_id=None
    )
    return int(wire.call(req, HeartbeatResponse).error_code)


def find_coordinator(wire: Wire, group: str) -> None:
    resp = wire.call(FindCoordinatorRequest[3](key=group, key_type=0), FindCoordinatorResponse)
    assert resp.error_code == 0


def stable_member(wire: Wire, group: str) -> tuple[str, int]:
    find_coordinator(wire, group)
    for _ in range(50):
        first = join(wire, group)
        if first.error_code != 14:  # the offsets partition is still loading
            break
        time.sleep(0.1)
    assert first.error_code == MEMBER_ID_REQUIRED
    joined = join(wire, group, first.member_id)
    assert joined.error_code == 0
    assert sync(wire, group, joined.member_id, joined.generation_id).error_code == 0
    return joined.member_id, joined.generation_id


def test_unknown_members_and_wrong_generations_get_kafkas_errors(broker: Broker) -> None:
    with Wire(broker.port) as wire:
        member, generation = stable_member(wire, "errors")
        assert join(wire, "errors", "stranger").error_code == UNKNOWN_MEMBER_ID
        assert join(wire, "no-such-group", "stranger").error_code == UNKNOWN_MEMBER_ID
        assert join(wire, "errors", session=10).error_code == INVALID_SESSION_TIMEOUT
        assert (
            join(wire, "errors", protocol_type="connect").error_code == INCONSISTENT_GROUP_PROTOCOL
        )
        assert heartbeat(wire, "errors", member, generation + 5) == ILLEGAL_GENERATION
        assert heartbeat(wire, "errors", "stranger", generation) == UNKNOWN_MEMBER_ID
        assert sync(wire, "errors", "stranger", generation).error_code == UNKNOWN_MEMBER_ID
        commit = OffsetCommitRequest[7](
            group_id="errors",
            generation_id_or_member_epoch=generation + 1,
            member_id=member,
            group_instance_id=None,
            topics=[],
        )
        assert wire.call(commit, OffsetCommitResponse).topics == []
        # The group is still usable by its member.
        assert heartbeat(wire, "errors", member, generation) == 0


def test_metadata_too_large_to_store_fails_the_sync_not_the_group(broker: Broker) -> None:
    with Wire(broker.port) as wire:
        find_coordinator(wire, "huge")
        first = join(wire, "huge", version=3, meta=b"x" * 1_200_000)
        assert first.error_code == 0
        synced = sync(wire, "huge", first.member_id, first.generation_id)
        assert synced.error_code == UNKNOWN_SERVER_ERROR
        # Not wedged: the member rejoins with small metadata and the group becomes stable.
        again = join(wire, "huge", first.member_id, version=3)
        assert again.error_code == 0
        assert sync(wire, "huge", again.member_id, again.generation_id).error_code == 0
        assert heartbeat(wire, "huge", again.member_id, again.generation_id) == 0


def test_malformed_join_closes_only_that_connection(broker: Broker) -> None:
    with Wire(broker.port) as wire:
        good = JoinGroupRequest[5](
            group_id="m",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=5_000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[],
        )
        frame = Wire.encode(good, 1)
        truncated = (len(frame) - 4 - 3).to_bytes(4, "big") + frame[4:-3]
        wire.send_raw(truncated)
        assert wire.is_closed_by_peer()
    with Wire(broker.port) as wire:
        member, generation = stable_member(wire, "after-malformed")
        assert heartbeat(wire, "after-malformed", member, generation) == 0


def test_compacted_topic_keeps_latest_value_per_key_and_drops_old_tombstones(
    broker: Broker,
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics(
        [
            NewTopic(
                "compacted",
                1,
                1,
                topic_configs={
                    "cleanup.policy": "compact",
                    "delete.retention.ms": "1000",
                    "min.cleanable.dirty.ratio": "0.01",
                },
            )
        ]
    )
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, batch_size=2048)
    latest: dict[str, str | None] = {}
    for round_ in range(20):
        for k in range(10):
            value = None if (round_ == 19 and k < 3) else f"v{round_}-{k}"
            producer.send("compacted", key=f"k{k}".encode(), value=value and value.encode())
            latest[f"k{k}"] = value
        producer.flush()
    # Filler after the keys, so the keys' last records are out of the active segment.
    for i in range(40):
        producer.send("compacted", key=f"filler-{i}".encode(), value=b"f" * 100)
    producer.flush()
    producer.close()
    expected = {k: v for k, v in latest.items() if v is not None}

    def keyed() -> list[tuple[str, str | None]]:
        consumer = KafkaConsumer(
            "compacted",
            bootstrap_servers=broker.bootstrap,
            auto_offset_reset="earliest",
            consumer_timeout_ms=2000,
        )
        out = [
            (m.key.decode(), m.value.decode() if m.value is not None else None)
            for m in consumer
            if not m.key.startswith(b"filler")
        ]
        consumer.close()
        return out

    deadline = time.monotonic() + 60
    while True:
        records = keyed()
        if len(records) == len(expected) and dict(records) == expected:
            break
        if time.monotonic() > deadline:
            pytest.fail(f"not compacted: {len(records)} keyed records left: {records[:12]}")
        time.sleep(0.5)
