"""Shared fixtures for the broker tests: a real etcd and real broker processes on loopback.

The protocol package is imported first: it loads kafka-python's schema classes with the
library's import-time DeprecationWarning silenced (pytest turns warnings into errors).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import spindle.broker.protocol.apis  # noqa: F401  (import order matters, see docstring)
from controlplane.processes import free_port as free_port
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.store import MetadataStore

CACHE_BIN = Path(os.environ.get("SPINDLE_CACHE", Path.home() / ".cache" / "spindle")) / "bin"


def _tool(name: str) -> str:
    found = shutil.which(name) or (str(CACHE_BIN / name) if (CACHE_BIN / name).exists() else None)
    if found is None:
        pytest.fail(f"{name} not found on PATH or in {CACHE_BIN}: run ./dev sync")
    return found


@dataclass
class Etcd:
    url: str
    proc: subprocess.Popen[bytes]


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    """One real etcd for the session; each broker uses its own key prefix."""
    data = tmp_path_factory.mktemp("etcd")
    client, peer = free_port(), free_port()
    url = f"http://127.0.0.1:{client}"
    log = open(data / "etcd.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            _tool("etcd"),
            "--name=test",
            f"--data-dir={data / 'data'}",
            f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=test=http://127.0.0.1:{peer}",
            "--log-level=error",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as resp:
                if resp.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"etcd did not start: {(data / 'etcd.log').read_text()[-2000:]}")
        time.sleep(0.1)
    yield Etcd(url, proc)
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


@dataclass
class Broker:
    """A real ``python -P -m spindle.broker`` process."""

    node_id: int
    port: int
    config: Path
    log_dirs: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    extra: dict[str, str] = field(default_factory=dict)
    etcd_url: str = ""
    etcd_prefix: str = ""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        seen = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "spindle.broker", "--config", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd="/",
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if f"started on port {self.port}".encode() in self.log_path.read_bytes()[seen:]:
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"broker did not start:\n{self.log_text()[-4000:]}")
            time.sleep(0.05)

    def metadata_dirs(self, topic: str, partition: int = 0) -> list[str]:
        """The directory ids the controller's metadata in etcd records for a partition."""

        async def read() -> list[str]:
            client = EtcdClient([self.etcd_url])
            try:
                store = MetadataStore(client, prefix=self.etcd_prefix)
                await store.load()
                return store.topics[topic].partitions[partition].directories
            finally:
                await client.close()

        return asyncio.run(read())

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: the graceful shutdown path."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def make_broker(
    base: Path,
    etcd: Etcd,
    *,
    dirs: int = 2,
    node_id: int = 1,
    log_dirs: list[str] | None = None,
    extra: dict[str, str] | None = None,
) -> Broker:
    port = free_port()
    paths = log_dirs or [str(base / f"logdir{i}") for i in range(dirs)]
    props = {
        "node.id": str(node_id),
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": ",".join(paths),
        "spindle.etcd.endpoints": etcd.url,
        "spindle.etcd.prefix": f"/test/{uuid.uuid4().hex}",
        **(extra or {}),
    }
    config = base / "server.properties"
    base.mkdir(parents=True, exist_ok=True)
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return Broker(
        node_id,
        port,
        config,
        paths,
        base / "broker.log",
        extra=dict(extra or {}),
        etcd_url=etcd.url,
        etcd_prefix=props["spindle.etcd.prefix"],
    )


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Broker]:
    """One broker with three log dirs, shared by the tests of a module."""
    broker = make_broker(tmp_path_factory.mktemp("broker"), etcd, dirs=3)
    broker.start()
    yield broker
    broker.stop()
