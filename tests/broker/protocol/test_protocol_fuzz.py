"""Property tests of request decoding: whatever the bytes, decoding either yields a request or
raises RequestRejected (which closes the connection); it never raises anything else."""

from __future__ import annotations

import contextlib
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spindle.broker.protocol.apis import SUPPORTED_APIS, RequestRejected, decode_request
from spindle.broker.protocol.framing import FrameError, parse_frame_size


def _decode_or_reject(data: bytes) -> None:
    with contextlib.suppress(RequestRejected):
        decode_request(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=256))
def test_random_bytes_decode_or_are_rejected(data: bytes) -> None:
    _decode_or_reject(data)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from(sorted(SUPPORTED_APIS)) | st.integers(-(2**15), 2**15 - 1),
    version=st.integers(-(2**15), 2**15 - 1) | st.integers(0, 14),
    corr=st.integers(-(2**31), 2**31 - 1),
    client_len=st.integers(-3, 40),
    body=st.binary(max_size=200),
)
def test_valid_looking_headers_with_random_bodies_decode_or_are_rejected(
    key: int, version: int, corr: int, client_len: int, body: bytes
) -> None:
    raw = struct.pack(">hhih", key, version, corr, client_len) + body
    _decode_or_reject(raw)


@settings(deadline=None)
@given(st.binary(min_size=4, max_size=4))
def test_any_size_prefix_is_accepted_or_refused_with_a_frame_error(prefix: bytes) -> None:
    try:
        size = parse_frame_size(prefix, max_bytes=1 << 20)
    except FrameError:
        return
    assert 0 < size <= 1 << 20
