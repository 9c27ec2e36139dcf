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
    values = yaml.safe_load((ROOT / "charts" / "spindle" / "values.yaml").read_text())
    text = script.read_text()
    # The archive the local node imports, loaded as it is, and the chart told its tag.
    assert "-m controlplane.spindle_image" in text
    assert 'kind load image-archive "$ARCHIVE"' in text
    assert '--set image.tag="${IMAGE#spindle:}"' in text
    assert values["image"]["repository"] == "spindle"
