"""Fetch response bodies written by hand (protocol/fetch_response.py): byte for byte what the
schema's encoder writes, for every version served, with record sets as pieces of their own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from kafka.protocol.consumer import FetchResponse
from spindle.broker.protocol.apis import SUPPORTED_APIS, ApiKey, build_message
from spindle.broker.protocol.fetch_response import ZERO_COPY_MIN_BYTES, encode_fetch_response

VERSIONS = range(
    SUPPORTED_APIS[ApiKey.FETCH].min_version, SUPPORTED_APIS[ApiKey.FETCH].max_version + 1
)
BIG = bytes(range(256)) * (ZERO_COPY_MIN_BYTES // 256 + 3)


@dataclass(frozen=True)
class _Region:
    """Stands in for a file region: only its length is encoded, the connection sends it."""

    data: bytes
    is_spliced_blob: bool = True

    def __len__(self) -> int:
        return len(self.data)


def _partition(index: int, records: Any, **more: Any) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": 0,
        "high_watermark": 1_000_000_007 + index,
        "last_stable_offset": 1_000_000_007 + index,
        "log_start_offset": 42,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": records,
        **more,
    }


BODIES: dict[str, dict[str, Any]] = {
    "empty": {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": []},
    "four partitions, large record sets from files": {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {"topic": "t", "partitions": [_partition(i, _Region(BIG[i:])) for i in range(4)]}
        ],
    },
    "records of every kind: none, empty, small, large bytes, a view": {
        "throttle_time_ms": 7,
        "error_code": 0,
        "session_id": 9,
        "responses": [
            {
                "topic": "a",
                "partitions": [
                    _partition(0, None),
                    _partition(1, b""),
                    _partition(2, b"small records"),
                    _partition(3, BIG),
                    _partition(4, memoryview(BIG)[5:]),
                ],
            },
            {"topic": "ü-topic", "partitions": [_partition(0, b"x" * 300)]},
        ],
    },
    "errors, aborted transactions, tags": {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "t" * 200,
                "partitions": [
                    _partition(0, b"", error_code=6, high_watermark=-1),
                    _partition(
                        1,
                        b"abc",
                        aborted_transactions=[
                            {"producer_id": 3, "first_offset": 10},
                            {"producer_id": 2**40, "first_offset": 2**33},
                        ],
                    ),
                    _partition(2, None, aborted_transactions=[]),
                    _partition(3, b"", diverging_epoch={"epoch": 4, "end_offset": 123}),
                    _partition(
                        4,
                        b"",
                        current_leader={"leader_id": 2, "leader_epoch": 8},
                        snapshot_id={"end_offset": 77, "epoch": 3},
                    ),
                ],
            }
        ],
    },
    "fields left out take Kafka's defaults": {
        "responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": b"r"}]}],
    },
}


def _with_bytes(value: Any) -> Any:
    """The body as the schema's encoder can take it: regions become their bytes."""
    if isinstance(value, dict):
        return {k: _with_bytes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_bytes(v) for v in value]
    if isinstance(value, _Region):
        return value.data
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _schema_bytes(body: dict[str, Any], version: int) -> bytes:
    return bytes(build_message(FetchResponse, version, _with_bytes(body)).encode(version=version))


def _joined(pieces: list[Any]) -> bytes:
    return b"".join(p.data if isinstance(p, _Region) else bytes(p) for p in pieces)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", BODIES)
def test_the_body_is_byte_for_byte_what_the_schema_encoder_writes(name: str, version: int) -> None:
    size, pieces = encode_fetch_response(BODIES[name], version)
    assert _joined(pieces) == _schema_bytes(BODIES[name], version)
    assert size == sum(len(p) for p in pieces)


@pytest.mark.parametrize("version", [4, 11, 12])
def test_large_record_sets_and_regions_are_pieces_of_their_own_and_small_ones_are_copied(
    version: int,
) -> None:
    region = _Region(b"r" * 10)  # a region is never copied, however small
    view = memoryview(BIG)
    small = b"s" * (ZERO_COPY_MIN_BYTES - 1)
    body = {
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    _partition(0, region),
                    _partition(1, view),
                    _partition(2, BIG),
                    _partition(3, small),
                ],
            }
        ]
    }
    _, pieces = encode_fetch_response(body, version)
    assert any(p is region for p in pieces)
    assert any(p is view for p in pieces)
    assert any(p is BIG for p in pieces)
    assert not any(p is small for p in pieces)
    assert all(isinstance(p, bytes) for p in pieces if p not in (region, view) and p is not BIG)


def test_the_body_read_back_by_the_schema_decoder_holds_what_the_handler_set() -> None:
    body = BODIES["errors, aborted transactions, tags"]
    _, pieces = encode_fetch_response(body, 12)
    back = FetchResponse.decode(_joined(pieces), version=12)
    parts = back.responses[0].partitions
    assert parts[0].error_code == 6
    assert [(a.producer_id, a.first_offset) for a in parts[1].aborted_transactions] == [
        (3, 10),
        (2**40, 2**33),
    ]
    assert (parts[3].diverging_epoch.epoch, parts[3].diverging_epoch.end_offset) == (4, 123)
    assert parts[4].current_leader.leader_id == 2
    assert parts[4].snapshot_id.end_offset == 77
