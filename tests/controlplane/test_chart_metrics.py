"""The chart's metrics objects (charts/spindle/templates/metrics.yaml): the operator runs with
``--metrics`` on a named container port, and a Service annotated for Prometheus targets it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from controlplane import LocalControlPlane

CHART = Path(__file__).resolve().parents[2] / "charts" / "spindle"


def render(kube: LocalControlPlane, *values: str) -> list[dict[str, Any]]:
    manifest = kube.helm("template", "r", str(CHART), "--namespace", "ops", *values).stdout
    return [d for d in yaml.safe_load_all(manifest) if d]


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def test_the_metrics_service_targets_the_operators_metrics_port_with_scrape_annotations(
    kube: LocalControlPlane,
) -> None:
    docs = render(kube)
    (service,) = [d for d in docs if d["metadata"]["name"].endswith("-metrics")]
    assert service["kind"] == "Service"
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 8082, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert service["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/path": "/metrics",
        "prometheus.io/port": "8082",
    }
    container = _container(docs)
    assert {"name": "metrics", "containerPort": 8082} in container["ports"]
    assert "--metrics=0.0.0.0:8082" in container["args"]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_a_chosen_port_moves_the_flag_and_the_container_port(kube: LocalControlPlane) -> None:
    docs = render(kube, "--set", "metrics.port=9100")
    container = _container(docs)
    assert "--metrics=0.0.0.0:9100" in container["args"]
    assert {"name": "metrics", "containerPort": 9100} in container["ports"]


def test_disabled_metrics_render_no_service_no_port_and_no_flag(kube: LocalControlPlane) -> None:
    docs = render(kube, "--set", "metrics.enabled=false")
    assert [d for d in docs if d["metadata"]["name"].endswith("-metrics")] == []
    container = _container(docs)
    assert not [a for a in container["args"] if a.startswith("--metrics")]
    assert all(p["name"] != "metrics" for p in container["ports"])
