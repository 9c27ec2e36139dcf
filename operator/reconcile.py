"""Broker reconciliation as a short list of named steps, status written last.

The kopf handlers (``handlers``) only decide *when* to reconcile; this module says *what*
a reconcile is, in order (the Strimzi ``KafkaReconciler.reconcile()`` shape):

1. ``read_storage``: the claims and LogVolumes the broker owns now;
2. ``check_storage``: the pure storage diff; a refused change stops here (nothing touched);
3. ``apply_config``: ConfigMap and Service;
4. ``apply_volumes``: claims (created or grown) and LogVolumes;
5. ``release_removed``: LogVolumes (and claims with deleteClaim) of removed, emptied volumes;
   a kept claim is labelled released, and taken back when its volume id is declared again;
6. ``apply_pod``: the Pod, replaced when its volumes or settings changed;
7. ``volume_status``: each LogVolume's status from its claim;
8. ``broker_status``: phase, volume counts, conditions, observedGeneration.

Time and the Event sink are injected (keyword-only) so that tests and the handlers decide
them. Events are emitted only for things that happened, so an idle reconcile is silent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from spindle.operator import specs
from spindle.operator.apply import Outcome, apply_object, is_subset
from spindle.operator.kube import BROKERS, LOGVOLUMES, PODS, PVCS, KubeApi
from spindle.operator.quantity import quantity_bytes
from spindle.operator.specs import BrokerSpec, Condition
from spindle.operator.storage_diff import ExistingVolume, StorageDiff, diff_storage

LABEL_RELEASED = "spindle.io/released"


class EventSink(Protocol):
    def __call__(self, type_: str, reason: str, message: str) -> None: ...


@dataclass
class Context:
    """What one reconcile reads and decides, passed from step to step."""

    api: KubeApi
    body: Mapping[str, Any]
    broker: BrokerSpec
    now: str
    emit: EventSink
    claims: dict[int, dict[str, Any]] = field(default_factory=dict)
    logvolumes: dict[int, dict[str, Any]] = field(default_factory=dict)
    released: dict[int, dict[str, Any]] = field(default_factory=dict)
    diff: StorageDiff = field(default_factory=StorageDiff)
    outcomes: list[Outcome] = field(default_factory=list)
    pod: dict[str, Any] | None = None

    def selector(self) -> str:
        return f"{specs.LABEL_BROKER}={self.broker.name},!{LABEL_RELEASED}"

    def applied(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        if outcome.changed:
            self.emit("Normal", outcome.action, outcome.message())


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


def apply_config(ctx: Context) -> None:
    ctx.applied(apply_object(ctx.api, specs.build_configmap(ctx.broker)))
    ctx.applied(apply_object(ctx.api, specs.build_service(ctx.broker)))


def apply_volumes(ctx: Context) -> None:
    for volume in ctx.broker.volumes:
        claim = ctx.released.get(volume.id)
        if claim is not None and volume.id not in ctx.claims:
            name = claim["metadata"]["name"]
            patch = {"metadata": {"labels": {LABEL_RELEASED: None}}}
            ctx.api.patch(PVCS, ctx.broker.namespace, name, patch)
            ctx.emit(
                "Normal",
                "VolumeReattached",
                f"volume {volume.id}: reusing released PVC {name} and the data it holds",
            )
        ctx.applied(apply_object(ctx.api, specs.build_pvc(ctx.broker, volume)))
        ctx.applied(apply_object(ctx.api, specs.build_logvolume(ctx.broker, volume)))


def release_removed(ctx: Context) -> None:
    """Give up volumes that were removed from the spec after they were emptied.

    The claim is deleted only if it carries the Broker's owner reference (it was declared
    with ``deleteClaim: true``); otherwise it is kept, labelled released, with its data.
    """
    namespace = ctx.broker.namespace
    for volume_id in ctx.diff.removed:
        logvolume = ctx.logvolumes.get(volume_id)
        if logvolume is not None:
            ctx.api.delete(LOGVOLUMES, namespace, logvolume["metadata"]["name"])
        claim = ctx.claims.get(volume_id)
        if claim is None:
            continue
        name = claim["metadata"]["name"]
        owners = claim["metadata"].get("ownerReferences") or []
        if any(o.get("uid") == ctx.broker.uid for o in owners):
            ctx.api.delete(PVCS, namespace, name)
            ctx.emit("Normal", "VolumeRemoved", f"volume {volume_id}: deleted PVC {name}")
        else:
            ctx.api.patch(PVCS, namespace, name, {"metadata": {"labels": {LABEL_RELEASED: "true"}}})
            ctx.emit(
                "Normal",
                "VolumeRemoved",
                f"volume {volume_id}: kept PVC {name} (deleteClaim is false), labelled released",
            )


def apply_pod(ctx: Context) -> None:
    desired = specs.build_pod(ctx.broker)
    outcome = apply_object(ctx.api, desired)
    if outcome.action == "Replaced":
        # Unscheduled Pods go away at once; a running one finishes its grace period and the
        # next reconcile (triggered by its deletion) creates the replacement.
        ctx.applied(outcome)
        outcome = apply_object(ctx.api, desired)
        if outcome.action != "Created":
            ctx.pod = ctx.api.get(PODS, ctx.broker.namespace, ctx.broker.name)
            return
    ctx.applied(outcome)
    ctx.pod = ctx.api.get(PODS, ctx.broker.namespace, ctx.broker.name)


def volume_status(ctx: Context) -> None:
    namespace = ctx.broker.namespace
    for volume in ctx.broker.volumes:
        name = specs.logvolume_name(ctx.broker.name, volume.id)
        live = ctx.api.get(LOGVOLUMES, namespace, name)
        if live is None:
            continue
        claim = ctx.api.get(PVCS, namespace, specs.pvc_name(ctx.broker.name, volume.id))
        current = live.get("status") or {}
        wanted = specs.logvolume_status(
            volume,
            ctx.broker,
            current=current,
            pvc=claim,
            generation=int(live["metadata"].get("generation") or 0),
            now=ctx.now,
        )
        if not is_subset(wanted, current):
            ctx.api.patch(LOGVOLUMES, namespace, name, {"status": wanted}, subresource="status")
        ctx.logvolumes[volume.id] = {**live, "status": {**current, **wanted}}


def broker_status(ctx: Context) -> None:
    current = ctx.body.get("status") or {}
    statuses = [
        ctx.logvolumes[v.id].get("status") or {}
        for v in ctx.broker.volumes
        if v.id in ctx.logvolumes
    ]
    online = sum(1 for s in statuses if s.get("state") in specs.ONLINE_STATES)
    total = len(ctx.broker.volumes)
    if ctx.pod is None:
        ctx.pod = ctx.api.get(PODS, ctx.broker.namespace, ctx.broker.name)
    phase = specs.broker_phase(ctx.pod, online, total)
    if phase == "Running" and not ctx.diff.allowed:
        phase = "Degraded"  # serving, but not as declared: the refused edit is pending
    if ctx.diff.allowed:
        reconciled = Condition("Reconciled", "True", "Reconciled", "owned objects match the spec")
    else:
        reconciled = Condition("Reconciled", "False", ctx.diff.reason(), ctx.diff.message())
    ready = Condition(
        "Ready",
        "True" if phase == "Running" else "False",
        "BrokerRunning" if phase == "Running" else f"Broker{phase}",
        f"pod {ctx.broker.name} is {((ctx.pod or {}).get('status') or {}).get('phase', 'missing')}; "
        f"{online}/{total} log directories online",
    )
    wanted: dict[str, Any] = {
        "observedGeneration": ctx.broker.generation,
        "phase": phase,
        "volumes": f"{online}/{total}",
        "volumesOnline": online,
        "volumesTotal": total,
        "podName": ctx.broker.name,
        "serviceName": ctx.broker.name,
        "logDirs": specs.log_dirs(ctx.broker),
        "conditions": specs.merge_conditions(
            current.get("conditions") or [],
            [ready, reconciled],
            now=ctx.now,
            generation=ctx.broker.generation,
        ),
    }
    percent = specs.used_percent(statuses)
    if percent is not None:
        wanted["usedPercent"] = percent
    if not is_subset(wanted, current):
        ctx.api.patch(
            BROKERS,
            ctx.broker.namespace,
            ctx.broker.name,
            {"status": wanted},
            subresource="status",
        )


def _refusal_is_new(ctx: Context) -> bool:
    for cond in (ctx.body.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Reconciled":
            return not (
                cond.get("status") == "False"
                and cond.get("reason") == ctx.diff.reason()
                and cond.get("message") == ctx.diff.message()
            )
    return True


Step = Callable[[Context], None]
APPLY_STEPS: tuple[Step, ...] = (
    apply_config,
    apply_volumes,
    release_removed,
    apply_pod,
    volume_status,
)


def reconcile_broker(
    api: KubeApi, body: Mapping[str, Any], *, now: str, emit: EventSink
) -> Context:
    """Run the steps for one Broker. A refused storage change touches nothing but status."""
    ctx = Context(api=api, body=body, broker=BrokerSpec.from_body(body), now=now, emit=emit)
    read_storage(ctx)
    check_storage(ctx)
    if ctx.diff.allowed:
        for step in APPLY_STEPS:
            step(ctx)
    elif _refusal_is_new(ctx):
        ctx.emit("Warning", ctx.diff.reason(), ctx.diff.message())
    broker_status(ctx)
    return ctx
