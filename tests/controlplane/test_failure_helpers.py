"""The helpers every real-failure test leans on: a read-only remount under a busy writer, and
ports that an outgoing connection cannot take before the server binds them."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from controlplane.processes import _ephemeral_range, free_port
from controlplane.volumes import remount_read_only

from ..broker.storage.faults import needs_root, tmpfs


@needs_root
def test_a_remount_refused_while_a_file_is_open_for_writing_lands_once_it_is_closed(
    tmp_path: Path,
) -> None:
    with tmpfs(str(tmp_path / "disk")) as disk:
        writer = open(os.path.join(disk, "segment.log"), "ab")  # noqa: SIM115
        busy = subprocess.run(
            ["mount", "-o", "remount,ro", disk], capture_output=True, text=True, check=False
        )
        assert busy.returncode != 0  # the kernel's refusal, for real
        assert "busy" in busy.stderr
        closer = threading.Timer(0.3, writer.close)
        closer.start()
        started = time.monotonic()
        try:
            remount_read_only(disk)
        finally:
            closer.join()
        assert time.monotonic() - started >= 0.25  # it waited for the writer, not around it
        with pytest.raises(OSError, match="Read-only file system"):
            open(os.path.join(disk, "new.log"), "ab").close()
        subprocess.run(["mount", "-o", "remount,rw", disk], check=True)


@needs_root
def test_a_remount_refused_for_another_reason_is_reported_with_the_kernels_reason(
    tmp_path: Path,
) -> None:
    with pytest.raises(OSError, match=r"remount,ro .* failed: .*not mount"):
        remount_read_only(tmp_path)  # a plain directory, not a mount point


def test_free_ports_lie_below_the_ephemeral_range_and_are_never_handed_out_twice() -> None:
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(20000 <= port < _ephemeral_range()[0] for port in ports)
