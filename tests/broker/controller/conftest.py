"""Controller-test fixtures: an etcd of the test's own that the test may kill and restart
(the session-wide ``etcd`` fixture is shared and must stay up)."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import _tool, free_port


class OwnEtcd:
    """A real etcd on fixed ports and a fixed data dir, so a restart keeps its data."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.client_port, self.peer_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.client_port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        peer = f"http://127.0.0.1:{self.peer_port}"
        log = open(self.base / "etcd.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                _tool("etcd"),
                "--name=own",
                f"--data-dir={self.base / 'data'}",
                f"--listen-client-urls={self.url}",
                f"--advertise-client-urls={self.url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=own={peer}",
                "--log-level=error",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"etcd did not start: {(self.base / 'etcd.log').read_text()[-2000:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def own_etcd(tmp_path: Path) -> Iterator[OwnEtcd]:
    server = OwnEtcd(tmp_path)
    server.start()
    yield server
    server.kill()
