"""Storage changes of a Broker, checked before anything is touched (Strimzi's StorageDiff).

Editing ``spec.volumes`` is the one edit that can lose data, so the operator compares the
desired volumes with what exists (the claims and their LogVolumes) in a pure function and
acts only if the whole change is allowed:

* a new volume → a new claim and LogVolume, and the Pod is replaced to mount it;
* a larger size → the claim is patched (volume expansion);
* a smaller size, a different storage class, or a removed volume whose LogVolume still
  holds replicas (not ``Empty``/``Released``) → refused, with a reason and a message that
  say why; nothing of the change is applied.

Pure data in, pure data out; no I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from spindle.operator.quantity import format_bytes
from spindle.operator.specs.broker import VolumeSpec

RELEASABLE_STATES = frozenset({"Empty", "Released"})


@dataclass(frozen=True)
class ExistingVolume:
    """A volume as it exists now: its claim's request and class, its LogVolume's state."""

    id: int
    size_bytes: int
    storage_class: str | None
    state: str | None  # LogVolume status.state; None when there is no LogVolume or no status


@dataclass(frozen=True)
class Refusal:
    """One part of the change that is refused; ``reason`` is a CamelCase condition reason."""

    volume_id: int
    reason: str
    message: str


@dataclass(frozen=True)
class Growth:
    """A claim to expand."""

    volume_id: int
    from_bytes: int
    to_bytes: int


@dataclass(frozen=True)
class StorageDiff:
    """What an edit of ``spec.volumes`` means. Apply it only when ``allowed``."""

    added: tuple[int, ...] = ()
    grown: tuple[Growth, ...] = ()
    removed: tuple[int, ...] = ()
    refusals: tuple[Refusal, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.refusals

    @property
    def changes_volume_set(self) -> bool:
        """True when the Pod must be replaced to mount a different set of volumes."""
        return bool(self.added or self.removed)

    def reason(self) -> str:
        """Condition reason: the first refusal's, or that the storage is as declared."""
        return self.refusals[0].reason if self.refusals else "StorageReconciled"

    def message(self) -> str:
        """All refusals in one sentence each, for the condition and the Event."""
        return " ".join(r.message for r in self.refusals)


def diff_storage(desired: Iterable[VolumeSpec], existing: Iterable[ExistingVolume]) -> StorageDiff:
    """Compare the declared volumes with the existing ones.

    ``existing`` is what the cluster holds (one entry per claim the broker owns), not the
    previous spec: a claim left over from an earlier refused edit is still data.
    A desired volume without ``storageClass`` accepts whatever class its claim got (the
    cluster default is filled in by admission), so it never counts as a class change.
    """
    desired_by_id = {v.id: v for v in desired}
    existing_by_id: dict[int, ExistingVolume] = {}
    refusals: list[Refusal] = []
    for volume in existing:
        existing_by_id[volume.id] = volume
    added: list[int] = []
    grown: list[Growth] = []
    removed: list[int] = []
    for volume_id in sorted(desired_by_id):
        want = desired_by_id[volume_id]
        have = existing_by_id.get(volume_id)
        if have is None:
            added.append(volume_id)
            continue
        if want.size_bytes < have.size_bytes:
            refusals.append(
                Refusal(
                    volume_id,
                    "VolumeShrinkRefused",
                    f"volume {volume_id}: shrinking from {format_bytes(have.size_bytes)} to "
                    f"{format_bytes(want.size_bytes)} is refused (a claim cannot shrink, and "
                    "data would not fit); restore the size, or add a volume, drain this one "
                    "and remove it.",
                )
            )
        elif want.size_bytes > have.size_bytes:
            grown.append(Growth(volume_id, have.size_bytes, want.size_bytes))
        if want.storage_class is not None and want.storage_class != have.storage_class:
            refusals.append(
                Refusal(
                    volume_id,
                    "StorageClassChangeRefused",
                    f"volume {volume_id}: changing the storage class from "
                    f"{have.storage_class or '(default)'} to {want.storage_class} is refused "
                    "(a claim's class is immutable); add a volume with the new class, drain "
                    "this one and remove it.",
                )
            )
    for volume_id in sorted(existing_by_id.keys() - desired_by_id.keys()):
        state = existing_by_id[volume_id].state
        if state in RELEASABLE_STATES:
            removed.append(volume_id)
        else:
            refusals.append(
                Refusal(
                    volume_id,
                    "VolumeRemovalRefused",
                    f"volume {volume_id}: removal is refused because its LogVolume is "
                    f"{state or 'not reported yet'}, not Empty or Released; set its LogVolume "
                    "spec.desiredState to Drained and wait for Empty first.",
                )
            )
    return StorageDiff(
        added=tuple(added),
        grown=tuple(grown),
        removed=tuple(removed),
        refusals=tuple(refusals),
    )
