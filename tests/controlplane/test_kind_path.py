"""The kind path cannot run here (no container engine), so what can be checked without one is:
the cluster config is what kind reads, the script parses, and the image it builds and loads is
the image the chart deploys."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
KIND = ROOT / "e2e" / "kind"


def test_kind_config_has_a_control_plane_and_one_worker_per_example_broker() -> None:
    config = yaml.safe_load((KIND / "cluster.yaml").read_text())
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    roles = [node["role"] for node in config["nodes"]]
    brokers = [
        doc
        for doc in yaml.safe_load_all((ROOT / "examples" / "cluster.yaml").read_text())
        if doc and doc["kind"] == "Broker"
    ]
    assert roles.count("control-plane") == 1
    assert roles.count("worker") == len(brokers)


def test_kind_script_is_valid_bash_and_loads_the_image_the_chart_deploys() -> None:
    script = KIND / "up.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    chart = yaml.safe_load((ROOT / "charts" / "spindle" / "Chart.yaml").read_text())
    values = yaml.safe_load((ROOT / "charts" / "spindle" / "values.yaml").read_text())
    text = script.read_text()
    # Evaluate the script's own IMAGE line, as the script does.
    (image_line,) = [line for line in text.splitlines() if line.startswith("IMAGE=")]
    image = subprocess.run(
        ["bash", "-c", f'ROOT="$1"; {image_line}; printf %s "$IMAGE"', "-", str(ROOT)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert values["image"]["tag"] == ""  # so the chart deploys appVersion
    assert image == f"{values['image']['repository']}:{chart['appVersion']}"
    assert "kind load docker-image" in text
