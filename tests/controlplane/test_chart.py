"""charts/spindle: lint-clean, accepted by the real API server, installs the operator with
least-privilege RBAC and establishes the CRDs; uninstall removes what it installed."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from controlplane import Binaries, LocalControlPlane

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "spindle"
CRD_NAMES = [
    "brokers.spindle.io",
    "logvolumes.spindle.io",
    "reassignments.spindle.io",
    "rebalances.spindle.io",
]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def helm_template(kube: LocalControlPlane, release: str, namespace: str, *args: str) -> str:
    return kube.helm(
        "template", release, str(CHART), "--namespace", namespace, "--include-crds", *args
    ).stdout


def test_chart_crds_are_identical_to_the_crds_folder() -> None:
    source = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert source, "crds/ holds no CRD"
    assert chart == source, "charts/spindle/crds differs from crds/: run scripts/sync-chart-crds.sh"


def test_helm_lint_strict_passes() -> None:
    helm = Binaries.find().helm
    for values in ([], ["--set", "operator.watchNamespaces={a,b}"]):
        lint = subprocess.run(
            [str(helm), "lint", "--strict", str(CHART), *values], capture_output=True, text=True
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr
        assert "1 chart(s) linted, 0 chart(s) failed" in lint.stdout


def test_rendered_chart_is_accepted_by_the_api_server(kube: LocalControlPlane) -> None:
    namespace, watched = unique("chart"), unique("watched")
    for ns in (namespace, watched):
        kube.kubectl("create", "namespace", ns)
    for values in ([], ["--set", f"operator.watchNamespaces={{{watched}}}"]):
        manifest = helm_template(kube, "dry", namespace, *values)
        kinds = {doc["kind"] for doc in yaml.safe_load_all(manifest) if doc}
        assert {"CustomResourceDefinition", "Deployment", "ServiceAccount"} <= kinds
        applied = kube.kubectl("apply", "--dry-run=server", "-f", "-", input=manifest)
        assert "deployment.apps/dry-spindle-operator created (server dry run)" in applied.stdout


def test_namespace_scope_grants_roles_only_in_the_watched_namespaces(
    kube: LocalControlPlane,
) -> None:
    manifest = helm_template(
        kube, "scoped", "ops", "--set", "operator.watchNamespaces={team-a,team-b}"
    )
    # The dashboard's own rights are checked in tests/dashboard/test_chart_dashboard.py, the
    # planner's (spindle-planner, in the watched namespaces too) below.
    docs = [
        doc
        for doc in yaml.safe_load_all(manifest)
        if doc
        and not doc["metadata"]["name"].endswith("-dashboard")
        and doc["metadata"]["name"] != "spindle-planner"
    ]
    roles = sorted((d["kind"], d["metadata"]["namespace"]) for d in docs if d["kind"] == "Role")
    assert roles == [("Role", "team-a"), ("Role", "team-b")]
    cluster_roles = [d for d in docs if d["kind"] == "ClusterRole"]
    # Only the discovery role is cluster-wide: it reads CRDs and namespaces, and PVs and nodes
    # (LogVolume status: a claim's PV Failed, the broker's node gone), nothing else.
    assert [r["metadata"]["name"] for r in cluster_roles] == ["scoped-spindle-operator-discovery"]
    assert cluster_roles[0]["rules"] == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["list", "watch"],
        },
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
    ]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args
    assert "--namespace=team-b" in args
    assert "--all-namespaces" not in args


def test_rbac_rules_enumerate_verbs_and_resources() -> None:
    helm = Binaries.find().helm
    manifest = subprocess.run(
        [str(helm), "template", "r", str(CHART)], capture_output=True, text=True, check=True
    ).stdout
    for doc in yaml.safe_load_all(manifest):
        if doc and doc["kind"] in ("ClusterRole", "Role"):
            for rule in doc["rules"]:
                assert "*" not in rule["verbs"], rule
                assert "*" not in rule["resources"], rule
                assert "*" not in rule["apiGroups"], rule


@pytest.fixture
def installed(kube: LocalControlPlane) -> tuple[str, str]:
    release, namespace = unique("spindle"), unique("ops")
    kube.helm("install", release, str(CHART), "--namespace", namespace, "--create-namespace")
    return release, namespace


def test_helm_install_creates_the_operator_and_establishes_the_crds(
    kube: LocalControlPlane, installed: tuple[str, str]
) -> None:
    release, namespace = installed
    deployment = json.loads(
        kube.kubectl(
            "get", "deployment", f"{release}-operator", "-n", namespace, "-o", "json"
        ).stdout
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "spindle:0.1.0"
    assert container["args"][:3] == ["spindle-operator", "run", "--all-namespaces"]
    kube.kubectl("get", "serviceaccount", f"{release}-operator", "-n", namespace)
    kube.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        *[f"crd/{name}" for name in CRD_NAMES],
    )
    kube.helm("uninstall", release, "--namespace", namespace, "--wait")


def test_operator_service_account_may_do_its_job_and_nothing_more(
    kube: LocalControlPlane, installed: tuple[str, str]
) -> None:
    release, namespace = installed
    sa = f"system:serviceaccount:{namespace}:{release}-operator"

    def can(verb: str, resource: str, ns: str | None = "anywhere") -> bool:
        scope = ["-n", ns] if ns else []
        out = kube.kubectl("auth", "can-i", verb, resource, *scope, "--as", sa, check=False)
        return out.stdout.strip() == "yes"

    allowed = [
        ("watch", "brokers.spindle.io"),
        ("patch", "brokers.spindle.io", "status"),
        ("create", "logvolumes.spindle.io"),
        ("delete", "logvolumes.spindle.io"),
        ("create", "pods"),
        ("patch", "persistentvolumeclaims"),
        ("delete", "configmaps"),
        ("create", "services"),
        ("create", "events"),
        ("create", "reassignments.spindle.io"),  # a Rebalance's batches
        ("create", "jobs.batch"),  # a Rebalance's planner
        ("delete", "jobs.batch"),
        ("get", "serviceaccounts"),  # the planner's, to say when it is missing
    ]
    for verb, resource, *sub in allowed:
        target = f"{resource}/{sub[0]}" if sub else resource
        assert can(verb, target), f"operator may not {verb} {target}"
    assert can("watch", "customresourcedefinitions.apiextensions.k8s.io", None)
    denied = [
        ("get", "secrets"),
        ("create", "brokers.spindle.io"),
        ("delete", "brokers.spindle.io"),
        ("update", "pods"),
        ("create", "deployments.apps"),
        ("create", "rolebindings.rbac.authorization.k8s.io"),
        ("create", "serviceaccounts"),
        ("create", "serviceaccounts/token"),
    ]
    for verb, resource in denied:
        assert not can(verb, resource), f"operator may {verb} {resource}"
    assert not can("delete", "nodes", None)
    assert not can("create", "customresourcedefinitions.apiextensions.k8s.io", None)
    kube.helm("uninstall", release, "--namespace", namespace, "--wait")


def test_helm_uninstall_removes_the_operator_and_keeps_the_crds(
    kube: LocalControlPlane, installed: tuple[str, str]
) -> None:
    release, namespace = installed
    kube.helm("uninstall", release, "--namespace", namespace, "--wait")
    for kind in ("deployment", "serviceaccount"):
        gone = kube.kubectl("get", kind, f"{release}-operator", "-n", namespace, check=False)
        assert "NotFound" in gone.stderr, gone
    for role in (f"{release}-operator", f"{release}-operator-discovery"):
        gone = kube.kubectl("get", "clusterrole", role, check=False)
        assert "NotFound" in gone.stderr, gone
    assert kube.helm("list", "-n", namespace, "-q").stdout.strip() == ""
    # Helm never deletes a chart's crds/: deleting them would delete every Broker and, through
    # owner references, the PVCs holding their data.
    kube.kubectl("get", "crd", *CRD_NAMES)


PLANNER_RULES = yaml.safe_load((CHART / "files" / "planner-rules.yaml").read_text())


def test_planner_account_role_and_binding_render_in_each_planner_namespace_from_one_rules_file(
    kube: LocalControlPlane,
) -> None:
    from spindle.operator.specs.planner import PLANNER_ACCOUNT

    def planner_docs(*values: str) -> list[dict[str, object]]:
        manifest = helm_template(kube, "r", "ops", *values)
        return [
            doc for doc in yaml.safe_load_all(manifest)
            if doc and doc["metadata"]["name"] == PLANNER_ACCOUNT
        ]  # fmt: skip

    docs = planner_docs("--set", "planner.namespaces={team-a,team-b}")
    assert sorted((d["kind"], d["metadata"]["namespace"]) for d in docs) == [
        (kind, ns)
        for kind in ("Role", "RoleBinding", "ServiceAccount")
        for ns in ("team-a", "team-b")
    ]
    for doc in docs:
        if doc["kind"] == "Role":
            assert doc["rules"] == PLANNER_RULES
        if doc["kind"] == "RoleBinding":
            assert doc["roleRef"] == {
                "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PLANNER_ACCOUNT
            }  # fmt: skip
            assert doc["subjects"] == [
                {"kind": "ServiceAccount", "name": PLANNER_ACCOUNT,
                 "namespace": doc["metadata"]["namespace"]}
            ]  # fmt: skip
    # Without planner.namespaces: the namespaces the operator serves, or none when it serves
    # every namespace (it cannot know them; the Rebalance's condition says what to set).
    watched = planner_docs("--set", "operator.watchNamespaces={team-c}")
    assert {d["metadata"]["namespace"] for d in watched} == {"team-c"}
    assert planner_docs() == []


def test_the_planner_account_may_run_spark_in_its_namespace_and_nothing_else(
    kube: LocalControlPlane,
) -> None:
    release, namespace, jobs = unique("spindle"), unique("ops"), unique("jobs")
    kube.kubectl("create", "namespace", jobs)
    kube.helm(
        "install", release, str(CHART), "--namespace", namespace, "--create-namespace",
        "--set", f"planner.namespaces={{{jobs}}}",
    )  # fmt: skip
    sa = f"system:serviceaccount:{jobs}:spindle-planner"

    def can(verb: str, resource: str, ns: str) -> bool:
        out = kube.kubectl("auth", "can-i", verb, resource, "-n", ns, "--as", sa, check=False)
        return out.stdout.strip() == "yes"

    for verb, resource in [("create", "pods"), ("delete", "pods"), ("create", "services"),
                           ("update", "configmaps"), ("deletecollection", "persistentvolumeclaims")]:  # fmt: skip
        assert can(verb, resource, jobs), f"planner may not {verb} {resource}"
    for verb, resource in [("get", "secrets"), ("create", "rolebindings.rbac.authorization.k8s.io"),
                           ("patch", "rebalances.spindle.io"), ("create", "jobs.batch")]:  # fmt: skip
        assert not can(verb, resource, jobs), f"planner may {verb} {resource}"
    assert not can("create", "pods", namespace)
    kube.helm("uninstall", release, "--namespace", namespace, "--wait")
    gone = kube.kubectl("get", "serviceaccount", "spindle-planner", "-n", jobs, check=False)
    assert "NotFound" in gone.stderr, gone
    kube.kubectl("delete", "namespace", jobs, "--wait=false")
