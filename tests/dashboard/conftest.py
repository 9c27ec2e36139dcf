"""Fixtures for the dashboard: a real operator serving it on the local control plane, the
example cluster in a namespace of its own, ServiceAccount tokens, and one headless Chromium.

The operator does not fill volume bytes or proposals yet (the volume and rebalance issues do),
so the tests write those through the status subresource, as the operator will: that sets up
the data the dashboard shows; the dashboard itself is the thing under test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
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
# Screenshots the tests take (gitignored: /.run/); docs/dashboard.png is a committed copy.
SHOTS = ROOT / ".run" / "dashboard-screenshots"
CRD_NAMES = [
    "brokers.spindle.io",
    "logvolumes.spindle.io",
    "reassignments.spindle.io",
    "rebalances.spindle.io",
]
GI = 1024**3
T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], *, what: str, timeout: float = 60.0) -> T:
    """Poll until ``probe`` returns something truthy; a deadline, not a speed assertion."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return 0


class Namespace:
    """kubectl in one namespace."""

    def __init__(self, kube: Any, name: str) -> None:
        self.kube = kube
        self.name = name

    def kubectl(self, *args: str, input: str | None = None) -> str:
        result = self.kube.kubectl("-n", self.name, *args, input=input)
        return str(result.stdout)

    def get(self, kind: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.kubectl("get", kind, name, "-o", "json"))
        return found

    def items(self, kind: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(self.kubectl("get", kind, "-o", "json"))["items"]
        return items

    def patch_status(self, kind: str, name: str, status: dict[str, Any]) -> None:
        """Write status as the operator does (merge patch on the status subresource)."""
        self.kubectl(
            "patch",
            kind,
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": status}),
        )

    def token(self, service_account: str) -> str:
        """A bound token from the TokenRequest API (``kubectl create token``)."""
        return self.kubectl("create", "token", service_account, "--duration=1h").strip()


@pytest.fixture(scope="session")
def spindle_crds(kube: Any) -> Any:
    kube.kubectl("apply", "-f", str(ROOT / "crds"))
    kube.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in CRD_NAMES]
    )
    return kube


@pytest.fixture(scope="module")
def dashboard_url(spindle_crds: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spindle-operator run --dashboard`` as a real subprocess serving the dash-* namespaces,
    reads open (the pages are viewable without a token; actions still need one)."""
    workdir = tmp_path_factory.mktemp("dashboard-operator")
    log_path = workdir / "operator.log"
    port = free_port()
    liveness = f"http://127.0.0.1:{free_port()}/healthz"
    env = dict(spindle_crds.env, PYTHONUNBUFFERED="1")
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "spindle.operator",
                "run",
                "--namespace",
                "dash-*",
                "--liveness",
                liveness,
                "--dashboard",
                f"127.0.0.1:{port}",
                "--dashboard-read",
                "open",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=workdir,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while http_status(liveness) != 200 or http_status(url + "/api/v1/overview") != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"operator/dashboard did not start:\n{log_path.read_text()[-4000:]}")
            time.sleep(0.25)
        yield url
    finally:
        stop_process_group(proc)
        if os.environ.get("SPINDLE_SHOW_OPERATOR_LOG"):
            print(log_path.read_text()[-8000:])


ACCESS = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: dash-operator-user}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: dash-viewer}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: spindle-approver}
rules:
  - apiGroups: [spindle.io]
    resources: [rebalances, reassignments, logvolumes]
    verbs: [get, list, watch, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: spindle-approver}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: spindle-approver}
subjects:
  - {kind: ServiceAccount, name: dash-operator-user}
"""


def _volume_status(name: str, used_gib: float, replicas: int) -> dict[str, Any]:
    used = int(used_gib * GI)
    return {
        "state": STATES.get(name, "Active"),
        "usedBytes": used,
        "usableBytes": GI - used,
        "totalBytes": GI,
        "replicaCount": replicas,
        "directoryId": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
    }


# Usage the brokers would report: (used GiB, replicas) per volume, by LogVolume name.
USAGE = {
    f"demo-{b}-data-{v}": (round(0.05 + 0.25 * b + 0.1 * v, 2), 4 + 2 * b + v)
    for b in range(3)
    for v in range(3)
}


# examples/logvolume.yaml cordons demo-2's third disk; the broker would report it Cordoned.
STATES = {"demo-2-data-2": "Cordoned"}


@pytest.fixture(scope="module")
def demo(dashboard_url: str, spindle_crds: Any) -> Iterator[Namespace]:
    """The README's example cluster (examples/) in a fresh dash-* namespace, its nine
    LogVolumes made by the operator, with bytes and replica counts written into their status."""
    ns = Namespace(spindle_crds, f"dash-{uuid.uuid4().hex[:8]}")
    spindle_crds.kubectl("create", "namespace", ns.name)
    try:
        ns.kubectl("apply", "-f", str(ROOT / "examples"))
        ns.kubectl("apply", "-f", "-", input=ACCESS)

        def settled() -> bool:
            volumes = ns.items("logvolumes")
            brokers = ns.items("brokers")
            return (
                len(volumes) == 9
                and all((v.get("status") or {}).get("pvcName") for v in volumes)
                and all(
                    (b.get("status") or {}).get("observedGeneration") == b["metadata"]["generation"]
                    for b in brokers
                )
            )

        wait_for(settled, what="the operator to make and report the nine LogVolumes", timeout=120)
        for name, (used, replicas) in USAGE.items():
            ns.patch_status("logvolume", name, _volume_status(name, used, replicas))
        yield ns
    finally:
        spindle_crds.kubectl("delete", "namespace", ns.name, "--wait=false", check=False)


@pytest.fixture(scope="session")
def axe() -> str:
    """axe-core's source as scripts/install.d/40-browser.sh installed it (version pinned there)."""
    script = (ROOT / "scripts/install.d/40-browser.sh").read_text()
    match = re.search(r"^AXE_VERSION=(\S+)$", script, re.M)
    assert match, "AXE_VERSION not found in 40-browser.sh"
    cache = Path(os.environ.get("SPINDLE_CACHE", Path.home() / ".cache/spindle"))
    path = cache / "npm" / f"axe-core-{match.group(1)}" / "node_modules/axe-core/axe.min.js"
    if not path.is_file():
        pytest.fail(
            f"{path} missing: run ./dev sync (scripts/install.d/40-browser.sh)", pytrace=False
        )
    return path.read_text()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Debian chromium for the module, driven by Playwright (never downloaded)."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail(
            "chromium missing: run ./dev sync (scripts/install.d/40-browser.sh)", pytrace=False
        )
    with sync_playwright() as play:
        chromium = play.chromium.launch(executable_path=executable, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def shots() -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS


@pytest.fixture(scope="session")
def usage() -> dict[str, tuple[float, int]]:
    """The (used GiB, replica count) written into each example LogVolume's status."""
    return dict(USAGE)


@pytest.fixture(scope="session")
def states() -> dict[str, str]:
    """The state written into each example LogVolume's status."""
    return {name: STATES.get(name, "Active") for name in USAGE}


@pytest.fixture(name="wait_for", scope="session")
def wait_for_fixture() -> Callable[..., Any]:
    return wait_for
