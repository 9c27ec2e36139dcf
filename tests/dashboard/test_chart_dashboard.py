"""The chart's dashboard objects (charts/spindle/templates/dashboard.yaml): a Service on the
operator Pod's dashboard port, an Ingress only when asked, and exactly the extra rights the
dashboard needs -- TokenReview, SubjectAccessReview, listing Events where the operator serves."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import yaml
from controlplane import LocalControlPlane

CHART = Path(__file__).resolve().parents[2] / "charts" / "spindle"
REVIEWS = [
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["subjectaccessreviews"],
        "verbs": ["create"],
    },
]
EVENTS = {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]}


def render(kube: LocalControlPlane, *values: str) -> list[dict[str, Any]]:
    manifest = kube.helm("template", "r", str(CHART), "--namespace", "ops", *values).stdout
    return [d for d in yaml.safe_load_all(manifest) if d]


def dashboard_docs(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith("-dashboard")]


def test_the_service_targets_the_operators_dashboard_port_and_the_operator_serves_it(
    kube: LocalControlPlane,
) -> None:
    docs = render(kube, "--set", "dashboard.readAccess=open")
    (service,) = dashboard_docs(docs, "Service")
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": "dashboard", "protocol": "TCP"}
    ]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "dashboard", "containerPort": 8081} in container["ports"]
    assert "--dashboard=0.0.0.0:8081" in container["args"]
    assert "--dashboard-read=open" in container["args"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert dashboard_docs(docs, "Ingress") == []


def test_cluster_wide_the_dashboard_may_review_tokens_and_access_and_list_events(
    kube: LocalControlPlane,
) -> None:
    docs = render(kube)
    (role,) = dashboard_docs(docs, "ClusterRole")
    assert role["rules"] == [*REVIEWS, EVENTS]
    assert dashboard_docs(docs, "Role") == []


def test_namespace_scoped_events_are_listed_only_in_the_watched_namespaces(
    kube: LocalControlPlane,
) -> None:
    docs = render(kube, "--set", "operator.watchNamespaces={team-a,team-b}")
    (role,) = dashboard_docs(docs, "ClusterRole")
    assert role["rules"] == REVIEWS
    roles = dashboard_docs(docs, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    assert all(r["rules"] == [EVENTS] for r in roles)


def test_disabled_dashboard_renders_nothing_and_no_flag(kube: LocalControlPlane) -> None:
    docs = render(kube, "--set", "dashboard.enabled=false")
    assert [d for d in docs if d["metadata"]["name"].endswith("-dashboard")] == []
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [a for a in args if a.startswith("--dashboard")]


def test_the_ingress_with_tls_is_accepted_by_the_api_server_and_marks_cookies_secure(
    kube: LocalControlPlane,
) -> None:
    namespace = f"chart-dash-{uuid.uuid4().hex[:6]}"
    kube.kubectl("create", "namespace", namespace)
    try:
        values = [
            "--set",
            "dashboard.ingress.enabled=true",
            "--set",
            "dashboard.ingress.host=spindle.example.com",
            "--set",
            "dashboard.ingress.tls[0].secretName=spindle-tls",
            "--set",
            "dashboard.ingress.tls[0].hosts[0]=spindle.example.com",
        ]
        manifest = kube.helm("template", "r", str(CHART), "--namespace", namespace, *values).stdout
        docs = [d for d in yaml.safe_load_all(manifest) if d]
        (ingress,) = dashboard_docs(docs, "Ingress")
        (rule,) = ingress["spec"]["rules"]
        assert rule["host"] == "spindle.example.com"
        assert (
            rule["http"]["paths"][0]["backend"]["service"]["name"] == "r-spindle-operator-dashboard"
        )
        (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
        assert (
            "--dashboard-secure-cookies"
            in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        )
        kube.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(ingress))
    finally:
        kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
