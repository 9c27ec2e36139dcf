"""The real API server establishes the CRDs, accepts every example and rejects mistakes at
``kubectl apply`` with a message that names them (schema, enums and CEL rules)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
CRD_NAMES = ["brokers", "logvolumes", "reassignments", "rebalances"]
Cluster = Any  # tests/operator/conftest.py Cluster (test modules cannot import each other)


def broker(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "brokerId": 1,
        "cluster": "demo",
        "volumes": [{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi"}],
    }
    body.update(spec)
    return {
        "apiVersion": "spindle.io/v1alpha1",
        "kind": "Broker",
        "metadata": {"name": "b"},
        "spec": body,
    }


def reassignment(*partitions: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "spindle.io/v1alpha1",
        "kind": "Reassignment",
        "metadata": {"name": "r"},
        "spec": {"cluster": "demo", "partitions": list(partitions)},
    }


def rebalance(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "spindle.io/v1alpha1",
        "kind": "Rebalance",
        "metadata": {"name": "rb"},
        "spec": {"cluster": "demo", **spec},
    }


INVALID = {
    "duplicate volume ids": (
        broker(volumes=[{"id": 0, "size": "1Gi"}, {"id": 0, "size": "2Gi"}]),
        "spec.volumes: Invalid value: volume ids must be unique",
    ),
    "unknown remediation policy": (
        broker(remediation={"policy": "Sometimes"}),
        'spec.remediation.policy: Unsupported value: "Sometimes": supported values: "Auto", '
        '"Manual", "MoveReplicas", "ReplaceVolume"',
    ),
    "reserved setting in config": (
        broker(config={"log.dirs": "/tmp/x"}),
        "config may not set node.id, broker.id, broker.rack, log.dir or log.dirs",
    ),
    "no volumes": (broker(volumes=[]), "spec.volumes: Invalid value"),
    "negative broker id": (broker(brokerId=-1), "spec.brokerId: Invalid value"),
    "size that is not a quantity": (
        broker(volumes=[{"id": 0, "size": "lots"}]),
        "spec.volumes[0].size",
    ),
    "logDirs shorter than replicas": (
        reassignment({"topic": "t", "partition": 0, "replicas": [1, 2], "logDirs": ["any"]}),
        "logDirs must be absent or have one entry per replica",
    ),
    "relative log dir": (
        reassignment({"topic": "t", "partition": 0, "replicas": [1], "logDirs": ["data-0"]}),
        'each log dir must be "any" or an absolute path',
    ),
    "broker twice in replicas": (
        reassignment({"topic": "t", "partition": 0, "replicas": [1, 2, 1]}),
        "replicas must not list a broker twice",
    ),
    "partition listed twice": (
        reassignment(
            {"topic": "t", "partition": 0, "replicas": [1]},
            {"topic": "t", "partition": 0, "replicas": [2]},
        ),
        "Duplicate value",
    ),
    "remove-brokers without brokers": (
        rebalance(mode="remove-brokers"),
        "modes remove-brokers and add-brokers need brokers",
    ),
    "remove-volumes without volumes": (
        rebalance(mode="remove-volumes"),
        "mode remove-volumes needs volumes",
    ),
    "unknown rebalance mode": (rebalance(mode="shuffle"), 'Unsupported value: "shuffle"'),
    "unknown desired state": (
        {
            "apiVersion": "spindle.io/v1alpha1",
            "kind": "LogVolume",
            "metadata": {"name": "lv"},
            "spec": {"broker": "b", "brokerId": 1, "volumeId": 0, "desiredState": "Gone"},
        },
        'Unsupported value: "Gone"',
    ),
}


def test_crds_become_established(spindle_crds: Any) -> None:
    for plural in CRD_NAMES:
        name = f"{plural}.spindle.io"
        crd = json.loads(spindle_crds.kubectl("get", "crd", name, "-o", "json").stdout)
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True", name
        assert conditions["NamesAccepted"] == "True", name


@pytest.mark.parametrize(
    "path", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: Path(p).stem
)
def test_every_example_is_accepted(namespace: Cluster, path: Path) -> None:
    result = namespace.kubectl("apply", "--dry-run=server", "-f", str(path))
    created = [line for line in result.stdout.splitlines() if "created (server dry run)" in line]
    assert len(created) == len(list(yaml.safe_load_all(path.read_text())))


@pytest.mark.parametrize(("body", "message"), INVALID.values(), ids=list(INVALID))
def test_invalid_object_is_rejected_with_its_message(
    namespace: Cluster, body: dict[str, Any], message: str
) -> None:
    result = namespace.kubectl("create", "-f", "-", input=json.dumps(body), check=False)
    assert result.returncode != 0, f"accepted: {body}"
    assert message in result.stderr


def _replace(cluster: Cluster, body: dict[str, Any]) -> Any:
    return cluster.kubectl("replace", "-f", "-", input=json.dumps(body), check=False)


def test_broker_id_and_volume_ids_are_immutable(namespace: Cluster) -> None:
    namespace.kubectl("create", "-f", "-", input=json.dumps(broker()))
    current = namespace.get("broker", "b")

    moved = json.loads(json.dumps(current))
    moved["spec"]["brokerId"] = 2
    result = _replace(namespace, moved)
    assert result.returncode != 0
    assert "brokerId is immutable" in result.stderr

    renamed = json.loads(json.dumps(current))
    renamed["spec"]["volumes"][1]["id"] = 5
    result = _replace(namespace, renamed)
    assert result.returncode != 0
    assert "volume ids are immutable" in result.stderr


def test_logvolume_identity_is_immutable(namespace: Cluster) -> None:
    body = {
        "apiVersion": "spindle.io/v1alpha1",
        "kind": "LogVolume",
        "metadata": {"name": "lv"},
        "spec": {"broker": "b", "brokerId": 1, "volumeId": 0},
    }
    namespace.kubectl("create", "-f", "-", input=json.dumps(body))
    current = namespace.get("logvolume", "lv")
    assert current["spec"]["desiredState"] == "Active"  # defaulted by the schema
    current["spec"]["volumeId"] = 3
    result = _replace(namespace, current)
    assert result.returncode != 0
    assert "volumeId is immutable" in result.stderr
