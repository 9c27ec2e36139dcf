"""One client connection: read frames, decode, handle, answer in order.

Requests on one connection are handled one at a time, in arrival order, as Kafka does (it mutes
a channel until the response of its current request is sent); pipelined requests wait in the
socket buffer, and their responses therefore leave in request order. A frame larger than
``socket.request.max.bytes``, a malformed frame or header, an unknown API key or an unsupported
version (other than ApiVersions') closes this connection only, and is logged with the peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from typing import cast

from spindle.broker.protocol.apis import (
    RequestRejected,
    SplicedBlob,
    decode_request,
    encode_response_parts,
)
from spindle.broker.protocol.framing import SIZE_PREFIX_BYTES, FrameError, parse_frame_size

from .apis import KafkaApis
from .authorizer import RequestContext
from .zerocopy import FileRegion, close_regions, send_region

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
DRAIN_ABOVE_BYTES = 1 << 20
READ_LIMIT_BYTES = 1 << 20
"""The stream reader's limit (``asyncio.start_server(limit=...)``): it stops reading the socket
once twice this much is buffered and resumes when a read waits. At asyncio's default (64 KiB) a
1 MiB produce request paused and resumed the socket a dozen times (an epoll change each); at
1 MiB a request of up to 2 MiB arrives without a pause, and a connection still buffers at most
2 MiB beyond the request being handled."""


def set_send_buffer(writer: asyncio.StreamWriter, send_buffer_bytes: int) -> None:
    """Apply ``socket.send.buffer.bytes`` (-1 = leave the OS's autotuning) to a connection.

    Kafka's 100 KiB default is also what serves fetches fastest here: with librdkafka reading
    ~40 MB fetch responses over loopback, consume ran at a median of ~470 MB/s with a 100 KiB
    send buffer against ~240 MB/s with the kernel's autotuned one (up to 4 MiB) and ~195 MB/s
    with 4 MiB set (six runs each, alternating). A sendfile into a large buffer hands the
    receiver megabytes in one burst instead of a steady stream it copies out as it arrives.
    """
    sock = writer.get_extra_info("socket")
    if send_buffer_bytes > 0 and sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes)


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    apis: KafkaApis,
    *,
    max_request_bytes: int,
    listener: str,
) -> None:
    """Serve one connection until the peer closes it or breaks the protocol."""
    peer = writer.get_extra_info("peername")
    address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
    ctx_base = RequestContext("User:ANONYMOUS", None, address, listener)
    try:
        while True:
            prefix = await reader.readexactly(SIZE_PREFIX_BYTES)
            size = parse_frame_size(prefix, max_bytes=max_request_bytes)
            payload = await reader.readexactly(size)
            request = decode_request(payload)
            ctx = RequestContext(ctx_base.principal, request.header.client_id, address, listener)
            body = await apis.handle(ctx, request)
            if body is None:
                continue
            size, parts = encode_response_parts(request, body)
            try:
                await _send_response(writer, size, parts)
            finally:
                close_regions(parts)
            if writer.transport.get_write_buffer_size() > DRAIN_ABOVE_BYTES:
                await writer.drain()
    except (FrameError, RequestRejected) as exc:
        log.warning("closing connection from %s: %s", address, exc)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("closing connection from %s after an unexpected error", address)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def _send_response(
    writer: asyncio.StreamWriter, size: int, parts: list[bytes | memoryview | SplicedBlob]
) -> None:
    """Write the size prefix and ``parts`` in order: the bytes between two file regions go in
    one write (one ``send`` on loopback also runs the receiver's TCP work, so a response of
    prefix + body in two writes cost two), each file region by ``sendfile``."""
    pending: list[bytes | memoryview] = [_SIZE.pack(size)]
    for part in parts:
        if isinstance(part, FileRegion):
            writer.write(b"".join(pending))
            pending = []
            await send_region(writer, part)
        else:
            pending.append(cast(bytes | memoryview, part))
    if pending:
        writer.write(b"".join(pending))
