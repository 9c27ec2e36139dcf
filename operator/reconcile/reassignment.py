"""Reassignment reconciliation: ``kafka-reassign-partitions --execute``, ``--verify`` and
``--cancel`` as a resource, one pass at a time, with status as the only memory.

A pass is a short list of named steps, status written last:

1. ``read_cluster``: Metadata, DescribeLogDirs, ListPartitionReassignments (one view);
2. ``check``: before anything is submitted, the spec against that view and the cluster's
   LogVolumes; a refused spec names every problem in the ``Valid`` condition and stops;
3. ``record``: the originals (replicas and directories) and phase Pending, written to status
   *before* anything is sent, together with the finalizer -- the one write that is not last,
   because after a restart the originals can no longer be read from the cluster;
4. ``submit`` (once: ``status.startTime`` says it happened): throttles, then
   AlterPartitionReassignments; after a crash between the two writes the same target is sent
   again, which Kafka treats as the same reassignment;
5. ``move_dirs``: AlterReplicaLogDirs for replicas not yet in (or copying to) their directory,
   every pass until the broker has them (the tool's retry loop);
6. ``roll_back`` (``spec.cancel`` or deletion in flight): null targets for reassignments in
   flight, the original replicas for completed ones, the original directories, until all is
   as recorded;
7. ``finish``: throttles cleared once Completed, Cancelled or Failed; the finalizer removed;
8. ``write_status``: per-partition and overall progress, rate, ETA, conditions.

The finalizer (``spindle.io/rollback-on-delete``) is present only while data may move (from
``record`` to a final phase), so that deleting a Reassignment in flight cancels it first. A
Reassignment that is Completed, Cancelled, Failed or refused carries none, so a namespace of
finished ones deletes even when the operator is down; with the operator down, an in-flight
one holds its namespace until the operator returns (or someone removes the finalizer: the
brokers then simply finish the moves).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spindle.operator.brokers import Admin, BrokerError, cluster_admin
from spindle.operator.decisions import reassignment as plan
from spindle.operator.kube import BROKERS, LOGVOLUMES, REASSIGNMENTS, KubeApi
from spindle.operator.reconcile.context import EventSink, ResourcePass
from spindle.operator.specs import Condition, merge_conditions
from spindle.operator.specs.names import LABEL_CLUSTER

FINALIZER = "spindle.io/rollback-on-delete"
#: AlterReplicaLogDirs answers this until a replica being added to a broker exists there (the
#: only error kafka-reassign-partitions retries; any other fails the Reassignment).
NOT_YET = frozenset({"ReplicaNotAvailableError"})


@dataclass
class Pass(ResourcePass):
    """One pass over one Reassignment: what it read and what it decided."""

    api: KubeApi
    body: Mapping[str, Any]
    admin: Admin
    now: datetime.datetime
    emit: EventSink
    spec: plan.ReassignmentSpec
    status: dict[str, Any]
    view: plan.ClusterView | None = None
    stop: bool = False
    conditions: list[Condition] = field(default_factory=list)

    @property
    def cancelling(self) -> bool:
        return self.spec.cancel or bool(self.meta.get("deletionTimestamp"))

    @property
    def records(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = self.status.setdefault("partitions", [])
        return records


def _cluster_view(ctx: Pass) -> plan.ClusterView:
    if ctx.view is None:
        ctx.view = ctx.admin.view(sorted({t.topic for t in ctx.spec.targets}))
    return ctx.view


def read_cluster(ctx: Pass) -> None:
    ctx.view = None
    _cluster_view(ctx)


def check(ctx: Pass) -> None:
    if ctx.status.get("startTime") or ctx.records:
        return
    if ctx.cancelling:
        ctx.status["phase"] = "Cancelled"
        ctx.status["completionTime"] = ctx.stamp
        ctx.conditions.append(
            Condition("Progressing", "False", "Cancelled", "cancelled before it started")
        )
        ctx.stop = True
        return
    selector = f"{LABEL_CLUSTER}={ctx.spec.cluster}"
    closed = plan.closed_dirs(ctx.api.list(LOGVOLUMES, ctx.meta["namespace"], selector))
    problems = plan.validate(ctx.spec, _cluster_view(ctx), closed)
    if problems:
        message = "; ".join(problems)
        if ctx.status.get("phase") != "Failed" or _condition_message(ctx, "Valid") != message:
            ctx.emit("Warning", "InvalidReassignment", message)
        ctx.status.update(phase="Failed", completionTime=ctx.stamp)
        ctx.conditions.append(Condition("Valid", "False", "InvalidReassignment", message))
        ctx.stop = True
        return
    ctx.conditions.append(
        Condition("Valid", "True", "Validated", "checked against the live cluster")
    )


def _condition_message(ctx: Pass, type_: str) -> str | None:
    for c in ctx.status.get("conditions") or []:
        if c.get("type") == type_:
            return str(c.get("message"))
    return None


def record(ctx: Pass) -> None:
    if ctx.records:
        return
    ctx.status.update(
        phase="Pending",
        partitions=plan.originals(ctx.spec, _cluster_view(ctx)),
        partitionsTotal=len(ctx.spec.targets),
        partitionsDone=0,
        progress="0%",
    )
    ctx.status.pop("completionTime", None)
    finalizers = [*(ctx.meta.get("finalizers") or []), FINALIZER]
    ns, name = ctx.meta["namespace"], ctx.meta["name"]
    ctx.api.patch(REASSIGNMENTS, ns, name, {"metadata": {"finalizers": finalizers}})
    ctx.api.patch(REASSIGNMENTS, ns, name, {"status": ctx.status}, subresource="status")


def submit(ctx: Pass) -> None:
    if ctx.status.get("startTime") or ctx.cancelling:
        return
    view = _cluster_view(ctx)
    brokers, topics = plan.throttles(ctx.spec, view)
    ctx.admin.set_configs(brokers, topics)
    ctx.status["throttles"] = {"brokers": sorted(brokers), "topics": sorted(topics)}
    failed = ctx.admin.alter_reassignments(plan.replica_changes(ctx.spec.targets, view))
    if failed:
        message = "AlterPartitionReassignments refused " + ", ".join(
            f"{t}-{p}: {err}" for (t, p), err in sorted(failed.items())
        )
        _fail(ctx, message)
        return
    ctx.status.update(phase="Moving", startTime=ctx.stamp)
    ctx.emit("Normal", "Started", f"moving {len(ctx.spec.targets)} partitions")


def _fail(ctx: Pass, message: str) -> None:
    ctx.emit("Warning", "ReassignmentFailed", message)
    ctx.status.update(phase="Failed", completionTime=ctx.stamp)
    ctx.conditions.append(Condition("Progressing", "False", "Failed", message))


def move_dirs(ctx: Pass) -> None:
    if ctx.status.get("phase") != "Moving" or ctx.cancelling:
        return
    failed = ctx.admin.alter_log_dirs(plan.dir_changes(ctx.spec.targets, _cluster_view(ctx)))
    waiting = {(t, p): f"AlterReplicaLogDirs: {e} (retrying)" for (t, p, _b), e in failed.items()}
    for r in ctx.records:
        message = waiting.get((r["topic"], r["partition"]))
        if message:
            r["error"] = message
        else:
            r.pop("error", None)
    hard = {k: v for k, v in failed.items() if v not in NOT_YET}
    if hard:
        _fail(
            ctx,
            "AlterReplicaLogDirs refused "
            + ", ".join(f"{t}-{p} on broker {b}: {e}" for (t, p, b), e in sorted(hard.items())),
        )


def roll_back(ctx: Pass) -> None:
    if not ctx.cancelling or ctx.status.get("phase") in plan.FINAL_PHASES:
        return
    view = _cluster_view(ctx)
    if ctx.status.get("phase") != "Cancelling":
        ctx.emit("Normal", "Cancelling", "rolling back to the original replicas and directories")
    ctx.status["phase"] = "Cancelling"
    if plan.is_rolled_back(ctx.records, view):
        ctx.status.update(phase="Cancelled", completionTime=ctx.stamp)
        for r in ctx.records:
            r["phase"] = "Cancelled"
        ctx.emit("Normal", "Cancelled", "original replicas and directories restored")
        return
    replicas, dirs = plan.rollback_actions(ctx.records, view)
    ctx.admin.alter_reassignments(replicas)  # NO_REASSIGNMENT_IN_PROGRESS: already done
    ctx.admin.alter_log_dirs(dirs)


def progress(ctx: Pass) -> None:
    if ctx.status.get("phase") not in {"Moving", "Pending"} or not ctx.status.get("startTime"):
        return
    view = _cluster_view(ctx)
    by_tp = {(r["topic"], r["partition"]): r for r in ctx.records}
    ctx.status["partitions"] = [
        plan.partition_progress(t, by_tp[t.tp], view) for t in ctx.spec.targets
    ]
    ctx.status.update(plan.progress_fields(ctx.records, ctx.status, view.described_at or ctx.now))
    if all(r["phase"] == "Completed" for r in ctx.records) and ctx.status["phase"] == "Moving":
        ctx.status.update(phase="Completed", completionTime=ctx.stamp, progress="100%")
        ctx.emit("Normal", "Completed", f"{len(ctx.records)} partitions reassigned")


def finish(ctx: Pass) -> None:
    phase = ctx.status.get("phase")
    if phase not in plan.FINAL_PHASES:
        return
    for key in ("eta", "timeRemaining"):
        ctx.status.pop(key, None)
    throttled = ctx.status.pop("throttles", None)
    if throttled:
        ctx.admin.set_configs(
            {b: dict.fromkeys(plan.BROKER_THROTTLES) for b in throttled.get("brokers", [])},
            {t: dict.fromkeys(plan.TOPIC_THROTTLES) for t in throttled.get("topics", [])},
        )
    finalizers = ctx.meta.get("finalizers") or []
    if FINALIZER in finalizers:
        kept = [f for f in finalizers if f != FINALIZER]
        ns, name = ctx.meta["namespace"], ctx.meta["name"]
        ctx.api.patch(REASSIGNMENTS, ns, name, {"metadata": {"finalizers": kept or None}})


def write_status(ctx: Pass) -> None:
    phase = ctx.status.get("phase") or "Pending"
    if not any(c.type == "Progressing" for c in ctx.conditions):
        if phase in {"Pending", "Moving", "Cancelling"}:
            ctx.conditions.append(
                Condition("Progressing", "True", phase, f"{ctx.status.get('progress', '0%')} moved")
            )
        elif phase in {"Completed", "Cancelled"}:
            ctx.conditions.append(Condition("Progressing", "False", phase, f"{phase.lower()}"))
    ctx.conditions.append(Condition("BrokersReachable", "True", "Answered", "the brokers answered"))
    kept = {c.get("type"): c for c in ctx.status.get("conditions") or []}
    wanted = {c.type: c for c in ctx.conditions}
    generation = int(ctx.meta.get("generation") or 0)
    merged = merge_conditions(
        list(kept.values()), list(wanted.values()), now=ctx.stamp, generation=generation
    )
    merged += [c for t, c in kept.items() if t not in wanted]
    ctx.status.update(conditions=merged, observedGeneration=generation)
    if ctx.meta.get("deletionTimestamp") and phase in plan.FINAL_PHASES:
        return  # the finalizer is gone: the object may be too
    # A merge patch keeps keys it does not name: name the removed ones as null.
    removed = dict.fromkeys(set(ctx.body.get("status") or {}) - set(ctx.status))
    ctx.api.patch(
        REASSIGNMENTS, ctx.meta["namespace"], ctx.meta["name"],
        {"status": {**removed, **ctx.status}}, subresource="status",
    )  # fmt: skip


Step = Callable[[Pass], None]
#: In order; a step may set ``stop`` (refused spec), after which only status is written.
STEPS: tuple[Step, ...] = (
    read_cluster,
    check,
    record,
    submit,
    move_dirs,
    roll_back,
    progress,
    finish,
)


def bootstrap_for(
    api: KubeApi, namespace: str, cluster: str, overrides: Mapping[str, str]
) -> list[str]:
    """Where the cluster's brokers listen: ``--bootstrap CLUSTER=HOST:PORT`` when the operator
    was given one (brokers outside Kubernetes, or an operator outside the cluster), else each
    Broker's Service (``<service>.<namespace>.svc:<port>``)."""
    if cluster in overrides:
        return overrides[cluster].split(",")
    answer = api.request("GET", BROKERS.path(namespace))
    return [
        f"{(b.get('status') or {}).get('serviceName') or b['metadata']['name']}.{namespace}.svc:"
        f"{b['spec'].get('port') or 9092}"
        for b in answer.get("items") or []
        if (b.get("spec") or {}).get("cluster") == cluster
    ]


def reconcile_reassignment(
    api: KubeApi,
    body: Mapping[str, Any],
    *,
    now: datetime.datetime,
    emit: EventSink,
    bootstrap: Mapping[str, str],
) -> dict[str, Any]:
    """One pass; returns the status written. Broker errors end the pass with the message in
    the ``Progressing`` condition (the next pass retries; nothing is lost)."""
    meta = body["metadata"]
    spec = plan.parse_reassignment(body.get("spec") or {})
    status = dict(body.get("status") or {})
    if status.get("phase") in plan.FINAL_PHASES and not meta.get("deletionTimestamp"):
        if status.get("phase") != "Failed" or status.get("startTime") or spec.cancel:
            return status  # finished; a refused one is checked again when its spec changes
        if status.get("observedGeneration") == meta.get("generation"):
            return status
        status = {"conditions": status.get("conditions") or []}
    servers = bootstrap_for(api, meta["namespace"], spec.cluster, bootstrap)
    if not servers:
        message = f"no Broker of cluster {spec.cluster} in namespace {meta['namespace']}"
        _write_unreachable(api, body, status, message, now)
        return status
    try:
        with cluster_admin(spec.cluster, servers) as admin:
            ctx = Pass(api, body, admin, now, emit, spec, status)
            for step in STEPS:
                step(ctx)
                if ctx.stop:
                    break
            write_status(ctx)
    except BrokerError as exc:
        _write_unreachable(api, body, status, str(exc), now)
    return status


def _write_unreachable(
    api: KubeApi,
    body: Mapping[str, Any],
    status: dict[str, Any],
    message: str,
    now: datetime.datetime,
) -> None:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = body["metadata"]
    status["conditions"] = merge_conditions(
        [c for c in status.get("conditions") or [] if c.get("type") == "BrokersReachable"],
        [Condition("BrokersReachable", "False", "BrokerError", message)],
        now=stamp,
        generation=int(meta.get("generation") or 0),
    ) + [c for c in status.get("conditions") or [] if c.get("type") != "BrokersReachable"]
    status.setdefault("phase", "Pending")
    api.patch(
        REASSIGNMENTS, meta["namespace"], meta["name"], {"status": status}, subresource="status"
    )
