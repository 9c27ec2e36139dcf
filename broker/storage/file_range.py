"""Record bytes handed out of a log without copying them: :class:`FileRange` (a range of a
segment file behind its own descriptor, sent with ``sendfile``) and :class:`ReadSlice` (what
one read returns)."""

from __future__ import annotations

import errno
import os
import weakref
from dataclasses import dataclass


class FileRange:
    """``length`` bytes at ``position`` of a segment file, held by a private descriptor, for
    sending straight from the page cache (``sendfile``) without reading them into memory.

    Ownership: whoever receives a ``FileRange`` owns its descriptor and must :meth:`close` it
    (idempotent; also a context manager). A range dropped unclosed is closed when collected.

    Safe while the response is sent: the descriptor is a ``dup`` of the segment's, taken under
    the partition lock, so it names the file (inode), not the path. A segment deleted by
    retention, a directory renamed or deleted by a replica move's swap, or a roll leave the
    bytes readable until the range is closed (the kernel frees the inode then); appends only
    add bytes after the range. Only a truncation (follower divergence, which cuts above the
    high watermark that consumer reads stop at) can shorten the file under a range: a
    sender then gets fewer bytes than ``length`` and must give up on that connection.
    """

    __slots__ = ("__weakref__", "_finalizer", "fd", "length", "position")

    def __init__(self, fd: int, position: int, length: int) -> None:
        self.fd = fd
        self.position = position
        self.length = length
        self._finalizer = weakref.finalize(self, os.close, fd)

    def __len__(self) -> int:
        return self.length

    def __enter__(self) -> FileRange:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        self._finalizer()

    def read(self) -> bytes:
        """The bytes themselves (tests, fallbacks); ``OSError`` if the file was cut short."""
        data = os.pread(self.fd, self.length, self.position)
        if len(data) != self.length:
            raise OSError(errno.EIO, f"segment shrank under a read range ({len(data)} bytes)")
        return data


@dataclass(frozen=True, slots=True)
class ReadSlice:
    """Whole batches read from one segment, plus what a fetch response reports.

    The batches are either copied into ``records`` or, when the caller asked for a file range
    and the batches are large enough, left in the file: ``file`` (owned by the caller, who must
    close it) and ``records == b""``. ``size`` is their length either way.
    """

    records: bytes
    file: FileRange | None
    log_start_offset: int
    log_end_offset: int
    high_watermark: int

    @property
    def size(self) -> int:
        return self.file.length if self.file is not None else len(self.records)
