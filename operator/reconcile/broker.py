"""Broker reconciliation as a short list of named steps, status written last.

The kopf handlers (``spindle.operator.handlers``) only decide *when* to reconcile; this module
says *what* a reconcile is, in order (the Strimzi ``KafkaReconciler.reconcile()`` shape):

1. ``read_storage``: the claims and LogVolumes the broker owns now;
2. ``check_storage``: the pure storage diff; a refused change stops here (nothing touched);
3. ``apply_config``: ConfigMap and Service;
4. ``apply_volumes``: claims (created or grown) and LogVolumes;
5. ``release_removed``: removed, emptied volumes are released (claim deleted per
   deleteClaim, else kept; LogVolume ``Released``), and taken back when declared again
   (``reattach_released``, before step 4) -- both in ``reconcile.release``;
6. ``apply_pod``: the Pod, replaced when its volumes or settings changed -- by the roller
   (``reconcile.roller``), the one step that restarts a broker;
7. ``volume_status``: each LogVolume's status from its claim;
8. ``broker_status``: phase, volume counts, conditions, observedGeneration.

The volume steps (1, 2, 4, 5, 7) live in ``reconcile.logvolume``. Time and the Event sink are
injected (keyword-only) so that tests and the handlers decide them. Events are emitted only
for things that happened, so an idle reconcile is silent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from spindle.operator import specs
from spindle.operator.kube import BROKERS, PODS, KubeApi, apply_object, is_subset
from spindle.operator.reconcile.context import (
    Context,
    Cordoner,
    EventSink,
    Mover,
    Prober,
    Viewer,
)
from spindle.operator.reconcile.drain import drain_progress, drain_volumes
from spindle.operator.reconcile.logvolume import (
    apply_cordons,
    apply_volumes,
    check_storage,
    observe_volumes,
    read_storage,
    volume_status,
)
from spindle.operator.reconcile.release import read_released, reattach_released, release_removed
from spindle.operator.reconcile.remediation import broker_condition, remediate
from spindle.operator.reconcile.roller import roll_pod
from spindle.operator.specs import BrokerSpec, Condition
from spindle.operator.specs.broker_status import broker_conditions


def apply_config(ctx: Context) -> None:
    ctx.applied(apply_object(ctx.api, specs.build_configmap(ctx.broker)))
    ctx.applied(apply_object(ctx.api, specs.build_service(ctx.broker)))


def apply_pod(ctx: Context) -> None:
    """The Pod through the roller (``reconcile.roller``), the only step that restarts it."""
    desired = specs.build_pod(ctx.broker)
    outcome = roll_pod(ctx.api, desired)
    if outcome.action == "Replaced":
        # Unscheduled Pods go away at once; a running one finishes its grace period and the
        # next reconcile (triggered by its deletion) creates the replacement.
        ctx.applied(outcome)
        outcome = roll_pod(ctx.api, desired)
        if outcome.action != "Created":
            ctx.pod = ctx.api.get(PODS, ctx.broker.namespace, ctx.broker.name)
            return
    ctx.applied(outcome)
    ctx.pod = ctx.api.get(PODS, ctx.broker.namespace, ctx.broker.name)


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
    phase, ready, reconciled, degraded = broker_conditions(
        ctx.broker.name,
        ctx.pod,
        [
            (specs.logvolume_name(ctx.broker.name, v.id), ctx.logvolumes[v.id].get("status") or {})
            for v in ctx.broker.volumes
            if v.id in ctx.logvolumes
        ],
        declared=total,
        refusal=None if ctx.diff.allowed else (ctx.diff.reason(), ctx.diff.message()),
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
            [ready, reconciled, degraded, _remediating(ctx)],
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


def _remediating(ctx: Context) -> Condition:
    return broker_condition(
        {
            specs.logvolume_name(ctx.broker.name, v): lv.get("status") or {}
            for v, lv in ctx.logvolumes.items()
        }
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
#: The writing steps, in order. They run only when the storage change is allowed (a refused
#: change touches nothing but status); reading and checking come first, status last.
STEPS: tuple[Step, ...] = (
    apply_config,
    reattach_released,
    apply_volumes,
    release_removed,
    apply_pod,
    observe_volumes,
    apply_cordons,
    drain_progress,
    volume_status,
)
#: Draining runs only in refreshes, which ask the broker first: a move chosen from an older
#: answer could send a replica already on its way elsewhere somewhere else (a restart of it).
#: What a periodic refresh runs (``refresh_broker``): the observing steps only, so a probe
#: every few seconds costs reads and, when something changed, status writes -- never an apply.
#: Remediation (``reconcile.remediation``) likewise decides only on a fresh answer.
REFRESH_STEPS: tuple[Step, ...] = (
    observe_volumes,
    apply_cordons,
    drain_volumes,
    remediate,
    volume_status,
)


def _begin(
    api: KubeApi,
    body: Mapping[str, Any],
    *,
    failed_pvs: Mapping[str, str] | None,
    config_defaults: Mapping[str, str] | None,
    **options: Any,
) -> Context:
    """A pass's Context with the storage read and checked: how both passes begin
    (``options`` are Context's own fields: now, emit, probe, cordon, move, ...)."""
    ctx = Context(
        api=api,
        body=body,
        broker=BrokerSpec.from_body(body, config_defaults=config_defaults),
        failed_pvs=failed_pvs or {},
        **options,
    )
    read_storage(ctx)
    read_released(ctx)
    check_storage(ctx)
    return ctx


def reconcile_broker(
    api: KubeApi,
    body: Mapping[str, Any],
    *,
    now: str,
    emit: EventSink,
    probe: Prober | None = None,
    failed_pvs: Mapping[str, str] | None = None,
    cordon: Cordoner | None = None,
    move: Mover | None = None,
    cluster_view: Viewer | None = None,
    config_defaults: Mapping[str, str] | None = None,
) -> Context:
    """Run the steps for one Broker. A refused storage change touches nothing but status."""
    ctx = _begin(
        api, body, failed_pvs=failed_pvs, config_defaults=config_defaults, now=now, emit=emit,
        probe=probe, cordon=cordon, move=move, cluster_view=cluster_view,
    )  # fmt: skip
    if ctx.diff.allowed:
        for step in STEPS:
            step(ctx)
    elif _refusal_is_new(ctx):
        ctx.emit("Warning", ctx.diff.reason(), ctx.diff.message())
    broker_status(ctx)
    return ctx


def refresh_broker(
    api: KubeApi,
    body: Mapping[str, Any],
    *,
    now: str,
    emit: EventSink,
    probe: Prober,
    failed_pvs: Mapping[str, str] | None = None,
    cordon: Cordoner | None = None,
    move: Mover | None = None,
    cluster_view: Viewer | None = None,
    remediator: Any = None,
    config_defaults: Mapping[str, str] | None = None,
) -> Context:
    """The periodic pass: observe the broker's volumes (DescribeLogDirs, claims, PVs, health
    Events, node) and write LogVolume and Broker status. Applies nothing."""
    ctx = _begin(
        api, body, failed_pvs=failed_pvs, config_defaults=config_defaults, now=now, emit=emit,
        probe=probe, cordon=cordon, move=move, cluster_view=cluster_view, remediator=remediator,
    )  # fmt: skip
    if not ctx.diff.allowed and _refusal_is_new(ctx):
        # Whichever pass first writes the refusal into the condition says so once: a later
        # reconcile finds the condition already there and stays silent.
        ctx.emit("Warning", ctx.diff.reason(), ctx.diff.message())
    for step in REFRESH_STEPS:
        step(ctx)
    broker_status(ctx)
    return ctx
