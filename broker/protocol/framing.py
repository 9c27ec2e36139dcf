"""Kafka's size-prefixed framing: ``int32 size`` then ``size`` bytes of header and body.

Source: Kafka protocol guide, "Common Request and Response Structure". A frame whose size is
negative, zero or above ``socket.request.max.bytes`` is refused before any byte of it is read, as
Kafka's ``NetworkReceive`` does (``InvalidReceiveException``), so a hostile size cannot make the
broker allocate memory.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
SIZE_PREFIX_BYTES = 4


class FrameError(ValueError):
    """A frame that must not be read: the connection carrying it is closed."""


def parse_frame_size(prefix: bytes, *, max_bytes: int) -> int:
    """Return the body size announced by a 4-byte prefix, or raise FrameError saying why."""
    if len(prefix) != SIZE_PREFIX_BYTES:
        raise FrameError(f"frame size prefix must be 4 bytes, got {len(prefix)}")
    (size,) = _SIZE.unpack(prefix)
    if size <= 0:
        raise FrameError(f"invalid frame size {size}: must be positive")
    if size > max_bytes:
        raise FrameError(
            f"frame of {size} bytes is larger than socket.request.max.bytes ({max_bytes})"
        )
    return int(size)


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix a payload with its size."""
    return _SIZE.pack(len(payload)) + bytes(payload)
