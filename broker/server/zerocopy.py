"""Record sets sent from the segment file with ``sendfile`` instead of from memory.

A fetch answer carries whole batches as stored. When the storage engine says where they lie
(``ReadSlice.file_path/position/length``), the connection sends that file region with
``loop.sendfile`` (``os.sendfile`` on plain TCP; asyncio falls back to read-and-send where the
transport cannot, e.g. TLS), skipping the user-space copies of a write from memory.

The region is re-checked just before sending: a replica move may have renamed the segment's
directory after the read, retention may have deleted the file. If the file cannot be opened,
is too short, or its first and last batch headers differ from the bytes read, the bytes read
are sent instead (``fallback``), so a client never receives anything but what was read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass
from typing import BinaryIO

CHECK_BYTES = 61
"""A v2 batch header (offsets, length, epoch, magic, CRC, ... record count)."""


@dataclass(frozen=True)
class FileRegion:
    """``length`` bytes of ``path`` at ``position``, equal to ``fallback`` when read."""

    path: str
    position: int
    length: int
    fallback: bytes
    is_spliced_blob: bool = True

    def __len__(self) -> int:
        return self.length

    def open_verified(self) -> BinaryIO | None:
        """The open file if it still holds the bytes that were read, else None."""
        try:
            f = open(self.path, "rb", buffering=0)  # noqa: SIM115 - closed by the caller
        except OSError:
            return None
        try:
            fd = f.fileno()
            if os.fstat(fd).st_size < self.position + self.length:
                raise OSError("segment shrank")
            head = min(CHECK_BYTES, self.length)
            if os.pread(fd, head, self.position) != self.fallback[:head]:
                raise OSError("segment changed")
            tail_at = self.position + self.length - head
            if os.pread(fd, head, tail_at) != self.fallback[-head:]:
                raise OSError("segment changed")
        except OSError:
            f.close()
            return None
        return f


async def send_region(writer: asyncio.StreamWriter, region: FileRegion) -> None:
    """Send ``region`` after everything already written to ``writer``, zero-copy if possible."""
    f = region.open_verified()
    if f is None:
        writer.write(region.fallback)
        return
    with contextlib.closing(f):
        loop = asyncio.get_running_loop()
        await loop.sendfile(writer.transport, f, region.position, region.length)
