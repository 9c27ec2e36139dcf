"""The CRD files themselves: one per kind, described field by field, in the spindle category."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRDS = sorted((ROOT / "crds").glob("*.yaml"))
KINDS = {"Broker", "LogVolume", "Reassignment", "Rebalance"}


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def fields(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        if path == "" and name == "metadata":
            continue  # the API server allows only type (and name rules) on metadata
        yield from fields(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from fields(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from fields(schema["additionalProperties"], f"{path}{{}}")


def test_one_crd_per_kind_in_group_spindle_io() -> None:
    docs = [load(p) for p in CRDS]
    assert {d["spec"]["names"]["kind"] for d in docs} == KINDS
    for path, doc in zip(CRDS, docs, strict=True):
        names = doc["spec"]["names"]
        assert path.name == f"{names['singular']}.yaml"
        assert doc["metadata"]["name"] == f"{names['plural']}.spindle.io"
        assert doc["spec"]["group"] == "spindle.io"
        assert "spindle" in names["categories"]
        assert names["shortNames"]


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.stem)
def test_every_field_has_a_description(path: Path) -> None:
    (version,) = load(path)["spec"]["versions"]
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]
    missing = [p or "<root>" for p, s in fields(schema, "") if not s.get("description")]
    assert missing == []


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.stem)
def test_printer_columns_point_at_declared_fields(path: Path) -> None:
    (version,) = load(path)["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    for column in version["additionalPrinterColumns"]:
        node = schema
        for part in column["jsonPath"].strip(".").split("."):
            if part in ("metadata",):
                break
            node = node["properties"][part]
        else:
            assert node.get("type") in ("string", "integer", "boolean", None), column["name"]


def test_examples_cover_every_kind_and_a_three_broker_three_volume_cluster() -> None:
    docs = [
        d
        for p in sorted((ROOT / "examples").glob("*.yaml"))
        for d in yaml.safe_load_all(p.read_text())
    ]
    assert {d["kind"] for d in docs} == KINDS
    brokers = [d for d in docs if d["kind"] == "Broker"]
    assert len(brokers) == 3
    assert all(len(b["spec"]["volumes"]) == 3 for b in brokers)
    assert len({b["spec"]["brokerId"] for b in brokers}) == 3
