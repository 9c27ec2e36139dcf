"""The drain step of a Broker's refresh: ``desiredState: Drained`` empties a directory.

Once the directory is cordoned (``apply_cordons``), each pass, right after a fresh
DescribeLogDirs (a move chosen from an older answer could send a replica already on its way
somewhere else), ``decisions.drain`` decides a home for every replica still there:

* another directory of the broker with room: AlterReplicaLogDirs through the broker client
  (``ctx.move``), as ``kafka-reassign-partitions`` does for a directory move;
* else another broker: one Reassignment per draining LogVolume, ``drain-<logvolume>``, that
  the Reassignment reconciler executes like any other (AlterPartitionReassignments, then
  AlterReplicaLogDirs into the chosen directory, throttled by the LogVolume's
  ``spec.drainBytesPerSecond``, progress and rollback on delete). That is the operator's one
  door for moving data across brokers; the Reassignment is owned by the LogVolume and, having
  its state in its status, is resumed by a restarted operator -- which finds it here by name
  and starts nothing twice;
* else nowhere: the LogVolume stays ``Draining`` and ``status.drain.message`` says why.

``status.drain`` (bytes and replicas left, rate, ETA, the Reassignment) is written here;
``state`` (``Draining`` → ``Empty``) by ``volume_status`` from the same report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spindle.operator import specs
from spindle.operator.decisions import drain as plans
from spindle.operator.decisions.reassignment import FINAL_PHASES, closed_dirs
from spindle.operator.decisions.volume_state import BrokerUnreachable, DirReport
from spindle.operator.kube import LOGVOLUMES, REASSIGNMENTS, KubeError, is_subset
from spindle.operator.reconcile.context import Context
from spindle.operator.specs.reassignment import build_drain_reassignment


def drain_volumes(ctx: Context) -> None:
    reports = {v: e.report for v, e in ctx.evidence.items() if e.report is not None}
    for volume_id, report in sorted(reports.items()):
        evidence = ctx.evidence[volume_id]
        if evidence.desired != "Drained":
            _forget_progress(ctx, volume_id)
            continue
        if not report.cordoned or report.error is not None:
            continue
        others = [r for v, r in reports.items() if v != volume_id]
        name = specs.logvolume_name(ctx.broker.name, volume_id)
        moves, homeless = plans.plan_intra(report, others)
        _move_inside(ctx, name, report, moves)
        reassignment, message = _move_across(ctx, volume_id, report, homeless)
        _write_progress(ctx, volume_id, report, reassignment, message)


def drain_progress(ctx: Context) -> None:
    """``status.drain`` from this pass's report without moving anything: a full reconcile
    (its report may be the probe's last one) writes the state from that report, and the drain's
    figures must say the same."""
    reports = {v: e.report for v, e in ctx.evidence.items() if e.report is not None}
    for volume_id, report in sorted(reports.items()):
        if ctx.evidence[volume_id].desired != "Drained" or not report.cordoned:
            continue
        if report.error is not None:
            continue
        previous = ((ctx.logvolumes.get(volume_id) or {}).get("status") or {}).get("drain") or {}
        _write_progress(ctx, volume_id, report, None, previous.get("message"))


def _move_inside(ctx: Context, name: str, report: DirReport, moves: Mapping[Any, str]) -> None:
    if not moves or ctx.move is None:
        return
    try:
        refused = ctx.move(ctx.broker, moves)
    except BrokerUnreachable as exc:
        ctx.emit("Warning", "DrainFailed", str(exc))
        return
    started = [tp for tp in moves if tp not in refused]
    if started:
        ctx.emit(
            "Normal",
            "DrainStarted",
            f"LogVolume {name}: moving {len(started)} replica(s), "
            f"{sum(report.partitions[tp] for tp in started)} bytes, "
            "to the broker's other directories",
        )
    if refused:
        ctx.emit("Warning", "DrainRefused", f"LogVolume {name}: refused {refused}")


def _reassignment_name(ctx: Context, volume_id: int) -> str:
    return f"drain-{specs.logvolume_name(ctx.broker.name, volume_id)}"


def _move_across(
    ctx: Context, volume_id: int, report: DirReport, homeless: list[tuple[str, int]]
) -> tuple[str | None, str | None]:
    """The replicas that fit nowhere in the broker go to other brokers through the drain's
    Reassignment. Returns the Reassignment carrying them (if any) and why some replica has
    no home (if so)."""
    if not homeless:
        return None, None
    namespace = ctx.broker.namespace
    name = _reassignment_name(ctx, volume_id)
    existing = ctx.api.get(REASSIGNMENTS, namespace, name)
    in_flight, previous = _outcome(existing)
    if in_flight:
        return name, None  # after a restart too: it resumes, and nothing starts twice
    if ctx.cluster_view is None:
        return None, "the operator cannot see the other brokers (no broker client)"
    try:
        view = ctx.cluster_view(ctx.broker, sorted({t for t, _ in homeless}))
    except BrokerUnreachable as exc:
        return None, f"the other brokers cannot be asked: {exc}"
    selector = f"{specs.LABEL_CLUSTER}={ctx.broker.cluster}"
    closed = closed_dirs(ctx.api.list(LOGVOLUMES, namespace, selector))
    cross, stuck = plans.plan_cross(ctx.broker.broker_id, homeless, report.partitions, view, closed)
    message = "; ".join([*([previous] if previous else []), *stuck.values()]) or None
    if not cross:
        return (name if existing is not None and previous is None else None), message
    if existing is not None:
        ctx.api.delete(REASSIGNMENTS, namespace, name)  # finished; a new one takes its name
    logvolume = ctx.logvolumes.get(volume_id) or {}
    rate = ((logvolume.get("spec") or {}).get("drainBytesPerSecond")) or None
    body = build_drain_reassignment(ctx.broker, logvolume, name, cross, rate=rate)
    try:
        ctx.api.create(REASSIGNMENTS, namespace, body)
    except KubeError as exc:
        if exc.status != 409:  # 409: the old one is still going away; the next pass retries
            raise
        return None, message
    ctx.emit(
        "Normal",
        "DrainStarted",
        f"LogVolume {specs.logvolume_name(ctx.broker.name, volume_id)}: moving "
        f"{len(cross)} replica(s), {sum(m.size for m in cross.values())} bytes, to other "
        f"brokers (no room in this broker's other directories): Reassignment {name}",
    )
    return name, message


def _outcome(existing: Mapping[str, Any] | None) -> tuple[bool, str | None]:
    """Whether the drain's Reassignment is still moving, and how it failed if it did."""
    if existing is None:
        return False, None
    status = existing.get("status") or {}
    phase = status.get("phase")
    if phase not in FINAL_PHASES:
        return True, None
    if phase == "Completed":
        return False, None
    why = "; ".join(
        str(c.get("message")) for c in status.get("conditions") or [] if c.get("status") == "False"
    )
    return False, f"Reassignment {existing['metadata']['name']} ended {phase}: {why}"


def _forget_progress(ctx: Context, volume_id: int) -> None:
    """A volume no longer asked to drain shows no drain (a later drain starts afresh)."""
    logvolume = ctx.logvolumes.get(volume_id)
    if logvolume is None or not (logvolume.get("status") or {}).get("drain"):
        return
    name = logvolume["metadata"]["name"]
    ctx.api.patch(
        LOGVOLUMES, ctx.broker.namespace, name, {"status": {"drain": None}}, subresource="status"
    )
    status = {k: v for k, v in (logvolume.get("status") or {}).items() if k != "drain"}
    ctx.logvolumes[volume_id] = {**logvolume, "status": status}


def _write_progress(
    ctx: Context,
    volume_id: int,
    report: DirReport,
    reassignment: str | None,
    message: str | None,
) -> None:
    logvolume = ctx.logvolumes.get(volume_id)
    if logvolume is None:
        return
    current = logvolume.get("status") or {}
    previous = current.get("drain") or {}
    if message and message != previous.get("message"):
        ctx.emit("Warning", "DrainStuck", f"LogVolume {logvolume['metadata']['name']}: {message}")
    wanted = plans.progress(previous, report, ctx.now, reassignment=reassignment, message=message)
    present = {k: v for k, v in wanted.items() if v is not None}
    if is_subset(present, previous) and all(
        previous.get(k) is None for k, v in wanted.items() if v is None
    ):
        return
    name = logvolume["metadata"]["name"]
    ctx.api.patch(
        LOGVOLUMES, ctx.broker.namespace, name, {"status": {"drain": wanted}}, subresource="status"
    )
    ctx.logvolumes[volume_id] = {**logvolume, "status": {**current, "drain": present}}
