"""Leader epochs on the wire, against a real broker process: ApiVersions advertises
OffsetsForLeaderEpoch (v2-4), the leader stamps its epoch on every batch it stores, answers
OffsetsForLeaderEpoch as Kafka does in every version, and fences a stale or future
``currentLeaderEpoch`` on OffsetsForLeaderEpoch, Fetch and ListOffsets."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafka.protocol.consumer.offsets import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import ProduceResponse
from spindle.broker.common.errors import ErrorCode
from spindle.broker.records.batch import build_batch, validate

from .conftest import Broker
from .wire import Wire, create_topic, fetch_request, list_offsets, produce_batch_request

_Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
_Part = _Topic.OffsetForLeaderPartition


@pytest.fixture(scope="module")
def topic(module_broker: Broker) -> str:
    with Wire(module_broker.port) as wire:
        create_topic(wire, "epochs")
        for values in ([b"a"], [b"b", b"c"], [b"d"]):
            # A producer sends partitionLeaderEpoch -1; the leader replaces it.
            batch = build_batch(values, partition_leader_epoch=-1)
            part = wire.call(produce_batch_request("epochs", 0, batch), ProduceResponse)
            assert part.responses[0].partition_responses[0].error_code == 0
    return "epochs"


def _leader_epoch(wire: Wire, topic: str) -> int:
    (answer,) = list_offsets(wire, topic, -1)
    return int(answer.leader_epoch)


def _ask(
    wire: Wire, version: int, topic: str, epoch: int, current: int = -1, partition: int = 0
) -> Any:
    req = OffsetForLeaderEpochRequest[version](
        replica_id=-1,
        topics=[
            _Topic(
                topic=topic,
                partitions=[
                    _Part(partition=partition, current_leader_epoch=current, leader_epoch=epoch)
                ],
            )
        ],
    )
    resp = wire.call(req, OffsetForLeaderEpochResponse)
    (t,) = resp.topics
    (p,) = t.partitions
    return p


def test_api_versions_advertises_offsets_for_leader_epoch_2_to_4(module_broker: Broker) -> None:
    with Wire(module_broker.port) as wire:
        resp = wire.call(
            ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
            ApiVersionsResponse,
        )
    (key,) = [k for k in resp.api_keys if k.api_key == 23]
    assert (key.min_version, key.max_version) == (2, 4)


def test_every_stored_batch_carries_the_leaders_epoch(module_broker: Broker, topic: str) -> None:
    with Wire(module_broker.port) as wire:
        epoch = _leader_epoch(wire, topic)
        part = wire.call(fetch_request(topic, 0), FetchResponse).responses[0].partitions[0]
    stored = validate(bytes(part.records))  # CRCs still check after the stamp
    assert [(h.base_offset, h.partition_leader_epoch) for h in stored] == [
        (0, epoch),
        (1, epoch),
        (3, epoch),
    ]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offsets_for_leader_epoch_answers_as_kafka_does(
    module_broker: Broker, topic: str, version: int
) -> None:
    with Wire(module_broker.port) as wire:
        epoch = _leader_epoch(wire, topic)
        latest = _ask(wire, version, topic, epoch, current=epoch)
        assert (latest.error_code, latest.leader_epoch, latest.end_offset) == (0, epoch, 4)
        undefined = _ask(wire, version, topic, -1)
        assert (undefined.error_code, undefined.leader_epoch, undefined.end_offset) == (0, -1, -1)
        future = _ask(wire, version, topic, epoch + 1)  # never led: unknown
        assert (future.error_code, future.leader_epoch, future.end_offset) == (0, -1, -1)
        ahead = _ask(wire, version, topic, epoch, current=epoch + 1)
        assert ahead.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert (ahead.leader_epoch, ahead.end_offset) == (-1, -1)
        if epoch > 0:
            stale = _ask(wire, version, topic, epoch, current=epoch - 1)
            assert stale.error_code == ErrorCode.FENCED_LEADER_EPOCH
        missing = _ask(wire, version, "no-such-topic", 0)
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_and_list_offsets_fence_a_leader_epoch_this_broker_does_not_have(
    module_broker: Broker, topic: str
) -> None:
    with Wire(module_broker.port) as wire:
        epoch = _leader_epoch(wire, topic)
        req = fetch_request(topic, 0)
        req.topics[0].partitions[0].current_leader_epoch = epoch + 1
        part = wire.call(req, FetchResponse).responses[0].partitions[0]
        assert part.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        req.topics[0].partitions[0].current_leader_epoch = epoch
        assert wire.call(req, FetchResponse).responses[0].partitions[0].error_code == 0
        offsets = ListOffsetsRequest[7](
            replica_id=-1,
            isolation_level=0,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=epoch + 1, timestamp=-1
                        )
                    ],
                )
            ],
        )
        answer = wire.call(offsets, ListOffsetsResponse).topics[0].partitions[0]
        assert answer.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def _fetch_after(topic: str, epoch: int, offset: int, last_epoch: int) -> Any:
    """A Fetch v12 from ``offset`` whose previous batch had epoch ``last_epoch``."""
    part = FetchRequest.FetchTopic.FetchPartition(
        partition=0,
        current_leader_epoch=epoch,
        fetch_offset=offset,
        last_fetched_epoch=last_epoch,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    return FetchRequest[12](
        replica_id=-1,
        max_wait_ms=5000,  # a divergence answers at once, it does not wait for data
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=[],
        rack_id="",
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[part])],
    )


def test_a_fetch_past_the_end_of_its_last_epoch_gets_the_diverging_epoch_and_no_records(
    module_broker: Broker, topic: str
) -> None:
    with Wire(module_broker.port) as wire:
        epoch = _leader_epoch(wire, topic)
        inside = wire.call(_fetch_after(topic, epoch, 2, epoch), FetchResponse)
        part = inside.responses[0].partitions[0]
        assert part.error_code == 0
        assert part.diverging_epoch is None  # offset 2 lies inside the leader's epoch
        assert len(part.records or b"") > 0
        # Offset 9 at the same epoch: the leader's epoch ends at 4, so the fetcher's log
        # has records past it that the leader never had.
        beyond = wire.call(_fetch_after(topic, epoch, 9, epoch), FetchResponse)
        part = beyond.responses[0].partitions[0]
        assert part.error_code == 0
        assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (epoch, 4)
        assert not part.records
        assert part.high_watermark == 4
