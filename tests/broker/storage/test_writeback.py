"""Starting write-back of copied ranges: a real call on real files."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from spindle.broker.storage.writeback import start_writeback


def test_writeback_of_a_written_range_keeps_the_bytes_and_a_bad_descriptor_is_an_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "segment.log"
    data = os.urandom(3 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        start_writeback(fd, 1 << 20, 2 << 20)
        start_writeback(fd, 0, 0)  # nothing to do is not an error
    finally:
        os.close(fd)
    assert path.read_bytes() == data
    with pytest.raises(OSError, match="sync_file_range") as caught:
        start_writeback(fd, 0, 4096)  # closed above
    assert caught.value.errno == errno.EBADF
