"""Record sets sent from the segment file with ``sendfile`` instead of from memory.

A fetch answer carries whole batches as stored. For a large enough record set the storage
engine does not read the bytes at all: it hands over a :class:`~spindle.broker.storage.FileRange`
(a duplicated descriptor, position and length). The connection sends that range with
``os.sendfile`` (:func:`send_parts`: disk cache → socket, no user-space copy; through
``loop.sendfile``, which falls back to read-and-send, where the transport is not a plain
socket, e.g. TLS) and then closes it.

The descriptor names the file, not its path, so a replica move's swap, retention or a roll
between the read and the send change nothing. A file cut short under the range (truncation
above the high watermark, e.g. a follower diverging) cannot be answered from: the response's
size is already on the wire, so the connection is closed and the client fetches again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast

from spindle.broker.storage import FileRange

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileRegion:
    """A fetch response's ``records`` value that the connection sends from the file. Owns the
    range: close it once sent, or when the response is dropped."""

    range: FileRange
    is_spliced_blob: bool = True

    def __len__(self) -> int:
        return self.range.length

    def close(self) -> None:
        self.range.close()


class ShortSend(ConnectionError):
    """The file held fewer bytes than the response promised; the connection must close."""


async def send_region(transport: asyncio.WriteTransport, region: FileRegion) -> None:
    """Send ``region`` after everything already written to ``transport``, zero-copy if possible.

    Does not close the region (the caller owns it). Raises :class:`ShortSend` if the file was
    cut short under the range.
    """
    rng = region.range
    f = os.fdopen(rng.fd, "rb", buffering=0, closefd=False)
    with contextlib.closing(f):
        loop = asyncio.get_running_loop()
        sent = await loop.sendfile(transport, f, rng.position, rng.length)
    if sent != rng.length:
        log.warning("segment shrank under a fetch: sent %d of %d bytes", sent, rng.length)
        raise ShortSend(f"sent {sent} of {rng.length} bytes of a record set")


async def send_parts(transport: asyncio.WriteTransport, parts: Sequence[object]) -> None:
    """Send ``parts`` -- bytes-like pieces and :class:`FileRegion` s -- in order, after
    everything already written to ``transport``; the bytes between two regions go in one
    ``send`` (on loopback a send also runs the receiver's TCP work). Closes nothing.

    Why not ``loop.sendfile`` per region: it borrows the socket from the transport for each
    region (pause and resume reading, wait for the buffer to empty, an ``fstat``, a future),
    and after every partial ``sendfile`` -- one per send buffer, 100 KiB by Kafka's default
    -- it removes and re-adds its write callback; profiled under consume, that Python was
    ~0.6 ms of the event loop's time per 4 MB fetch answer (~40 cycles), as much CPU as the
    kernel's copying. Here the socket is written directly, through a duplicate descriptor (the
    transport's own may not be registered with the loop a second time), by one write callback
    kept registered while the answer is sent (:class:`_RawSender`); a transport that holds
    unsent bytes, or is not a plain socket, goes the way of :func:`send_region`. Raises
    :class:`ShortSend` if a file was cut short under its range (the answer's size is on the
    wire already), and ``ConnectionError`` if the peer went away.
    """
    sock = transport.get_extra_info("socket")
    if (
        sock is None
        or transport.get_extra_info("sslcontext") is not None
        or transport.get_write_buffer_size()
        or transport.is_closing()
    ):
        await _send_through(transport, parts)
        return
    fd = os.dup(sock.fileno())
    try:
        await _RawSender(asyncio.get_running_loop(), fd, parts).send()
    finally:
        os.close(fd)


async def _send_through(transport: asyncio.WriteTransport, parts: Sequence[object]) -> None:
    """:func:`send_parts` through the transport: bytes by ``write``, regions by
    :func:`send_region`."""
    for run in _runs(parts):
        if isinstance(run, FileRegion):
            await send_region(transport, run)
        else:
            transport.write(run)


def _runs(parts: Sequence[object]) -> Iterator[bytes | FileRegion]:
    """``parts`` in order, the bytes between two regions joined into one run (one send)."""
    pending: list[bytes | bytearray | memoryview] = []
    for part in parts:
        if isinstance(part, FileRegion):
            if pending:
                yield b"".join(pending)
                pending = []
            yield part
        else:
            pending.append(cast(bytes | bytearray | memoryview, part))
    if pending:
        yield b"".join(pending)


class _RawSender:
    """Writes ``parts`` to a non-blocking socket descriptor: as much as the socket takes at
    once, the rest from a write callback of the event loop.

    The callback does the writing itself (``os.write`` / ``os.sendfile`` until the socket is
    full again) rather than waking the sending task: a 4 MB fetch answer through Kafka's
    100 KiB send buffer waits for room ~40-60 times, and each wake-up that resumed a task cost
    two turns of the loop (the callback setting a future, then the task's step) and a new
    future. The task is woken once, when everything is sent or a write failed."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, parts: Sequence[object]) -> None:
        self._loop = loop
        self._fd = fd
        self._runs = _runs(parts)
        self._view: memoryview | None = None
        self._range: FileRange | None = None
        self._position = 0
        self._left = 0
        self._done: asyncio.Future[None] | None = None

    async def send(self) -> None:
        if self._pump():
            return
        self._done = self._loop.create_future()
        self._loop.add_writer(self._fd, self._writable)
        try:
            await self._done
        finally:
            self._loop.remove_writer(self._fd)

    def _writable(self) -> None:
        done = self._done
        if done is None or done.done():
            return
        try:
            finished = self._pump()
        except Exception as exc:  # handed to the waiting task, not swallowed
            done.set_exception(exc)
            return
        if finished:
            done.set_result(None)

    def _pump(self) -> bool:
        """Write until everything is sent (True) or the socket is full (False). Raises
        :class:`ShortSend` if a file ends inside its range, ``OSError`` if the socket fails."""
        while True:
            if self._view is None and self._range is None and not self._next():
                return True
            try:
                if self._view is not None:
                    self._view = self._view[os.write(self._fd, self._view) :]
                    if not self._view:
                        self._view = None
                    continue
                rng = self._range
                assert rng is not None
                sent = os.sendfile(self._fd, rng.fd, self._position, self._left)
            except BlockingIOError:
                return False
            if sent == 0:
                log.warning("segment shrank under a fetch: %d bytes of a range unsent", self._left)
                raise ShortSend(f"{self._left} of {rng.length} bytes of a record set missing")
            self._position += sent
            self._left -= sent
            if not self._left:
                self._range = None

    def _next(self) -> bool:
        """Take the next run to send; False when there is none."""
        run = next(self._runs, None)
        if run is None:
            return False
        if isinstance(run, FileRegion):
            self._range = run.range
            self._position, self._left = run.range.position, run.range.length
            if not self._left:
                self._range = None
        else:
            self._view = memoryview(run) if run else None
        return True


def close_regions(parts: Iterable[object]) -> None:
    """Close every :class:`FileRegion` among ``parts`` (idempotent)."""
    for part in parts:
        if isinstance(part, FileRegion):
            part.close()
