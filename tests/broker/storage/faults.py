"""Real file-system faults for storage tests: tmpfs mounts, snapshots of log bytes, a child."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from controlplane.volumes import remount_read_only

CHILD = str(Path(__file__).with_name("storage_child.py"))

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounts tmpfs and changes owners: needs root (CI runs as root)"
)


@contextmanager
def tmpfs(path: str, *, size: str = "16m") -> Iterator[str]:
    """A fresh tmpfs at ``path``; unmounted on exit even if the test failed."""
    os.makedirs(path, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path], check=True
    )
    try:
        yield path
    finally:
        result = subprocess.run(["umount", path], capture_output=True, text=True)
        if result.returncode != 0:
            subprocess.run(["umount", "-l", path], check=False)


def remount_ro(path: str) -> None:
    remount_read_only(path)


def log_bytes(dirs: list[str]) -> dict[str, bytes]:
    """Content of every segment file under ``dirs``."""
    out: dict[str, bytes] = {}
    for d in dirs:
        for root, _, files in os.walk(d):
            for name in files:
                if name.endswith(".log"):
                    path = os.path.join(root, name)
                    out[path] = Path(path).read_bytes()
    return out


def assert_bytes_kept(before: dict[str, bytes], dirs: list[str]) -> None:
    """Every segment byte that existed before is still there, unchanged (appends may follow)."""
    after = log_bytes(dirs)
    for path, content in before.items():
        assert path in after, f"{path} disappeared"
        assert after[path][: len(content)] == content, f"{path} changed"


# The capabilities that let root ignore file modes: without them root is an ordinary owner.
DAC_CAPS = "-dac_override,-dac_read_search"


class Child:
    """``storage_child.py`` in a subprocess; ``call`` sends one command, returns its answer.

    ``obeys_file_modes``: the child runs as root with CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH
    dropped (from the bounding and inheritable sets, so exec cannot give them back), so a
    directory the test makes mode 0000 is refused to it as to any process. It stays root, so it
    still reads the checkout and its virtual environment wherever they are (a clone under
    ``/root``, mode 0700, is out of reach of another user such as ``nobody``)."""

    def __init__(self, config: dict[str, Any], *, obeys_file_modes: bool = False) -> None:
        argv = [sys.executable, CHILD, json.dumps(config)]
        if obeys_file_modes:
            argv = ["setpriv", f"--inh-caps={DAC_CAPS}", f"--bounding-set={DAC_CAPS}", *argv]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/"
        )

    def send(self, cmd: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"child exited ({self.proc.wait()}) without answering")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def call(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self.send(cmd)
        return self.receive()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
