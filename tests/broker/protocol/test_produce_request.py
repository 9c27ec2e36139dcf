"""Produce request bodies read by hand (protocol/produce_request.py): the same fields as the
schema's decoder, record sets as views of the frame, tags skipped, bad bodies refused."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kafka.protocol.producer import ProduceRequest
from spindle.broker.protocol.apis import RequestRejected, decode_request
from spindle.broker.protocol.header import parse_request_header
from spindle.broker.protocol.produce_request import (
    ProduceRequestError,
    decode_produce_request,
)

RECORDS = b"\x00" * 61 + b"a batch's bytes"


def _request(version: int, transactional_id: str | None, topics: list[Any]) -> bytes:
    cls = ProduceRequest[version]
    msg = cls(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=1500,
        topic_data=[
            cls.TopicProduceData(
                name=name,
                partition_data=[
                    cls.TopicProduceData.PartitionProduceData(index=i, records=r) for i, r in parts
                ],
            )
            for name, parts in topics
        ],
    )
    msg.with_header(correlation_id=9, client_id="rdkafka")
    return bytes(msg.encode(header=True))


def _plain(body: Any) -> Any:
    return (
        body.transactional_id,
        body.acks,
        body.timeout_ms,
        [
            (
                t.name,
                [
                    (p.index, None if p.records is None else bytes(p.records))
                    for p in t.partition_data
                ],
            )
            for t in body.topic_data
        ],
    )


@pytest.mark.parametrize("version", [3, 7, 8, 9, 10, 11])
@pytest.mark.parametrize("transactional_id", [None, "tx-1"])
def test_a_produce_body_reads_as_the_schema_decoder_reads_it(
    version: int, transactional_id: str | None
) -> None:
    topics = [("orders", [(0, RECORDS), (3, None)]), ("ünïcode", [(1, RECORDS * 3)]), ("e", [])]
    raw = _request(version, transactional_id, topics)
    ours = decode_request(raw)
    theirs = ProduceRequest.decode(raw, version=version, header=True)
    assert _plain(ours.body) == _plain(theirs)
    assert _plain(ours.body) == (
        transactional_id,
        -1,
        1500,
        [(n, [(i, r) for i, r in parts]) for n, parts in topics],
    )


def test_record_sets_are_views_of_the_received_frame_not_copies() -> None:
    frame = bytearray(_request(9, None, [("t", [(0, RECORDS), (1, RECORDS)])]))
    body = decode_request(frame).body
    views = [p.records for p in body.topic_data[0].partition_data]
    assert all(isinstance(v, memoryview) and v.obj is frame for v in views)
    at = frame.find(RECORDS)
    frame[at] = 0x7F
    assert views[0][0] == 0x7F


def _tags(*fields: tuple[int, bytes]) -> bytes:
    return bytes([len(fields)]) + b"".join(bytes([t, len(v)]) + v for t, v in fields)


def test_unknown_tagged_fields_of_a_flexible_body_are_skipped() -> None:
    body = (
        b"\x00"  # transactional_id: null
        + struct.pack(">hi", 1, 100)
        + b"\x02"  # one topic
        + b"\x02t"
        + b"\x02"  # one partition
        + struct.pack(">i", 5)
        + bytes([len(RECORDS) + 1])
        + RECORDS
        + _tags((7, b"partition tag"))
        + _tags((3, b"x"), (9, b""))
        + _tags((0, b"request tag"))
    )
    read = decode_produce_request(memoryview(body), 9)
    assert _plain(read) == (None, 1, 100, [("t", [(5, RECORDS)])])


def test_every_truncation_of_a_produce_body_is_refused_with_where_it_broke() -> None:
    raw = _request(9, "tx", [("t", [(0, RECORDS)])])
    whole = decode_request(raw)
    assert _plain(whole.body)[3] == [("t", [(0, RECORDS)])]
    _, body_start = parse_request_header(raw, header_version=2)
    for cut in range(body_start, len(raw)):
        with pytest.raises(
            RequestRejected, match=r"PRODUCE v9 body does not parse: .*(runs past|varint)"
        ):
            decode_request(raw[:cut])


@pytest.mark.parametrize(
    ("version", "body", "message"),
    [
        (9, b"\x00" + struct.pack(">hi", 1, 1) + b"\x00", "topic_data is null"),
        (3, struct.pack(">hhi", -1, 1, 1) + struct.pack(">i", -1), "topic_data is null"),
        (3, struct.pack(">hhii", -1, 1, 1, 1) + struct.pack(">h", -2), r"name has length -2"),
        (3, struct.pack(">hhii", -1, 1, 1, 1) + b"\x00\x02\xff\xfe", "name is not UTF-8"),
        (
            3,
            struct.pack(">hhii", -1, 1, 1, 1) + b"\x00\x01t" + struct.pack(">iii", 1, 0, -5),
            r"records has length -5",
        ),
    ],
)
def test_malformed_produce_bodies_are_refused_saying_what(
    version: int, body: bytes, message: str
) -> None:
    with pytest.raises(ProduceRequestError, match=message):
        decode_produce_request(memoryview(body), version)
