"""Fixtures shared by every test folder.

``kube``: one real local Kubernetes control plane (etcd, kube-apiserver with RBAC,
kube-controller-manager) per test session, started only when a test asks for it. Its binaries
are built from Go modules by scripts/install.d/10-controlplane.sh (``./dev sync``/``./dev test``
run it); when they are missing the requesting tests fail with that instruction rather than skip,
since CI must prove what they test.

Under CI (``CI`` set, as ``.ci/run`` is run) a skipped test fails the run: CI runs as root on a
machine that has everything, so a skip there means something the issues ask to prove went unproven.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from controlplane import Binaries, ControlPlaneError, LocalControlPlane


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    """A running control plane: ``.kubeconfig``, ``.env``, ``.kubectl(...)``, ``.helm(...)``,
    ``.server``. Tests share it, so each works in its own namespace or with unique names."""
    try:
        binaries = Binaries.find()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    plane = LocalControlPlane(tmp_path_factory.mktemp("controlplane"), binaries=binaries)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """In CI, turn a skip into a failure that keeps the skip's reason."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, which must prove it: {reason}"
