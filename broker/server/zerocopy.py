"""Record sets sent from the segment file with ``sendfile`` instead of from memory.

A fetch answer carries whole batches as stored. For a large enough record set the storage
engine does not read the bytes at all: it hands over a :class:`~spindle.broker.storage.FileRange`
(a duplicated descriptor, position and length). The connection sends that range with
``loop.sendfile`` (``os.sendfile`` on plain TCP: disk cache → socket, no user-space copy;
asyncio falls back to read-and-send where the transport cannot, e.g. TLS) and then closes it.

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
from collections.abc import Iterable
from dataclasses import dataclass

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


def close_regions(parts: Iterable[object]) -> None:
    """Close every :class:`FileRegion` among ``parts`` (idempotent)."""
    for part in parts:
        if isinstance(part, FileRegion):
            part.close()
