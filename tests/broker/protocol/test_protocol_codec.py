"""The protocol layer: framing, headers, version negotiation and the schema codec."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.metadata import ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from spindle.broker.common.errors import ErrorCode
from spindle.broker.protocol.apis import (
    SUPPORTED_APIS,
    ApiKey,
    RequestRejected,
    api_versions_body,
    decode_request,
    encode_response,
)
from spindle.broker.protocol.framing import FrameError, frame, parse_frame_size
from spindle.broker.protocol.header import (
    RequestHeader,
    encode_request_header,
    parse_request_header,
)


def _client_request(cls, version: int, corr: int = 1, **fields) -> bytes:  # type: ignore[no-untyped-def]
    msg = cls[version](**fields)
    msg.with_header(correlation_id=corr, client_id="test-client")
    return bytes(msg.encode(header=True))


def test_frame_size_refuses_negative_zero_and_oversized() -> None:
    assert parse_frame_size(struct.pack(">i", 100), max_bytes=100) == 100
    for bad in (-1, 0, 101):
        with pytest.raises(FrameError, match=r"frame size|socket.request.max.bytes"):
            parse_frame_size(struct.pack(">i", bad), max_bytes=100)
    with pytest.raises(FrameError, match="4 bytes"):
        parse_frame_size(b"\x00\x01", max_bytes=100)
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"


@pytest.mark.parametrize("header_version", [0, 1, 2])
def test_request_header_versions_round_trip(header_version: int) -> None:
    header = RequestHeader(3, 9, 77, None if header_version == 0 else "cli", header_version)
    raw = encode_request_header(header) + b"BODY"
    parsed, pos = parse_request_header(raw, header_version=header_version)
    assert parsed == header
    assert raw[pos:] == b"BODY"


def test_flexible_header_tagged_fields_are_skipped() -> None:
    base = encode_request_header(RequestHeader(3, 12, 5, "c", 2))[:-1]
    # two tagged fields: tag 0 size 3, tag 7 size 1
    raw = base + b"\x02" + b"\x00\x03abc" + b"\x07\x01z" + b"BODY"
    parsed, pos = parse_request_header(raw, header_version=2)
    assert parsed.client_id == "c"
    assert raw[pos:] == b"BODY"


def test_api_versions_advertises_exactly_the_served_table() -> None:
    req = decode_request(
        _client_request(
            __import__("kafka.protocol.metadata", fromlist=["x"]).ApiVersionsRequest,
            3,
            client_software_name="t",
            client_software_version="1",
        )
    )
    out = encode_response(req, api_versions_body(req))
    resp = ApiVersionsResponse.decode(out, version=3, header=True)
    assert resp.error_code == 0
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert advertised == {int(k): (s.min_version, s.max_version) for k, s in SUPPORTED_APIS.items()}


def test_api_versions_of_unknown_version_answers_v0_with_unsupported_version() -> None:
    # KIP-511: a client newer than the broker sends ApiVersions v9 with a body we cannot read.
    raw = encode_request_header(RequestHeader(18, 9, 42, "future-client", 2)) + b"\xff\xfe garbage"
    req = decode_request(raw)
    assert req.unsupported_version
    out = encode_response(req, api_versions_body(req))
    assert struct.unpack(">i", out[:4])[0] == 42  # response header v0: correlation id only
    resp = ApiVersionsResponse.decode(out[4:], version=0)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert {k.api_key for k in resp.api_keys} == {int(k) for k in SUPPORTED_APIS}


def test_unknown_key_and_unsupported_version_are_rejected_naming_them() -> None:
    with pytest.raises(RequestRejected, match="unknown or unsupported API key 999"):
        decode_request(encode_request_header(RequestHeader(999, 0, 1, "c", 1)))
    raw = _client_request(ProduceRequest, 2, acks=1, timeout_ms=10, topic_data=[])
    with pytest.raises(
        RequestRejected, match=r"unsupported version 2 of PRODUCE \(supported 3-11\)"
    ):
        decode_request(raw)


def test_truncated_body_is_rejected_with_the_api_named() -> None:
    raw = _client_request(
        MetadataRequest,
        12,
        topics=[MetadataRequest.MetadataRequestTopic(name="abc", topic_id=None)],
        allow_auto_topic_creation=False,
    )
    rejected = []
    for cut in range(len(raw) - 1, 10, -1):
        try:
            decode_request(raw[:cut])
        except RequestRejected as exc:
            rejected.append(str(exc))
    assert rejected
    assert all("METADATA v12" in msg for msg in rejected)


def test_flexible_responses_use_header_v1_and_others_v0() -> None:
    for version, expect_tag_byte in ((8, False), (9, True)):
        raw = _client_request(
            MetadataRequest, version, topics=None, allow_auto_topic_creation=False
        )
        req = decode_request(raw)
        out = encode_response(
            req, {"brokers": [], "topics": [], "cluster_id": "c", "controller_id": 1}
        )
        assert struct.unpack(">i", out[:4])[0] == 1
        if expect_tag_byte:
            assert out[4] == 0
        resp = MetadataResponse.decode(out, version=version, header=True)
        assert resp.cluster_id == "c"


@pytest.mark.parametrize(
    ("key", "version"),
    [(k, v) for k, s in SUPPORTED_APIS.items() for v in range(s.min_version, s.max_version + 1)],
)
def test_every_advertised_version_decodes_client_requests_and_encodes_responses(
    key: int, version: int
) -> None:
    spec = SUPPORTED_APIS[key]
    raw = _client_request(spec.request_class, version, corr=version + 100)
    req = decode_request(raw)
    assert req.header.correlation_id == version + 100
    assert req.spec.key == ApiKey(key)
    body = api_versions_body(req) if key == ApiKey.API_VERSIONS else {}
    out = encode_response(req, body)
    back = spec.response_class.decode(out, version=version, header=True)
    assert back.header.correlation_id == version + 100


@pytest.mark.parametrize("version", [4, 11, 12])
def test_spliced_fetch_response_equals_the_codec_output(version: int) -> None:
    from kafka.protocol.consumer import FetchRequest
    from spindle.broker.protocol.apis import encode_response_parts

    req = decode_request(_client_request(FetchRequest, version, corr=5))
    blobs = [bytes([i]) * (5000 + i) for i in range(3)] + [b"small"]
    body = {
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {"partition_index": i, "high_watermark": 9, "records": blob}
                    for i, blob in enumerate(blobs)
                ],
            }
        ]
    }
    size, parts = encode_response_parts(req, body)
    joined = b"".join(bytes(p) for p in parts)
    assert len(joined) == size
    assert joined == encode_response(req, body)


def test_fetch_answers_which_carry_record_sets_are_written_by_hand() -> None:
    # _spec refuses an API whose response has records but no encode_body (import fails).
    assert {s.key for s in SUPPORTED_APIS.values() if s.encode_body is not None} == {ApiKey.FETCH}


@pytest.mark.parametrize("version", [3, 9, 11])
def test_a_produce_answer_is_one_piece_equal_to_the_codec_output(version: int) -> None:
    from spindle.broker.protocol.apis import encode_response_parts

    req = decode_request(_client_request(ProduceRequest, version, corr=7))
    body = {
        "responses": [{"name": "t", "partition_responses": [{"index": 0, "base_offset": 42}]}],
        "throttle_time_ms": 0,
    }
    size, parts = encode_response_parts(req, body)
    assert parts == [encode_response(req, body)]
    assert size == len(parts[0])
    back = ProduceResponse.decode(parts[0], version=version, header=True)
    assert back.responses[0].partition_responses[0].base_offset == 42
