"""kopf handlers: *when* the operator reconciles. *What* a reconcile does is ``reconcile``.

A Broker is reconciled when it is created, changed or found at start-up, and again whenever
an object it owns changes (its Pod, a claim, a LogVolume): that is how a claim becoming
bound, a Pod starting, or a LogVolume reaching ``Empty`` (which lets a refused volume removal
go ahead) show up in the Broker's status without polling. Reconciles of one Broker never
overlap (one lock per Broker; kopf runs sync handlers in a thread pool).

No timers or deletion handlers: either would make kopf put a finalizer on every Broker, and
a Broker must stay deletable (its owned objects are garbage-collected) even when the
operator is not running.

Reassignments and Rebalances likewise get no kopf timer (it would put kopf's finalizer on every one): an
event handler passes one as soon as it is created or its spec changes or it is being
deleted, and remembers the unfinished ones; one watcher thread passes each unfinished one
every ``WATCH_SECONDS``. After a restart kopf lists every Reassignment again, so the watcher
resumes exactly the unfinished ones (their state is in their status, nothing starts twice).
The only finalizer is the reconciler's own, present while data moves. These kinds are a
registry keyed by kind (``PASS_KINDS``: the resource, its final phases, its reconciler, its
metrics); the event handler and the watcher serve every entry the same way.

What every handler shares (the Kubernetes client, the pooled Kafka admin client, locks, the
probe's answers, the settings) is the ``Wiring`` in kopf's memo, made by the composition root
``spindle.operator.wiring`` in the one start-up handler, ``configure``.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kopf
from spindle.operator import metrics, specs
from spindle.operator.decisions.reassignment import FINAL_PHASES
from spindle.operator.kube import (
    BROKERS,
    REASSIGNMENTS,
    REBALANCES,
    KubeApi,
    KubeError,
    Resource,
    post_event,
)
from spindle.operator.reconcile import EventSink, reconcile_broker, refresh_broker
from spindle.operator.reconcile.reassignment import bootstrap_for, reconcile_reassignment
from spindle.operator.reconcile.rebalance import FINAL as REBALANCE_FINAL
from spindle.operator.reconcile.rebalance import reconcile_rebalance
from spindle.operator.specs import SpecError
from spindle.operator.wiring import Wiring

OWNED = {"app.kubernetes.io/managed-by": specs.MANAGED_BY}
# A failed reconcile (API server briefly unavailable, a conflict) is retried this much later
# instead of kopf's default minute.
RETRY_SECONDS = 10.0
# How often an unfinished Reassignment is looked at (progress, completion, rollback).
WATCH_SECONDS = 2.0


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def wiring(memo: Mapping[str, Any]) -> Wiring:
    """The operator's ``Wiring`` (``configure`` builds it at start-up)."""
    wired = memo.get("wiring")
    if not isinstance(wired, Wiring):
        raise kopf.TemporaryError("the operator is not wired up yet", delay=RETRY_SECONDS)
    return wired


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Keep kopf's bookkeeping in ``spindle.io`` annotations: the status schemas are
    structural, so kopf's default ``status.kopf`` would be pruned by the API server. Then
    wire the operator up (``wiring``, the composition root) and start the watcher."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="spindle.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="spindle.io", key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    # kafka-python logs every connection at INFO; one admin connection per pass would bury
    # the operator's own log.
    logging.getLogger("kafka").setLevel(logging.WARNING)
    settings.execution.max_workers = 4
    wired = Wiring.from_memo(memo)
    memo.wiring = wired
    threading.Thread(
        target=_watch_passes, args=(wired,), name="reassignment-watcher", daemon=True
    ).start()


@kopf.on.cleanup()
def close(memo: kopf.Memo, **_: Any) -> None:
    wired = memo.get("wiring")
    if isinstance(wired, Wiring):
        wired.watcher_stop.set()
        wired.api.close()


def reconcile_by_name(
    memo: Mapping[str, Any],
    namespace: str,
    name: str,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    *,
    refresh: bool = False,
) -> None:
    """Reconcile the Broker as it is now (not as an event saw it), one at a time.

    ``refresh``: only observe and write status (``reconcile.refresh_broker``, the periodic
    probe of ``volume_handlers``), and skip the Broker if a reconcile of it is running."""
    wired = wiring(memo)
    lock = wired.broker_locks(namespace, name)
    if not lock.acquire(blocking=not refresh):
        return
    started = time.monotonic()
    try:
        _reconcile_locked(wired, namespace, name, logger, refresh=refresh)
    finally:
        lock.release()
        metrics.observe_reconcile("Broker", time.monotonic() - started)


def _reconcile_locked(
    wired: Wiring,
    namespace: str,
    name: str,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    *,
    refresh: bool,
) -> None:
    api = wired.api
    body = api.get(BROKERS, namespace, name)
    if body is None or body["metadata"].get("deletionTimestamp"):
        return
    now = _now()

    def emit(type_: str, reason: str, message: str) -> None:
        logger.info("%s %s: %s", type_, reason, message)
        try:
            post_event(api, body, type_=type_, reason=reason, message=message, now=now)
        except KubeError as exc:  # an Event is a courtesy; never fail the reconcile for it
            logger.warning("could not record event %s: %s", reason, exc)

    # What the probe loop (volume_handlers) last heard from the broker: a reconcile holding
    # this Broker's lock never waits on a broker (an unreachable one costs seconds).
    probe = wired.last_probe
    shared = wired.broker_steps()
    try:
        if refresh:
            ctx = refresh_broker(
                api, body, now=now, emit=emit, probe=probe, remediator=wired.remediator,
                **shared,
            )  # fmt: skip
        else:
            ctx = reconcile_broker(api, body, now=now, emit=emit, probe=probe, **shared)
        metrics.record_logvolumes(
            namespace, name, [*ctx.logvolumes.values(), *ctx.released_logvolumes.values()]
        )
    except KubeError as exc:
        if exc.status == 403 and "being terminated" in exc.server_message:
            # The namespace is being deleted and takes the Broker with it; recreating
            # what the namespace controller just removed is neither possible nor wanted.
            logger.info("namespace %s is terminating; not reconciling %s", namespace, name)
            return
        raise
    except SpecError as exc:
        emit("Warning", "InvalidSpec", str(exc))
        raise kopf.PermanentError(str(exc)) from exc


@kopf.on.resume(specs.GROUP, specs.VERSION, "brokers", backoff=RETRY_SECONDS)
@kopf.on.create(specs.GROUP, specs.VERSION, "brokers", backoff=RETRY_SECONDS)
@kopf.on.update(specs.GROUP, specs.VERSION, "brokers", backoff=RETRY_SECONDS)
def broker_changed(
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    **_: Any,
) -> None:
    reconcile_by_name(memo, namespace or "default", name, logger)


def _user_changed_logvolume(body: Mapping[str, Any], **_: Any) -> bool:
    """A LogVolume event matters to its Broker when the user changed its spec (desiredState)
    or when it is Empty (a refused removal may now go ahead); the operator's own status
    writes would otherwise make every probe trigger a full reconcile."""
    generation = (body.get("metadata") or {}).get("generation")
    status = body.get("status") or {}
    return generation != status.get("observedGeneration") or status.get("state") == "Empty"


@kopf.on.event("", "v1", "pods", labels=OWNED)
@kopf.on.event("", "v1", "persistentvolumeclaims", labels=OWNED)
@kopf.on.event(specs.GROUP, specs.VERSION, "logvolumes", labels=OWNED, when=_user_changed_logvolume)
def owned_changed(
    namespace: str | None,
    labels: Mapping[str, str],
    memo: kopf.Memo,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    **_: Any,
) -> None:
    broker = labels.get(specs.LABEL_BROKER)
    if broker:
        reconcile_by_name(memo, namespace or "default", broker, logger)


def _emitter(
    api: KubeApi, body: Mapping[str, Any], logger: logging.Logger | logging.LoggerAdapter[Any]
) -> EventSink:
    def emit(type_: str, reason: str, message: str) -> None:
        logger.info("%s %s: %s", type_, reason, message)
        try:
            post_event(api, dict(body), type_=type_, reason=reason, message=message, now=_now())
        except KubeError as exc:  # an Event is a courtesy; never fail the pass for it
            logger.warning("could not record event %s: %s", reason, exc)

    return emit


@dataclass(frozen=True)
class PassKind:
    """A kind passed by the event handler and the watcher until its status is final: how to
    read one, how to pass it (its reconciler), what is final, and what the metrics hear."""

    kind: str
    resource: Resource
    final: frozenset[str]
    #: One pass: the reconciler's call, the new status back.
    run: Callable[[Wiring, Mapping[str, Any], datetime.datetime, EventSink], Mapping[str, Any]]
    #: After a pass (namespace, name, status, finished) and when the object is gone (None).
    record: Callable[[str, str, Mapping[str, Any] | None, bool], None] = lambda *_: None


def _pass_reassignment(
    wired: Wiring, body: Mapping[str, Any], now: datetime.datetime, emit: EventSink
) -> Mapping[str, Any]:
    return reconcile_reassignment(
        wired.api, body, now=now, emit=emit, bootstrap=wired.settings.bootstrap
    )


def _record_reassignment(
    namespace: str, name: str, status: Mapping[str, Any] | None, finished: bool
) -> None:
    left = 0
    if status is not None and not finished:
        left = int(status.get("bytesTotal") or 0) - int(status.get("bytesDone") or 0)
    metrics.record_moving("reassignment", (namespace, name), left)


def _pass_rebalance(
    wired: Wiring, body: Mapping[str, Any], now: datetime.datetime, emit: EventSink
) -> Mapping[str, Any]:
    namespace = body["metadata"]["namespace"]
    cluster = (body.get("spec") or {}).get("cluster", "")
    return reconcile_rebalance(
        wired.api,
        body,
        now=now,
        emit=emit,
        image=wired.settings.planner_image,
        bootstrap=bootstrap_for(wired.api, namespace, cluster, wired.settings.bootstrap),
    )


#: The kinds passed until final, by plural (kopf's ``resource.plural``). Adding a kind that
#: runs to completion: its reconciler module in ``reconcile/`` and one entry here.
PASS_KINDS: dict[str, PassKind] = {
    "reassignments": PassKind(
        "Reassignment", REASSIGNMENTS, FINAL_PHASES, _pass_reassignment, _record_reassignment
    ),
    "rebalances": PassKind("Rebalance", REBALANCES, REBALANCE_FINAL, _pass_rebalance),
}


def pass_once(
    wired: Wiring,
    plural: str,
    namespace: str,
    name: str,
    logger: logging.Logger | logging.LoggerAdapter[Any],
) -> None:
    """One pass over a Reassignment or Rebalance as it is now; remembered while unfinished."""
    kind = PASS_KINDS[plural]
    key = (plural, namespace, name)
    started = time.monotonic()
    with wired.pass_locks(plural + "/" + namespace, name):
        now = datetime.datetime.now(datetime.UTC)
        body = wired.api.get(kind.resource, namespace, name)
        if body is None:
            wired.unfinished.discard(key)
            kind.record(namespace, name, None, True)
            return
        status = kind.run(wired, body, now, _emitter(wired.api, body, logger))
        finished = status.get("phase") in kind.final
        kind.record(namespace, name, status, finished)
        if finished:
            wired.unfinished.discard(key)
        else:
            wired.unfinished.add(key)
    metrics.observe_reconcile(kind.kind, time.monotonic() - started)


def progress_event(
    event: Mapping[str, Any],
    body: Mapping[str, Any],
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    resource: kopf.Resource,
    **_: Any,
) -> None:
    """A Reassignment's or a Rebalance's event (kopf says which in ``resource``): pass at once
    when new, changed (``spec.cancel``, ``spec.approve``, ``spec.stop``, the approve
    annotation), being deleted, or first seen by this operator (start-up); its own status
    writes are left to the watcher."""
    wired = wiring(memo)
    plural = resource.plural
    key = (plural, namespace or "default", name)
    if event.get("type") == "DELETED":
        wired.unfinished.discard(key)
        return
    meta, status = body.get("metadata") or {}, body.get("status") or {}
    changed = status.get("observedGeneration") != meta.get("generation")
    approve = (meta.get("annotations") or {}).get("spindle.io/approve")
    if status.get("phase") in PASS_KINDS[plural].final and not changed:
        return
    if changed or meta.get("deletionTimestamp") or approve or key not in wired.unfinished:
        pass_once(wired, plural, key[1], name, logger)


for _plural in PASS_KINDS:
    kopf.on.event(specs.GROUP, specs.VERSION, _plural)(progress_event)


def _watch_passes(wired: Wiring) -> None:
    """Every ``WATCH_SECONDS``, one pass over each unfinished Reassignment and Rebalance."""
    logger = logging.getLogger("spindle.operator.watcher")
    while not wired.watcher_stop.wait(WATCH_SECONDS):
        for plural, namespace, name in sorted(wired.unfinished.copy()):
            try:
                pass_once(wired, plural, namespace, name, logger)
            except Exception:  # one failing pass must not stop the watcher
                logger.exception("pass over %s %s/%s failed", plural, namespace, name)
