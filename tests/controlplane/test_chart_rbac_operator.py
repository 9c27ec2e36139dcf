"""The chart's least-privilege RBAC is enough for the real operator: run ``spindle-operator``
authenticated only as the chart's ServiceAccount (a token the API server issued for it) and let
it reconcile a Broker, then delete it. Any verb the chart forgot shows up as a 403 here."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import LocalControlPlane, stop_process_group

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "spindle"


def wait_until(check: Callable[[], Any], *, what: str, timeout: float = 90.0) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.3)
    return result


def service_account_kubeconfig(kube: LocalControlPlane, namespace: str, name: str) -> str:
    token = kube.kubectl("create", "token", name, "-n", namespace, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(kube.kubeconfig.read_text())
    config = {
        **admin,
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [
            {"name": "sa", "context": {"cluster": admin["clusters"][0]["name"], "user": name}}
        ],
        "current-context": "sa",
    }
    return yaml.safe_dump(config)


@pytest.fixture
def chart_operator(kube: LocalControlPlane, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The chart installed to serve one namespace, and the operator running as its
    ServiceAccount against that namespace. Yields (namespace, operator log)."""
    suffix = uuid.uuid4().hex[:6]
    release, system, served = f"spindle-rbac-{suffix}", f"rbac-sys-{suffix}", f"rbac-demo-{suffix}"
    kube.kubectl("create", "namespace", served)
    kube.helm(
        "install",
        release,
        str(CHART),
        "--namespace",
        system,
        "--create-namespace",
        "--set",
        f"operator.watchNamespaces={{{served}}}",
    )
    kube.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/brokers.spindle.io",
        "crd/logvolumes.spindle.io",
    )
    kubeconfig = tmp_path / "operator.kubeconfig"
    kubeconfig.write_text(service_account_kubeconfig(kube, system, f"{release}-operator"))
    kubeconfig.chmod(0o600)
    log_path = tmp_path / "operator.log"
    env = dict(kube.env, KUBECONFIG=str(kubeconfig), PYTHONUNBUFFERED="1")
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            # -P: the repository root's operator/ folder must not shadow the stdlib module.
            [sys.executable, "-P", "-m", "spindle.operator", "run", "--namespace", served],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp_path,
            start_new_session=True,
        )
    try:
        yield served, log_path
    finally:
        stop_process_group(proc)
        kube.helm("uninstall", release, "--namespace", system, check=False)
        kube.kubectl("delete", "namespace", served, system, "--wait=false", check=False)


def test_operator_running_as_the_charts_service_account_reconciles_a_broker(
    kube: LocalControlPlane, chart_operator: tuple[str, Path]
) -> None:
    namespace, log_path = chart_operator
    broker = next(
        doc
        for doc in yaml.safe_load_all((ROOT / "examples" / "cluster.yaml").read_text())
        if doc and doc["kind"] == "Broker"
    )
    name = broker["metadata"]["name"]
    volumes = [v["id"] for v in broker["spec"]["volumes"]]
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(broker))

    def reconciled() -> dict[str, Any] | None:
        body = json.loads(kube.kubectl("get", "broker", name, "-n", namespace, "-o", "json").stdout)
        status = body.get("status") or {}
        return body if status.get("observedGeneration") == body["metadata"]["generation"] else None

    try:
        wait_until(reconciled, what=f"the operator to reconcile Broker {name}")
        claims = kube.kubectl("get", "pvc", "-n", namespace, "-o", "name").stdout.split()
        assert sorted(claims) == sorted(f"persistentvolumeclaim/data-{v}-{name}" for v in volumes)
        kube.kubectl("get", "pod", name, "-n", namespace)
        logvolumes = kube.kubectl("get", "logvolumes", "-n", namespace, "-o", "name").stdout
        assert len(logvolumes.split()) == len(volumes)

        kube.kubectl("delete", "broker", name, "-n", namespace, "--timeout=90s")
    except BaseException:
        print(log_path.read_text(errors="replace")[-6000:])  # pytest shows it with the failure
        raise
    log = log_path.read_text(errors="replace")
    assert "Forbidden" not in log, log[-6000:]
    assert " 403" not in log, log[-6000:]
