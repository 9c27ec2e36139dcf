"""The OffsetsForLeaderEpoch response builder: per-partition answers and errors as Kafka gives
them, every item answered even when others fail, and the response encodes in every served
version (2-4). The lookup is the replica manager's boundary, faked here; the real one is
exercised against broker processes in ``tests/broker/test_broker_leader_epochs.py``."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.consumer.offsets import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.protocol.apis import build_message
from spindle.broker.server.apis.leader_epochs import build_offsets_for_leader_epoch

_Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
_Part = _Topic.OffsetForLeaderPartition


def _request_topics(version: int = 4) -> Any:
    req = OffsetForLeaderEpochRequest[version](
        replica_id=-1,
        topics=[
            _Topic(
                topic="led",
                partitions=[
                    _Part(partition=0, current_leader_epoch=7, leader_epoch=5),
                    _Part(partition=1, current_leader_epoch=6, leader_epoch=5),
                    _Part(partition=2, current_leader_epoch=-1, leader_epoch=-1),
                ],
            ),
            _Topic(topic="secret", partitions=[_Part(partition=0, leader_epoch=1)]),
        ],
    )
    return OffsetForLeaderEpochRequest.decode(bytes(req.encode()), version=version).topics


def _lookup(tp: TopicPartition, current: int, epoch: int) -> tuple[int, int]:
    if current not in (-1, 7):
        raise KafkaError("stale", ErrorCode.FENCED_LEADER_EPOCH)
    if tp.partition == 2:
        raise KafkaError("follower here", ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return (3, 120) if epoch == 5 else (-1, -1)


def test_each_partition_gets_its_answer_or_its_own_error() -> None:
    body = build_offsets_for_leader_epoch(
        _request_topics(), lookup=_lookup, allowed=lambda topic: topic != "secret"
    )
    answers = {
        (t["topic"], p["partition"]): (p["error_code"], p["leader_epoch"], p["end_offset"])
        for t in body["topics"]
        for p in t["partitions"]
    }
    assert answers == {
        ("led", 0): (0, 3, 120),  # epoch 5 was never led here: the largest below it, 3
        ("led", 1): (ErrorCode.FENCED_LEADER_EPOCH, -1, -1),
        ("led", 2): (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1),
        ("secret", 0): (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1),
    }


@pytest.mark.parametrize("version", [2, 3, 4])
def test_the_response_encodes_and_decodes_in_every_served_version(version: int) -> None:
    body = build_offsets_for_leader_epoch(
        _request_topics(version), lookup=_lookup, allowed=lambda _: True
    )
    message = build_message(OffsetForLeaderEpochResponse, version, body)
    flexible = version >= 4
    raw = message._struct.encode(message, version=version, compact=flexible, tagged=flexible)
    decoded = OffsetForLeaderEpochResponse.decode(bytes(raw), version=version)
    first = decoded.topics[0].partitions[0]
    assert (first.error_code, first.leader_epoch, first.end_offset) == (0, 3, 120)
