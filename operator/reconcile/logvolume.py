"""The steps of a Broker's reconcile that concern its volumes: claims and LogVolumes.

Storage is the one part of a Broker whose edit can lose data, so it is read and checked
before anything is written (``read_storage``, ``check_storage``: the pure storage diff), and
the writing steps run only when the whole change is allowed (see ``reconcile.broker``):
``apply_volumes`` creates or grows claims and LogVolumes (``reconcile.release`` releases
removed volumes once they are empty), ``volume_status`` writes each LogVolume's status.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from spindle.operator import specs
from spindle.operator.decisions.release import LABEL_RELEASED
from spindle.operator.decisions.storage_diff import ExistingVolume, diff_storage
from spindle.operator.decisions.volume_state import (
    BrokerUnreachable,
    DirReport,
    Evidence,
    match_report,
)
from spindle.operator.decisions.volume_status import logvolume_status
from spindle.operator.kube import (
    EVENTS,
    LOGVOLUMES,
    NODES,
    PERSISTENTVOLUMES,
    PODS,
    PVCS,
    KubeError,
    apply_object,
    is_subset,
    post_event,
)
from spindle.operator.quantity import quantity_bytes
from spindle.operator.reconcile.context import Context
from spindle.operator.reconcile.remediation import overlay
from spindle.operator.specs import Obj


def _volume_id(obj: Mapping[str, Any]) -> int | None:
    raw = (obj.get("metadata", {}).get("labels") or {}).get(specs.LABEL_VOLUME_ID)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def read_storage(ctx: Context) -> None:
    namespace = ctx.broker.namespace
    for claim in ctx.api.list(PVCS, namespace, f"{specs.LABEL_BROKER}={ctx.broker.name}"):
        volume_id = _volume_id(claim)
        if volume_id is None:
            continue
        if LABEL_RELEASED in (claim["metadata"].get("labels") or {}):
            ctx.released[volume_id] = claim
        else:
            ctx.claims[volume_id] = claim
    for logvolume in ctx.api.list(LOGVOLUMES, namespace, ctx.selector()):
        volume_id = _volume_id(logvolume)
        if volume_id is not None:
            ctx.logvolumes[volume_id] = logvolume


def check_storage(ctx: Context) -> None:
    existing = []
    declared = {v.id for v in ctx.broker.volumes}
    # A released claim counts again once its volume id is declared again: it still holds the
    # old data, so its size and class are checked like any other claim's.
    reattached = {i: c for i, c in ctx.released.items() if i in declared and i not in ctx.claims}
    for volume_id, claim in {**ctx.claims, **reattached}.items():
        request = claim.get("spec", {}).get("resources", {}).get("requests", {}).get("storage")
        state = (ctx.logvolumes.get(volume_id, {}).get("status") or {}).get("state")
        existing.append(
            ExistingVolume(
                id=volume_id,
                size_bytes=quantity_bytes(request) if request else 0,
                storage_class=claim.get("spec", {}).get("storageClassName"),
                state=state,
            )
        )
    ctx.diff = diff_storage(ctx.broker.volumes, existing)


def apply_volumes(ctx: Context) -> None:
    for volume in ctx.broker.volumes:
        ctx.applied(apply_object(ctx.api, specs.build_pvc(ctx.broker, volume)))
        ctx.applied(apply_object(ctx.api, specs.build_logvolume(ctx.broker, volume)))


def _node_problem(ctx: Context) -> str | None:
    node_name = ((ctx.pod or {}).get("spec") or {}).get("nodeName")
    if not node_name:
        return None
    node = ctx.api.get(NODES, None, node_name)
    if node is None:
        return f"node {node_name} of pod {ctx.broker.name} is gone"
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") != "True":
            return (
                f"node {node_name} of pod {ctx.broker.name} is not Ready "
                f"({cond.get('reason') or cond.get('status')}: {cond.get('message') or ''})"
            )
    return None


def _health_events(ctx: Context, claim_name: str) -> list[dict[str, Any]]:
    answer = ctx.api.request(
        "GET",
        EVENTS.path(ctx.broker.namespace),
        query={
            "fieldSelector": (
                f"involvedObject.kind=PersistentVolumeClaim,involvedObject.name={claim_name}"
            )
        },
    )
    return list((answer or {}).get("items") or [])


def observe_volumes(ctx: Context) -> None:
    """Gather each volume's evidence (``decisions.volume_state``): the broker's DescribeLogDirs
    answer, the claim, its PV, the claim's volume-health Events and the Pod's node. A broker
    that cannot be asked is recorded as such (it says nothing about its disks)."""
    reports: list[DirReport] = []
    probe_error: str | None = None
    if ctx.probe is not None:
        try:
            reports = ctx.probe(ctx.broker)
        except BrokerUnreachable as exc:
            probe_error = str(exc)
    else:
        probe_error = "the operator has no broker client"
    if ctx.pod is None:
        ctx.pod = ctx.api.get(PODS, ctx.broker.namespace, ctx.broker.name)
    node_problem = _node_problem(ctx)
    for volume in ctx.held_volumes():
        claim_name = specs.pvc_name(ctx.broker.name, volume.id)
        claim = ctx.api.get(PVCS, ctx.broker.namespace, claim_name)
        pv_name = ((claim or {}).get("spec") or {}).get("volumeName")
        pv = ctx.api.get(PERSISTENTVOLUMES, None, pv_name) if pv_name else None
        if pv is not None and isinstance(pv_name, str) and pv_name in ctx.failed_pvs:
            seen = {"phase": "Failed", "message": ctx.failed_pvs[pv_name]}
            pv = {**pv, "status": {**(pv.get("status") or {}), **seen}}
        ctx.evidence[volume.id] = Evidence(
            report=match_report(reports, specs.mount_path(volume.id)),
            probe_error=probe_error,
            pvc=claim,
            pv=pv,
            health_events=_health_events(ctx, claim_name) if claim is not None else (),
            node_problem=node_problem,
            desired=str(
                ((ctx.logvolumes.get(volume.id) or {}).get("spec") or {}).get("desiredState")
                or "Active"
            ),
        )


CORDONING_STATES = frozenset({"Cordoned", "Drained"})


def apply_cordons(ctx: Context) -> None:
    """The user's intent on the broker: every directory whose LogVolume asks for
    ``Cordoned`` (or ``Drained``, which cordons first) is in the broker's
    ``cordoned.log.dirs`` (KIP-1066), and no other. Paths are the broker's own (from its
    last DescribeLogDirs); a directory it has not reported on waits for the next pass."""
    if ctx.cordon is None:
        return
    reports = {v: e.report for v, e in ctx.evidence.items() if e.report is not None}
    if not reports:
        return
    current = sorted(r.path for r in reports.values() if r.cordoned)
    wanted = sorted(
        r.path
        for v, r in reports.items()
        if ((ctx.logvolumes.get(v) or {}).get("spec") or {}).get("desiredState") in CORDONING_STATES
    )
    if wanted == current:
        return
    try:
        ctx.cordon(ctx.broker, wanted)
    except BrokerUnreachable as exc:
        ctx.emit("Warning", "CordonFailed", str(exc))
        return
    added, removed = set(wanted) - set(current), set(current) - set(wanted)
    if added:
        ctx.emit("Normal", "DirectoryCordoned", f"cordoned.log.dirs += {', '.join(sorted(added))}")
    if removed:
        ctx.emit(
            "Normal", "DirectoryUncordoned", f"cordoned.log.dirs -= {', '.join(sorted(removed))}"
        )
    for v, r in reports.items():  # the broker now says so; show it without waiting a probe
        e = ctx.evidence[v]
        ctx.evidence[v] = replace(e, report=replace(r, cordoned=r.path in wanted))


def _announce(ctx: Context, live: Mapping[str, Any], old: Mapping[str, Any], new: Obj) -> None:
    """Events for a state change: on the Broker (what ``kubectl describe broker`` shows) and
    on the LogVolume, naming the failure source when it went Offline."""
    before, after = old.get("state"), new.get("state")
    failure = new.get("failure") or {}
    new_source = failure.get("source") != (old.get("failure") or {}).get("source")
    if before == after and not (after == "Offline" and new_source):
        return
    name = live["metadata"]["name"]
    if after == "Offline":
        type_, reason = "Warning", "VolumeOffline"
        message = (
            f"LogVolume {name} is Offline (source {failure.get('source')}): "
            f"{failure.get('message')}"
        )
    else:
        type_, reason = "Normal", f"Volume{after}"
        message = f"LogVolume {name}: {before or 'new'} -> {after}"
    ctx.emit(type_, reason, message)
    with contextlib.suppress(KubeError):  # a courtesy; the Broker's copy was attempted
        post_event(ctx.api, dict(live), type_=type_, reason=reason, message=message, now=ctx.now)


def volume_status(ctx: Context) -> None:
    namespace = ctx.broker.namespace
    for volume in ctx.held_volumes():
        name = specs.logvolume_name(ctx.broker.name, volume.id)
        live = ctx.api.get(LOGVOLUMES, namespace, name)
        if live is None:
            continue
        evidence = ctx.evidence.get(volume.id)
        claim = (
            evidence.pvc
            if evidence is not None
            else ctx.api.get(PVCS, namespace, specs.pvc_name(ctx.broker.name, volume.id))
        )
        current = live.get("status") or {}
        wanted = logvolume_status(
            volume,
            ctx.broker,
            current=current,
            pvc=claim,
            generation=int(live["metadata"].get("generation") or 0),
            now=ctx.now,
            evidence=evidence,
        )
        overlay(ctx, volume.id, current, wanted)
        if not is_subset(wanted, current):
            ctx.api.patch(LOGVOLUMES, namespace, name, {"status": wanted}, subresource="status")
            _announce(ctx, live, current, wanted)
        merged = {k: v for k, v in {**current, **wanted}.items() if v is not None}
        ctx.logvolumes[volume.id] = {**live, "status": merged}
