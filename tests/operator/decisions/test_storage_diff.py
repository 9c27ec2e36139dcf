"""The storage diff refuses every volume edit that could drop data."""

from __future__ import annotations

from spindle.operator.decisions.storage_diff import ExistingVolume, Growth, diff_storage
from spindle.operator.quantity import quantity_bytes
from spindle.operator.specs import VolumeSpec

GI = 2**30


def want(volume_id: int, size: str, storage_class: str | None = None) -> VolumeSpec:
    return VolumeSpec(
        id=volume_id, size=size, size_bytes=quantity_bytes(size), storage_class=storage_class
    )


def have(
    volume_id: int, size: int, storage_class: str | None = "standard", state: str | None = "Active"
) -> ExistingVolume:
    return ExistingVolume(id=volume_id, size_bytes=size, storage_class=storage_class, state=state)


def test_unchanged_volumes_need_nothing() -> None:
    diff = diff_storage([want(0, "1Gi")], [have(0, GI)])
    assert diff.allowed
    assert (diff.added, diff.grown, diff.removed) == ((), (), ())
    assert not diff.changes_volume_set


def test_same_size_in_other_units_is_not_a_change() -> None:
    assert diff_storage([want(0, "1024Mi")], [have(0, GI)]).grown == ()


def test_growth_is_allowed_and_reported() -> None:
    diff = diff_storage([want(0, "3Gi")], [have(0, GI)])
    assert diff.allowed
    assert diff.grown == (Growth(0, GI, 3 * GI),)


def test_new_volume_is_added_and_changes_the_volume_set() -> None:
    diff = diff_storage([want(0, "1Gi"), want(1, "1Gi")], [have(0, GI)])
    assert diff.added == (1,)
    assert diff.changes_volume_set


def test_shrink_is_refused_with_reason_and_sizes() -> None:
    diff = diff_storage([want(0, "512Mi")], [have(0, GI)])
    assert not diff.allowed
    assert diff.reason() == "VolumeShrinkRefused"
    assert "shrinking from 1Gi to 512Mi is refused" in diff.message()


def test_storage_class_change_is_refused_but_absent_class_accepts_default() -> None:
    changed = diff_storage([want(0, "1Gi", "fast")], [have(0, GI, "standard")])
    assert changed.reason() == "StorageClassChangeRefused"
    assert "from standard to fast" in changed.message()
    assert diff_storage([want(0, "1Gi")], [have(0, GI, "standard")]).allowed


def test_removing_a_volume_that_holds_replicas_is_refused() -> None:
    for state in ("Active", "Cordoned", "Draining", "Offline", "Pending", None):
        diff = diff_storage([want(0, "1Gi")], [have(0, GI), have(1, GI, state=state)])
        assert not diff.allowed, state
        assert diff.reason() == "VolumeRemovalRefused"
        assert "volume 1: removal is refused" in diff.message()
        assert diff.removed == ()


def test_removing_an_empty_or_released_volume_is_allowed() -> None:
    for state in ("Empty", "Released"):
        diff = diff_storage([want(0, "1Gi")], [have(0, GI), have(1, GI, state=state)])
        assert diff.allowed
        assert diff.removed == (1,)
        assert diff.changes_volume_set


def test_one_refusal_blocks_the_whole_edit_and_all_reasons_are_listed() -> None:
    diff = diff_storage([want(0, "3Gi"), want(1, "512Mi")], [have(0, GI), have(1, GI), have(2, GI)])
    assert not diff.allowed
    assert [r.reason for r in diff.refusals] == ["VolumeShrinkRefused", "VolumeRemovalRefused"]
    assert "volume 1" in diff.message()
    assert "volume 2" in diff.message()
