"""Fixtures for the dashboard: a real operator serving it on the local control plane, the
example cluster in a namespace of its own, ServiceAccount tokens, and one headless Chromium.

The example cluster has no broker processes here (this control plane has no node), so the
tests write volume bytes and proposals through the status subresource, as the operator does:
that sets up the data the dashboard shows; the dashboard itself is the thing under test. The
one proof that needs real data end to end (a real planner's proposal approved in the page
becomes running Reassignments) uses the operator tests' ``world``: a real broker on tmpfs
disks and an operator driving it, here also serving the dashboard.

The operator process, namespaces, kubectl helpers and the world come from
tests/operator/conftest.py (one copy for both folders).
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..operator.conftest import Cluster, OperatorProcess, temporary_namespace, wait_for
from ..operator.conftest import etcd as etcd
from ..operator.conftest import free_port as free_port
from ..operator.conftest import spindle_crds as spindle_crds
from ..operator.conftest import wait_for_fixture as wait_for_fixture
from ..operator.conftest import world as world

ROOT = Path(__file__).resolve().parents[2]
# Screenshots the tests take (gitignored: /.run/); docs/dashboard.png is a committed copy.
SHOTS = ROOT / ".run" / "dashboard-screenshots"
GI = 1024**3


@pytest.fixture(scope="module")
def dashboard_url(spindle_crds: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spindle-operator run --dashboard`` as a real subprocess serving the dash-* namespaces,
    reads open (the pages are viewable without a token; actions still need one)."""
    process = OperatorProcess(
        spindle_crds,
        tmp_path_factory.mktemp("dashboard-operator"),
        "--namespace",
        "dash-*",
        dashboard=free_port(),
    )
    process.start()
    try:
        assert process.dashboard_url
        yield process.dashboard_url
    finally:
        process.stop()
        if os.environ.get("SPINDLE_SHOW_OPERATOR_LOG"):
            print(process.log_tail(8000))


@pytest.fixture(scope="module")
def world_dashboard() -> bool:
    """The world's operator (tests/operator/conftest.py) serves the dashboard here too."""
    return True


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
def demo(dashboard_url: str, spindle_crds: Any) -> Iterator[Cluster]:
    """The README's example cluster (examples/) in a fresh dash-* namespace, its nine
    LogVolumes made by the operator, with bytes and replica counts written into their status."""
    with temporary_namespace(spindle_crds, "dash") as ns:
        ns.kubectl("apply", "-f", str(ROOT / "examples"))
        ns.apply(ACCESS)

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
