"""The steps of a Broker's reconcile that release removed volumes and take them back.

Removing a volume from ``spec.volumes`` is allowed only once its LogVolume is ``Empty`` (the
storage diff refuses it otherwise, with the reason, and nothing is touched). Then
``release_removed``:

* deletes the claim when it was declared with ``deleteClaim: true`` (it carries the Broker's
  owner reference, see ``specs.pvc``), else keeps it, labelled ``spindle.io/released``, with
  its data;
* keeps the LogVolume, labelled the same way, in state ``Released`` with ``claimKept`` saying
  which (``decisions.release``); the broker's Pod is replaced without the volume by the later
  ``apply_pod`` step.

``reattach_released`` (before the claims are applied) undoes it when the volume id is declared
again: the kept claim is the volume's claim again (its data with it), and the LogVolume leaves
``Released`` (its ``desiredState`` reset to Active first, then its state). Until it has, the
volume is not the broker's (``Context.held_volumes``): a periodic refresh that reads the new
spec before this reconcile leaves the released LogVolume and its directory alone.
``read_released`` reads both kinds of released object for the diff, and leaves out claims
already being deleted (a deleted claim of a released volume lingers, Terminating,
until the Pod that mounted it is gone: it is not a volume to keep or refuse).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spindle.operator import specs
from spindle.operator.decisions.release import (
    LABEL_RELEASED,
    reattached_status,
    released_status,
)
from spindle.operator.kube import LOGVOLUMES, PVCS
from spindle.operator.reconcile.context import Context


def _volume_id(obj: Mapping[str, Any]) -> int | None:
    raw = ((obj.get("metadata") or {}).get("labels") or {}).get(specs.LABEL_VOLUME_ID)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def read_released(ctx: Context) -> None:
    """Released LogVolumes of this Broker; claims being deleted are not volumes any more."""
    declared = {v.id for v in ctx.broker.volumes}
    for volume_id, claim in list(ctx.claims.items()):
        if claim["metadata"].get("deletionTimestamp") and volume_id not in declared:
            del ctx.claims[volume_id]
    selector = f"{specs.LABEL_BROKER}={ctx.broker.name},{LABEL_RELEASED}"
    for logvolume in ctx.api.list(LOGVOLUMES, ctx.broker.namespace, selector):
        released_id = _volume_id(logvolume)
        if released_id is not None:
            ctx.released_logvolumes[released_id] = logvolume


def reattach_released(ctx: Context) -> None:
    """A released volume id declared again: its kept claim and its LogVolume are the
    broker's again (the claims are then applied as usual, a deleted one created anew)."""
    namespace = ctx.broker.namespace
    for volume in ctx.broker.volumes:
        claim = ctx.released.get(volume.id)
        if claim is not None and volume.id not in ctx.claims:
            name = claim["metadata"]["name"]
            ctx.api.patch(PVCS, namespace, name, {"metadata": {"labels": {LABEL_RELEASED: None}}})
            ctx.claims[volume.id] = claim
            ctx.emit(
                "Normal",
                "VolumeReattached",
                f"volume {volume.id}: reusing released PVC {name} and the data it holds",
            )
        logvolume = ctx.released_logvolumes.pop(volume.id, None)
        if logvolume is None:
            continue
        name = logvolume["metadata"]["name"]
        ctx.api.patch(
            LOGVOLUMES,
            namespace,
            name,
            {"metadata": {"labels": {LABEL_RELEASED: None}}, "spec": {"desiredState": "Active"}},
        )
        current = logvolume.get("status") or {}
        status = reattached_status(current, now=ctx.now)
        ctx.api.patch(LOGVOLUMES, namespace, name, {"status": status}, subresource="status")
        # The later steps of this pass (cordons, drain, status) read the copy: it must say
        # Active too, or they would cordon the directory again and show it Empty.
        meta = logvolume["metadata"]
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != LABEL_RELEASED}
        ctx.logvolumes[volume.id] = {
            **logvolume,
            "metadata": {**meta, "labels": labels},
            "spec": {**(logvolume.get("spec") or {}), "desiredState": "Active"},
            "status": {k: v for k, v in {**current, **status}.items() if v is not None},
        }
        ctx.emit(
            "Normal",
            "VolumeReattached",
            f"LogVolume {name} leaves Released: volume {volume.id} is declared again "
            f"({'its kept claim' if current.get('claimKept') else 'a new claim'})",
        )


def release_removed(ctx: Context) -> None:
    """Release the volumes the diff let go (removed from the spec, their LogVolume
    ``Empty``): the claim deleted or kept, the LogVolume ``Released``."""
    namespace = ctx.broker.namespace
    for volume_id in ctx.diff.removed:
        claim = ctx.claims.get(volume_id)
        claim_name = specs.pvc_name(ctx.broker.name, volume_id)
        kept = False
        if claim is not None:
            claim_name = claim["metadata"]["name"]
            owners = claim["metadata"].get("ownerReferences") or []
            if any(o.get("uid") == ctx.broker.uid for o in owners):
                ctx.api.delete(PVCS, namespace, claim_name)
                ctx.emit(
                    "Normal",
                    "VolumeReleased",
                    f"volume {volume_id}: deleted PVC {claim_name} (deleteClaim is true)",
                )
            else:
                kept = True
                patch = {"metadata": {"labels": {LABEL_RELEASED: "true"}}}
                ctx.api.patch(PVCS, namespace, claim_name, patch)
                ctx.emit(
                    "Normal",
                    "VolumeReleased",
                    f"volume {volume_id}: kept PVC {claim_name} with its data (deleteClaim is "
                    "false), labelled released",
                )
        logvolume = ctx.logvolumes.pop(volume_id, None)
        if logvolume is None:
            continue
        name = logvolume["metadata"]["name"]
        ctx.api.patch(
            LOGVOLUMES, namespace, name, {"metadata": {"labels": {LABEL_RELEASED: "true"}}}
        )
        current = logvolume.get("status") or {}
        status = released_status(
            current,
            claim_name=claim_name,
            claim_kept=kept,
            generation=int(logvolume["metadata"].get("generation") or 0),
            now=ctx.now,
        )
        ctx.api.patch(LOGVOLUMES, namespace, name, {"status": status}, subresource="status")
        merged = {k: v for k, v in {**current, **status}.items() if v is not None}
        ctx.released_logvolumes[volume_id] = {**logvolume, "status": merged}
        ctx.emit("Normal", "VolumeReleased", f"LogVolume {name}: Empty -> Released")
