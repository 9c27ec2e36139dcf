"""Fixtures for operator tests against the real API server (the session's ``kube``)."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from controlplane import stop_process_group

ROOT = Path(__file__).resolve().parents[2]
CRD_NAMES = [
    "brokers.spindle.io",
    "logvolumes.spindle.io",
    "reassignments.spindle.io",
    "rebalances.spindle.io",
]
T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], *, what: str, timeout: float = 60.0) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` otherwise.
    A deadline on waiting, not an assertion about speed."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


class Cluster:
    """kubectl helpers in one namespace."""

    def __init__(self, kube: Any, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> Any:
        return self.kube.kubectl("-n", self.namespace, *args, input=input, check=check)

    def get(self, kind: str, name: str | None = None) -> Any:
        args = ["get", kind, *([name] if name else []), "-o", "json"]
        result = self.kubectl(*args, check=False)
        if result.returncode != 0:
            if "NotFound" in result.stderr:
                return None
            raise AssertionError(result.stderr)
        return json.loads(result.stdout)

    def names(self, kind: str) -> set[str]:
        return {item["metadata"]["name"] for item in self.get(kind)["items"]}

    def apply(self, manifest: str) -> Any:
        return self.kubectl("apply", "-f", "-", input=manifest)

    def events(self, reason: str) -> list[dict[str, Any]]:
        items = self.get("events")["items"]
        return [e for e in items if e.get("reason") == reason]


@pytest.fixture(scope="session")
def spindle_crds(kube: Any) -> Any:
    """The CRDs from crds/, applied and Established."""
    kube.kubectl("apply", "-f", str(ROOT / "crds"))
    kube.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in CRD_NAMES]
    )
    return kube


@contextlib.contextmanager
def temporary_namespace(kube: Any, prefix: str) -> Iterator[Cluster]:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", name)
    try:
        yield Cluster(kube, name)
    finally:
        kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def namespace(spindle_crds: Any) -> Iterator[Cluster]:
    """A fresh namespace served by the session's operator (when a test starts it)."""
    with temporary_namespace(spindle_crds, "op") as cluster:
        yield cluster


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="session")
def operator(spindle_crds: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``python -m spindle.operator run`` as a real subprocess against the real API server.
    Yields the path of its log (attached to failures by the tests that read it)."""
    workdir = tmp_path_factory.mktemp("operator")
    log_path = workdir / "operator.log"
    url = f"http://127.0.0.1:{free_port()}/healthz"
    env = dict(spindle_crds.env)
    env["PYTHONUNBUFFERED"] = "1"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "spindle.operator",
                "run",
                # A namespace pattern: this operator serves the tests' op-* namespaces; a test
                # that runs another operator instance uses a namespace outside it.
                "--namespace",
                "op-*",
                "--liveness",
                url,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            # Not the repository root: ``-m`` puts the cwd first on sys.path, where the
            # ``operator/`` folder would shadow the standard library's ``operator``.
            cwd=workdir,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while not healthy(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"operator did not become healthy:\n{log_path.read_text()[-4000:]}")
            time.sleep(0.25)
        # Healthy comes before kopf has listed the namespaces; a namespace the tests create
        # from here on is still served (spindle.operator.kopf_patches closes kopf's gap).
        yield log_path
    finally:
        stop_process_group(proc)


@pytest.fixture(name="wait_for")
def wait_for_fixture() -> Callable[..., Any]:
    return wait_for


@pytest.fixture(name="helpers")
def helpers_fixture() -> dict[str, Any]:
    """conftest helpers for test modules (which cannot import each other in importlib mode)."""
    return {
        "free_port": free_port,
        "healthy": healthy,
        "temporary_namespace": temporary_namespace,
    }
