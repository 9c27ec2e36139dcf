"""The local control plane is a real Kubernetes: versions, authentication, RBAC, garbage
collection, namespace lifecycle and service-account tokens all behave as a cluster's do."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from controlplane import LocalControlPlane

ROOT = Path(__file__).resolve().parents[2]


def pinned(module_dir: str, module: str) -> str:
    """The version of ``module`` that e2e/controlplane/<module_dir>/go.mod pins."""
    text = (ROOT / "e2e" / "controlplane" / module_dir / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)", text, re.M)
    assert match, f"{module} not pinned in {module_dir}/go.mod"
    return match.group(1)


def eventually(check: Callable[[], bool], *, what: str, timeout: float = 60.0) -> None:
    """Poll ``check`` until true; fail naming ``what`` if it never becomes true."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.3)


@pytest.fixture
def namespace(kube: LocalControlPlane) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", name)
    eventually(
        lambda: kube.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0,
        what=f"the default service account in {name}",
    )
    return name


def test_server_and_kubectl_report_the_pinned_kubernetes_release(kube: LocalControlPlane) -> None:
    versions = json.loads(kube.kubectl("version", "-o", "json").stdout)
    release = pinned("kubernetes", "k8s.io/kubernetes")
    assert versions["serverVersion"]["gitVersion"] == release
    assert versions["clientVersion"]["gitVersion"] == release
    major, minor = release.removeprefix("v").split(".")[:2]
    assert (versions["serverVersion"]["major"], versions["serverVersion"]["minor"]) == (
        major,
        minor,
    )


def test_etcd_and_helm_report_the_pinned_releases(kube: LocalControlPlane) -> None:
    etcd = subprocess.run(
        [str(kube.binaries.etcd), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert f"etcd Version: {pinned('etcd', 'go.etcd.io/etcd/server/v3').removeprefix('v')}" in etcd
    helm = kube.helm("version", "--template", "{{ .Version }}").stdout.strip()
    assert helm == pinned("helm", "helm.sh/helm/v3")


def test_admin_kubeconfig_authenticates_as_system_masters(kube: LocalControlPlane) -> None:
    whoami = json.loads(kube.kubectl("auth", "whoami", "-o", "json").stdout)
    assert "system:masters" in whoami["status"]["userInfo"]["groups"]
    assert kube.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"


def test_rbac_denies_a_service_account_without_bindings(
    kube: LocalControlPlane, namespace: str
) -> None:
    user = f"system:serviceaccount:{namespace}:default"
    denied = kube.kubectl("get", "pods", "-n", namespace, "--as", user, check=False)
    assert denied.returncode != 0
    assert "Forbidden" in denied.stderr
    kube.kubectl(
        "create",
        "rolebinding",
        "view",
        "--clusterrole=view",
        f"--serviceaccount={namespace}:default",
        "-n",
        namespace,
    )
    assert (
        kube.kubectl("auth", "can-i", "list", "pods", "-n", namespace, "--as", user).stdout.strip()
        == "yes"
    )


def test_garbage_collector_deletes_a_configmap_whose_owner_is_deleted(
    kube: LocalControlPlane, namespace: str
) -> None:
    kube.kubectl("create", "configmap", "owner", "-n", namespace)
    owner_uid = kube.kubectl(
        "get", "configmap", "owner", "-n", namespace, "-o", "jsonpath={.metadata.uid}"
    ).stdout
    owned = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "owned",
            "namespace": namespace,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}
            ],
        },
        "data": {"k": "v"},
    }
    kube.kubectl("apply", "-f", "-", input=json.dumps(owned))
    kube.kubectl("create", "configmap", "bystander", "-n", namespace)

    kube.kubectl("delete", "configmap", "owner", "-n", namespace)

    eventually(
        lambda: (
            "NotFound"
            in kube.kubectl("get", "configmap", "owned", "-n", namespace, check=False).stderr
        ),
        what="the garbage collector to delete the owned ConfigMap",
    )
    kube.kubectl("get", "configmap", "bystander", "-n", namespace)


def test_namespace_deletion_finishes_and_removes_its_contents(kube: LocalControlPlane) -> None:
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", name)
    kube.kubectl("create", "configmap", "content", "-n", name)
    kube.kubectl("delete", "namespace", name, "--wait=true", "--timeout=90s")
    gone = kube.kubectl("get", "namespace", name, check=False)
    assert gone.returncode != 0
    assert "NotFound" in gone.stderr


def test_service_account_tokens_are_issued_and_verified(
    kube: LocalControlPlane, namespace: str
) -> None:
    token = kube.kubectl("create", "token", "default", "-n", namespace).stdout.strip()
    review = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }
    result = json.loads(
        kube.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(review)).stdout
    )
    assert result["status"]["authenticated"] is True
    assert result["status"]["user"]["username"] == f"system:serviceaccount:{namespace}:default"


def test_volume_commands_take_pv_and_mode_after_the_state_dir_as_the_script_passes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """scripts/controlplane.sh runs ``controlplane CMD --dir DIR "$@"``: the positional PV MODE
    come after an option, which plain parse_args refused as unrecognized arguments."""
    from controlplane.__main__ import main

    assert main(["fail-volume", "--dir", str(tmp_path), "pvc-1", "io-error"]) == 1
    assert "no node is running" in capsys.readouterr().err
