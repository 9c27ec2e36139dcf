"""One client connection: read frames, decode, handle, answer in order.

Requests on one connection are handled one at a time, in arrival order, as Kafka does (it mutes
a channel until the response of its current request is sent); pipelined requests wait in the
connection's buffer, and their responses therefore leave in request order. A frame larger than
``socket.request.max.bytes``, a malformed frame or header, an unknown API key or an unsupported
version (other than ApiVersions') closes this connection only, and is logged with the peer.

The connection is an ``asyncio.BufferedProtocol``: the socket is read straight into the
buffer of the frame being received. A stream reader copied every byte twice more in user
space (into its buffer, then out of it for ``readexactly``) and read at most 256 KiB per
call; profiled under a produce load of ~1 MB requests those copies, the reads and the
allocations behind them were about a fifth of the broker's CPU. Small frames are gathered in
one reusable 64 KiB buffer (several per read); a frame that does not fit there gets a buffer
of its own size (from the broker's :class:`~.frame_pool.FramePool`), which the socket then
fills directly.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import struct
from collections.abc import Callable
from typing import cast

from spindle.broker.protocol.apis import RequestRejected, decode_request, encode_response_parts
from spindle.broker.protocol.fetch_response import Piece
from spindle.broker.protocol.framing import SIZE_PREFIX_BYTES, FrameError, parse_frame_size

from .apis import KafkaApis
from .frame_pool import FramePool
from .security.authenticator import Authenticator
from .security.authorizer import RequestContext
from .zerocopy import FileRegion, close_regions, send_parts

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
DRAIN_ABOVE_BYTES = 1 << 20
READ_LIMIT_BYTES = 2 << 20
"""Bytes of received frames a connection holds beyond the request being handled before it
stops reading its socket (resumed once the handler has taken them); a frame being received
counts once it is whole. Pipelining clients (librdkafka keeps several produce requests in
flight) keep the socket busy while a request is handled, and a connection still holds at most
this much beyond it -- as the stream reader's limit (1 MiB, which it doubles) did before."""
SMALL_BUFFER_BYTES = 64 << 10
"""The reusable buffer small frames are gathered in (several per socket read)."""


def set_send_buffer(
    channel: asyncio.BaseTransport | asyncio.StreamWriter, send_buffer_bytes: int
) -> None:
    """Apply ``socket.send.buffer.bytes`` (-1 = leave the OS's autotuning) to a connection.

    Kafka's 100 KiB default is also what serves fetches fastest here: with librdkafka reading
    ~40 MB fetch responses over loopback, consume ran at a median of ~470 MB/s with a 100 KiB
    send buffer against ~240 MB/s with the kernel's autotuned one (up to 4 MiB) and ~195 MB/s
    with 4 MiB set (six runs each, alternating). A sendfile into a large buffer hands the
    receiver megabytes in one burst instead of a steady stream it copies out as it arrives.
    """
    sock = channel.get_extra_info("socket")
    if send_buffer_bytes > 0 and sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes)


_Item = bytes | bytearray | BaseException | None
"""What the protocol hands the serving task: a frame, the error that ends the connection
(after the frames before it), or None for the peer's end of stream."""


class KafkaConnection(asyncio.BufferedProtocol):
    """Frames in, responses out, for one client connection (see module docstring).

    The protocol callbacks only assemble frames; one task per connection (:meth:`serve`)
    decodes, handles and answers them in order. Event loop only.
    """

    def __init__(
        self,
        apis: KafkaApis,
        *,
        max_request_bytes: int,
        listener: str,
        authenticate: Callable[[asyncio.BaseTransport], Authenticator],
        send_buffer_bytes: int = -1,
        max_idle_s: float | None = None,
        on_task: Callable[[asyncio.Task[None]], None] | None = None,
        frame_pool: FramePool | None = None,
    ) -> None:
        self._apis = apis
        self._pool = frame_pool if frame_pool is not None else FramePool()
        self._max_request_bytes = max_request_bytes
        self._listener = listener
        self._authenticate = authenticate
        self._authenticator: Authenticator | None = None
        self._max_idle_s = max_idle_s
        self._last_active = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._send_buffer_bytes = send_buffer_bytes
        self._on_task = on_task
        self._transport: asyncio.Transport | None = None
        self._address = "?"
        # Small frames: bytes [_lo, _hi) of _buf are received and not yet framed.
        self._buf = bytearray(SMALL_BUFFER_BYTES)
        self._lo = 0
        self._hi = 0
        # A frame too large for _buf, being received into its own buffer.
        self._frame: bytearray | None = None
        self._filled = 0
        self._items: collections.deque[_Item] = collections.deque()
        self._queued_bytes = 0
        self._reading_paused = False
        self._item_waiter: asyncio.Future[None] | None = None
        self._write_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._lost = False
        self._closed: asyncio.Future[None] | None = None

    # --- protocol callbacks: assemble frames ----------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        try:
            # The transport is up (on an SSL listener: the handshake is done, the client's
            # certificate known); who the connection is comes from it.
            self._authenticator = self._authenticate(transport)
        except ValueError as exc:  # e.g. no ssl.principal.mapping.rules maps the name
            log.warning("closing connection from %s: authentication failed: %s", self._address, exc)
            cast(asyncio.Transport, transport).abort()
            return
        set_send_buffer(transport, self._send_buffer_bytes)
        loop = asyncio.get_running_loop()
        self._last_active = loop.time()
        if self._max_idle_s is not None:
            self._idle_timer = loop.call_later(self._max_idle_s, self._check_idle)
        self._closed = loop.create_future()
        task = loop.create_task(self.serve())
        if self._on_task is not None:
            self._on_task(task)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._filled :]
        if self._hi == len(self._buf):
            self._compact()
        return memoryview(self._buf)[self._hi :]

    def _check_idle(self) -> None:
        """``connections.max.idle.ms``: close a connection nothing was received on or sent
        to for that long (Kafka's selector expires idle channels so)."""
        assert self._max_idle_s is not None
        loop = asyncio.get_running_loop()
        idle = loop.time() - self._last_active
        if idle >= self._max_idle_s and self._transport is not None:
            log.info("closing connection from %s: idle for %.0f s", self._address, idle)
            self._transport.close()
            return
        self._idle_timer = loop.call_later(self._max_idle_s - idle, self._check_idle)

    def buffer_updated(self, nbytes: int) -> None:
        self._last_active = asyncio.get_running_loop().time()
        if self._frame is not None:
            self._filled += nbytes
            if self._filled == len(self._frame):
                frame, self._frame = self._frame, None
                self._push(frame, len(frame))
            return
        self._hi += nbytes
        try:
            self._split_frames()
        except FrameError as exc:
            self._lo = self._hi = 0
            self._push(exc, 0)
            self._pause_reading()

    def eof_received(self) -> bool:
        self._push(None, 0)
        return True  # half-closed: answers to what was received may still be sent

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._push(ConnectionResetError("connection lost"), 0)
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_exception(ConnectionResetError("connection lost"))
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def _split_frames(self) -> None:
        """Hand every whole frame in the small buffer over; start a large frame's own buffer
        (with the bytes of it already here) when it cannot fit."""
        buf = self._buf
        while self._hi - self._lo >= SIZE_PREFIX_BYTES:
            lo = self._lo
            size = parse_frame_size(
                bytes(buf[lo : lo + SIZE_PREFIX_BYTES]), max_bytes=self._max_request_bytes
            )
            start = lo + SIZE_PREFIX_BYTES
            have = self._hi - start
            if have >= size:
                self._lo = start + size
                self._push(bytes(buf[start : start + size]), size)
                continue
            if SIZE_PREFIX_BYTES + size > len(buf):
                frame = self._pool.take(size)
                frame[:have] = buf[start : self._hi]
                self._frame, self._filled = frame, have
                self._lo = self._hi = 0
            break
        if self._lo == self._hi:
            self._lo = self._hi = 0

    def _compact(self) -> None:
        """Make room at the end of the small buffer: the unframed bytes move to the front of a
        new one (the old may still be exported to the transport's last read)."""
        fresh = bytearray(len(self._buf))
        n = self._hi - self._lo
        fresh[:n] = self._buf[self._lo : self._hi]
        self._buf, self._lo, self._hi = fresh, 0, n

    def _push(self, item: _Item, size: int) -> None:
        self._items.append(item)
        self._queued_bytes += size
        if self._queued_bytes > READ_LIMIT_BYTES:
            self._pause_reading()
        if self._item_waiter is not None and not self._item_waiter.done():
            self._item_waiter.set_result(None)

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()

    async def _next_item(self) -> bytes | bytearray:
        """The next whole frame; raises what ended the connection, IncompleteReadError at the
        peer's end of stream."""
        while not self._items:
            self._item_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._item_waiter
            finally:
                self._item_waiter = None
        item = self._items.popleft()
        if isinstance(item, bytes | bytearray):
            self._queued_bytes -= len(item)
            if (
                self._reading_paused
                and self._queued_bytes <= READ_LIMIT_BYTES
                and self._transport is not None
                and not self._transport.is_closing()
            ):
                self._reading_paused = False
                self._transport.resume_reading()
            return item
        if item is None:
            raise asyncio.IncompleteReadError(b"", None)
        raise item

    async def _drain(self) -> None:
        if self._lost:
            raise ConnectionResetError("connection lost")
        if not self._write_paused:
            return
        self._drain_waiter = asyncio.get_running_loop().create_future()
        try:
            await self._drain_waiter
        finally:
            self._drain_waiter = None

    # --- the serving task -----------------------------------------------------------------

    async def serve(self) -> None:
        """Serve until the peer closes the connection or breaks the protocol."""
        transport = self._transport
        assert transport is not None
        # Authentication happens here, once, before any request is dispatched (security issue:
        # a SASL authenticator runs its exchange first); handlers see only the principal.
        assert self._authenticator is not None  # set in connection_made, before this task
        principal = self._authenticator.principal
        ctx_base = RequestContext(principal, None, self._address, self._listener)
        try:
            while True:
                payload = await self._next_item()
                throttle_ms = await self._answer(transport, ctx_base, payload)
                if isinstance(payload, bytearray):
                    self._pool.give(payload)  # taken only if nothing kept a view of it
                del payload
                if throttle_ms > 0:
                    await self._mute(transport, throttle_ms)
        except (FrameError, RequestRejected) as exc:
            log.warning("closing connection from %s: %s", self._address, exc)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing connection from %s after an unexpected error", self._address)
        finally:
            transport.close()
            if self._closed is not None:
                await asyncio.shield(self._closed)

    async def _mute(self, transport: asyncio.Transport, throttle_ms: int) -> None:
        """A client over its quota was answered with ``throttle_ms``: read nothing from it for
        that long (Kafka mutes the channel, KIP-219), so ignoring the throttle time gains it
        nothing."""
        transport.pause_reading()
        try:
            await asyncio.sleep(throttle_ms / 1000)
        finally:
            # flow control (``_reading_paused``) may want it paused still; it resumes then
            if not self._reading_paused and not transport.is_closing():
                transport.resume_reading()

    async def _answer(
        self, transport: asyncio.Transport, ctx_base: RequestContext, payload: bytes | bytearray
    ) -> int:
        """Decode, handle and answer one request; the answer's throttle time (ms). Its own
        coroutine so that, once it returns, nothing of the request (views of the frame
        included) is left alive but ``payload``."""
        request = decode_request(payload)
        ctx = RequestContext(
            ctx_base.principal, request.header.client_id, self._address, self._listener
        )
        body = await self._apis.handle(ctx, request)
        if body is None:
            return 0
        size, parts = encode_response_parts(request, body)
        try:
            await _send_response(transport, size, parts)
        finally:
            close_regions(parts)
        self._last_active = asyncio.get_running_loop().time()
        if transport.get_write_buffer_size() > DRAIN_ABOVE_BYTES:
            await self._drain()
        throttle = body.get("throttle_time_ms", 0)
        return throttle if isinstance(throttle, int) else 0


async def _send_response(transport: asyncio.Transport, size: int, parts: list[Piece]) -> None:
    """Write the size prefix and ``parts`` in order, in one write where all are bytes (one
    ``send`` on loopback also runs the receiver's TCP work, so a response of prefix + body in
    two writes cost two); with file regions among them, by :func:`send_parts`."""
    if any(isinstance(part, FileRegion) for part in parts):
        await send_parts(transport, [_SIZE.pack(size), *parts])
    else:
        transport.write(b"".join([_SIZE.pack(size), *cast(list[bytes | memoryview], parts)]))
