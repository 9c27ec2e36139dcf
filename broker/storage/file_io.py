"""Whole writes and copies on raw descriptors, for the segment files.

``os.write``/``os.writev`` may write less than asked (a signal, a nearly full disk before the
error): these loop until everything is written or an OSError says why not; the disk-failure
channel sees that error where the caller runs (``Log._guard``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence


def write_file(path: str, data: bytes) -> None:
    """Replace the file at ``path`` with ``data`` and fsync it (the index files at a flush)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write all of ``data`` at the descriptor's position, resuming after a short write."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


_IOV_MAX = 512
"""Pieces per ``writev`` call (the kernel accepts up to IOV_MAX, 1024 on Linux)."""


def writev_all(fd: int, parts: Sequence[bytes | bytearray | memoryview]) -> None:
    """Write ``parts`` in order with vectored writes, resuming after a short write."""
    pending = [memoryview(p) for p in parts if len(p)]
    while pending:
        written = os.writev(fd, pending[:_IOV_MAX])
        while pending and written >= len(pending[0]):
            written -= len(pending.pop(0))
        if written:
            pending[0] = pending[0][written:]


def copy_fallback(src_fd: int, dst_fd: int, src_pos: int, dst_pos: int, length: int) -> int:
    """Copy when ``copy_file_range`` is unsupported: ``sendfile`` (dst at its end), else read/write."""
    os.lseek(dst_fd, dst_pos, os.SEEK_SET)
    try:
        return os.sendfile(dst_fd, src_fd, src_pos, length)
    except OSError:
        data = os.pread(src_fd, min(length, 1 << 20), src_pos)
        return os.pwrite(dst_fd, data, dst_pos)
