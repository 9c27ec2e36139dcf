"""Request header v0-v2 and response header v0-v1, written out by hand.

The request header is parsed before the API key and version are known to be valid, so it
cannot use a versioned schema class. Layout (Kafka ``RequestHeader.json``):

    v0: request_api_key int16, request_api_version int16, correlation_id int32
    v1: + client_id nullable string (int16 length, -1 = null; NOT compact even in v2)
    v2: + tagged fields (uvarint count, then per field uvarint tag, uvarint size, bytes)

The header version follows from the API: v2 when the request version is flexible, v0 only for
ControlledShutdown v0 (which Spindle does not serve), v1 otherwise. Response header
(``ResponseHeader.json``): v0 = correlation_id int32; v1 adds tagged fields. ApiVersions always
answers with response header v0 so that a client that does not yet know the broker's versions
can read the answer (KIP-511).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_KEY_VERSION_CORR = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class HeaderError(ValueError):
    """A request header that cannot be parsed: the connection is closed (Kafka does the same)."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The fields of a request header that the broker uses."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def peek_key_version_correlation(data: bytes | memoryview) -> tuple[int, int, int]:
    """Read the three fixed fields every header version starts with."""
    if len(data) < _KEY_VERSION_CORR.size:
        raise HeaderError(f"request of {len(data)} bytes is too short for a request header")
    key, version, corr = _KEY_VERSION_CORR.unpack_from(data, 0)
    return int(key), int(version), int(corr)


def read_uvarint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint (at most 5 bytes, 32 bits) at ``pos``; return (value, new pos)."""
    value = 0
    shift = 0
    for i in range(5):
        if pos >= len(data):
            raise HeaderError("truncated unsigned varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if i == 4:
            break
    raise HeaderError("unsigned varint longer than 5 bytes")


_ONE_BYTE_UVARINTS = tuple(bytes([v]) for v in range(0x80))


def write_uvarint(value: int) -> bytes:
    """Encode an unsigned varint."""
    if 0 <= value < 0x80:
        return _ONE_BYTE_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def parse_request_header(
    data: bytes | memoryview, *, header_version: int
) -> tuple[RequestHeader, int]:
    """Parse a request header of the given version; return it and the offset of the body."""
    key, version, corr = peek_key_version_correlation(data)
    pos = _KEY_VERSION_CORR.size
    client_id: str | None = None
    if header_version >= 1:
        if len(data) < pos + 2:
            raise HeaderError("truncated client_id length")
        (length,) = _INT16.unpack_from(data, pos)
        pos += 2
        if length < -1:
            raise HeaderError(f"invalid client_id length {length}")
        if length >= 0:
            if len(data) < pos + length:
                raise HeaderError(f"client_id of {length} bytes runs past the end of the request")
            try:
                client_id = bytes(data[pos : pos + length]).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise HeaderError(f"client_id is not UTF-8: {exc}") from None
            pos += length
    if header_version >= 2:
        count, pos = read_uvarint(data, pos)
        for _ in range(count):
            _tag, pos = read_uvarint(data, pos)
            size, pos = read_uvarint(data, pos)
            if len(data) < pos + size:
                raise HeaderError("tagged field runs past the end of the request header")
            pos += size
    return RequestHeader(key, version, corr, client_id, header_version), pos


def encode_response_header(correlation_id: int, *, header_version: int) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged-field section)."""
    if header_version == 0:
        return _INT32.pack(correlation_id)
    return _INT32.pack(correlation_id) + b"\x00"


def encode_request_header(header: RequestHeader) -> bytes:
    """Encode a request header (used by tests and by the broker's own clients)."""
    out = bytearray(
        _KEY_VERSION_CORR.pack(header.api_key, header.api_version, header.correlation_id)
    )
    if header.header_version >= 1:
        if header.client_id is None:
            out += _INT16.pack(-1)
        else:
            raw = header.client_id.encode("utf-8")
            out += _INT16.pack(len(raw)) + raw
    if header.header_version >= 2:
        out += b"\x00"
    return bytes(out)
