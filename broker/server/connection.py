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
import struct
from typing import cast

from spindle.broker.protocol.apis import RequestRejected, decode_request, encode_response_parts
from spindle.broker.protocol.framing import SIZE_PREFIX_BYTES, FrameError, parse_frame_size

from .apis import KafkaApis
from .authorizer import RequestContext
from .zerocopy import FileRegion, close_regions, send_region

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
DRAIN_ABOVE_BYTES = 1 << 20


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
                writer.write(_SIZE.pack(size))
                for part in parts:
                    if isinstance(part, FileRegion):
                        await send_region(writer, part)
                    else:
                        writer.write(cast(bytes, part))
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
