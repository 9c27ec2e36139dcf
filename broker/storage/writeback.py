"""Start the write-back of a file range now: ``sync_file_range(SYNC_FILE_RANGE_WRITE)``.

Why: the mover copies a replica into the page cache far faster than a disk takes it. Left
alone, the copied bytes pile up dirty until the kernel's flusher threads (at normal CPU and I/O
priority, competing with the event loop) write them back, and the mover's fsync before the
swap then waits for all of them at once. Starting each chunk's write-back as soon as it is
copied submits that I/O from the mover's own thread, at its lowered priorities
(:mod:`spindle.broker.storage.priority`), while it copies the next chunk; the fsync finds
little left to do. It makes nothing durable by itself (no metadata, no device flush): the
mover's fsyncs still do that.

The standard library has no binding for ``sync_file_range``; glibc has, called through
``ctypes`` (one call, not worth a dependency). Where it is missing the call does nothing.
"""

from __future__ import annotations

import ctypes
import os

SYNC_FILE_RANGE_WRITE = 2

_libc = ctypes.CDLL(None, use_errno=True)
_sync_file_range = getattr(_libc, "sync_file_range", None)
if _sync_file_range is not None:
    _sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    _sync_file_range.restype = ctypes.c_int


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Queue the dirty pages of ``[offset, offset + length)`` of ``fd`` for writing, without
    waiting for them; ``OSError`` if the kernel reports an error (a failing disk)."""
    if _sync_file_range is None or length <= 0:
        return
    if _sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"sync_file_range: {os.strerror(err)}")
