"""meta.properties and the start-up rules of KIP-858."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from spindle.broker.common.kafka_uuid import from_kafka_str, is_reserved, to_kafka_str
from spindle.broker.storage import LogManager
from spindle.broker.storage.logdir import (
    MetaProperties,
    StorageStartupError,
    complete_ensemble,
    format_meta,
    parse_meta,
    read_meta,
)

from .conftest import make_settings


def test_missing_directory_ids_are_generated_unique_and_never_reserved() -> None:
    metas = {f"/d{i}": None for i in range(50)}
    out = complete_ensemble(metas, cluster_id="c", node_id=3)
    ids = [m.directory_id for m in out.values()]
    assert len(set(ids)) == 50
    assert all(i is not None and not is_reserved(i) for i in ids)
    assert all(m.cluster_id == "c" and m.node_id == 3 for m in out.values())


def test_reserved_ids_are_the_low_hundred_with_zero_high_bits() -> None:
    assert is_reserved(uuid.UUID(int=0))
    assert is_reserved(uuid.UUID(int=99))
    assert not is_reserved(uuid.UUID(int=100))
    assert not is_reserved(uuid.UUID(int=1 << 64))


def test_reserved_directory_id_in_meta_properties_refuses_start() -> None:
    text = f"version=1\ncluster.id=c\nnode.id=1\ndirectory.id={to_kafka_str(uuid.UUID(int=1))}\n"
    with pytest.raises(StorageStartupError, match="reserved"):
        parse_meta(text, path="/d/meta.properties")


def test_two_directories_with_one_id_refuse_start_naming_both() -> None:
    same = uuid.uuid4()
    metas = {
        "/a": MetaProperties("c", 1, same),
        "/b": MetaProperties("c", 1, same),
    }
    with pytest.raises(StorageStartupError, match=r"/a and /b have the same directory.id"):
        complete_ensemble(metas, cluster_id="c", node_id=1)


@pytest.mark.parametrize(
    ("b_meta", "what"),
    [(MetaProperties("other", 1, None), "cluster.id"), (MetaProperties("c", 2, None), "node.id")],
)
def test_directories_that_disagree_refuse_start_naming_both(
    b_meta: MetaProperties, what: str
) -> None:
    metas = {"/a": MetaProperties("c", 1, uuid.uuid4()), "/b": b_meta}
    with pytest.raises(StorageStartupError, match=what) as info:
        complete_ensemble(metas, cluster_id="c", node_id=1)
    assert "/a" in str(info.value)
    assert "/b" in str(info.value)


def test_directory_of_another_cluster_refuses_start() -> None:
    with pytest.raises(StorageStartupError, match="belongs to cluster 'x'"):
        complete_ensemble({"/a": MetaProperties("x", 1, None)}, cluster_id="c", node_id=1)


def test_meta_properties_round_trip_in_kafka_format(tmp_path: Path) -> None:
    dir_id = uuid.uuid4()
    text = format_meta(MetaProperties("clu", 5, dir_id)).decode()
    assert f"directory.id={to_kafka_str(dir_id)}" in text
    assert len(to_kafka_str(dir_id)) == 22
    assert from_kafka_str(to_kafka_str(dir_id)) == dir_id
    (tmp_path / "meta.properties").write_text(text)
    meta = read_meta(str(tmp_path))
    assert meta is not None
    assert (meta.cluster_id, meta.node_id, meta.directory_id, meta.version) == ("clu", 5, dir_id, 1)


def test_meta_properties_without_directory_id_gets_one_written_at_start(tmp_path: Path) -> None:
    d = tmp_path / "old"
    d.mkdir()
    (d / "meta.properties").write_text("#old broker\nversion=0\nbroker.id=4\ncluster.id=c\n")
    lm = LogManager.open(make_settings([str(d)]), cluster_id="c", node_id=4, background=False)
    lm.close()
    meta = read_meta(str(d))
    assert meta is not None
    assert (meta.version, meta.node_id, meta.cluster_id) == (1, 4, "c")
    assert meta.directory_id is not None
    assert not is_reserved(meta.directory_id)
    assert "broker.id" not in (d / "meta.properties").read_text()
    lm = LogManager.open(make_settings([str(d)]), cluster_id="c", node_id=4, background=False)
    lm.close()
    assert read_meta(str(d)) == meta
