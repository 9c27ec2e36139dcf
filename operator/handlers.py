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
The only finalizer is the reconciler's own, present while data moves.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import kopf
from spindle.operator import metrics, specs
from spindle.operator.decisions.reassignment import FINAL_PHASES
from spindle.operator.kube import BROKERS, REASSIGNMENTS, REBALANCES, KubeApi, KubeError, post_event
from spindle.operator.reconcile import reconcile_broker, refresh_broker
from spindle.operator.reconcile.reassignment import bootstrap_for, reconcile_reassignment
from spindle.operator.reconcile.rebalance import FINAL as REBALANCE_FINAL
from spindle.operator.reconcile.rebalance import reconcile_rebalance
from spindle.operator.specs import SpecError

OWNED = {"app.kubernetes.io/managed-by": specs.MANAGED_BY}
# A failed reconcile (API server briefly unavailable, a conflict) is retried this much later
# instead of kopf's default minute.
RETRY_SECONDS = 10.0
# How often an unfinished Reassignment is looked at (progress, completion, rollback).
WATCH_SECONDS = 2.0


class BrokerLocks:
    """One lock per Broker, so that reconciles of one Broker never overlap (kopf runs sync
    handlers in a thread pool, and a Broker's own events and its owned objects' events may
    arrive together)."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def __call__(self, namespace: str, name: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((namespace, name), threading.Lock())


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _api(memo: kopf.Memo) -> KubeApi:
    api = memo.get("api")
    if not isinstance(api, KubeApi):
        raise kopf.TemporaryError(
            "the Kubernetes API client is not set up yet", delay=RETRY_SECONDS
        )
    return api


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Keep kopf's bookkeeping in ``spindle.io`` annotations: the status schemas are
    structural, so kopf's default ``status.kopf`` would be pruned by the API server.

    The API client and the per-Broker locks go into kopf's memo, which kopf hands (shallow
    copied, so shared) to every handler: no module-global state, and a second operator in the
    same process (tests) gets its own."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="spindle.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="spindle.io", key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    # kafka-python logs every connection at INFO; one admin connection per pass would bury
    # the operator's own log.
    logging.getLogger("kafka").setLevel(logging.WARNING)
    settings.execution.max_workers = 4
    memo.api = KubeApi.from_environment()
    memo.locks = BrokerLocks()
    memo.reassignment_locks = BrokerLocks()
    memo.unfinished = set()
    memo.setdefault("bootstrap", {})
    memo.setdefault("planner_image", "spindle:latest")
    memo.watcher_stop = threading.Event()
    threading.Thread(
        target=_watch_reassignments, args=(memo,), name="reassignment-watcher", daemon=True
    ).start()


@kopf.on.cleanup()
def close(memo: kopf.Memo, **_: Any) -> None:
    stop = memo.get("watcher_stop")
    if isinstance(stop, threading.Event):
        stop.set()
    api = memo.pop("api", None)
    if isinstance(api, KubeApi):
        api.close()


def reconcile_by_name(
    memo: kopf.Memo,
    namespace: str,
    name: str,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    *,
    refresh: bool = False,
) -> None:
    """Reconcile the Broker as it is now (not as an event saw it), one at a time.

    ``refresh``: only observe and write status (``reconcile.refresh_broker``, the periodic
    probe of ``volume_handlers``), and skip the Broker if a reconcile of it is running."""
    api = _api(memo)
    lock = memo.locks(namespace, name)
    if not lock.acquire(blocking=not refresh):
        return
    started = time.monotonic()
    try:
        _reconcile_locked(api, memo, namespace, name, logger, refresh=refresh)
    finally:
        lock.release()
        metrics.observe_reconcile("Broker", time.monotonic() - started)


def _reconcile_locked(
    api: KubeApi,
    memo: kopf.Memo,
    namespace: str,
    name: str,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    *,
    refresh: bool,
) -> None:
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
    probe = memo.get("last_probe")
    # What both passes take from the operator's memo (the probe loop's clients and answers).
    shared = {k: memo.get(k) for k in ("failed_pvs", "cordon", "move", "cluster_view",
                                        "config_defaults")}  # fmt: skip
    try:
        if refresh and probe is not None:
            ctx = refresh_broker(
                api, body, now=now, emit=emit, probe=probe, remediator=memo.get("remediator"),
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
) -> Any:
    def emit(type_: str, reason: str, message: str) -> None:
        logger.info("%s %s: %s", type_, reason, message)
        try:
            post_event(api, dict(body), type_=type_, reason=reason, message=message, now=_now())
        except KubeError as exc:  # an Event is a courtesy; never fail the pass for it
            logger.warning("could not record event %s: %s", reason, exc)

    return emit


def pass_once(
    memo: kopf.Memo,
    kind: str,
    namespace: str,
    name: str,
    logger: logging.Logger | logging.LoggerAdapter[Any],
) -> None:
    """One pass over a Reassignment or Rebalance as it is now; remembered while unfinished."""
    api = _api(memo)
    key = (kind, namespace, name)
    started = time.monotonic()
    with memo.reassignment_locks(kind + "/" + namespace, name):
        now = datetime.datetime.now(datetime.UTC)
        if kind == "reassignments":
            body = api.get(REASSIGNMENTS, namespace, name)
            if body is None:
                memo.unfinished.discard(key)
                metrics.record_moving("reassignment", (namespace, name), 0)
                return
            status = reconcile_reassignment(
                api, body, now=now, emit=_emitter(api, body, logger), bootstrap=memo.bootstrap
            )
            finished = status.get("phase") in FINAL_PHASES
            left = int(status.get("bytesTotal") or 0) - int(status.get("bytesDone") or 0)
            metrics.record_moving("reassignment", (namespace, name), 0 if finished else left)
        else:
            body = api.get(REBALANCES, namespace, name)
            if body is None:
                memo.unfinished.discard(key)
                return
            cluster = (body.get("spec") or {}).get("cluster", "")
            status = reconcile_rebalance(
                api,
                body,
                now=now,
                emit=_emitter(api, body, logger),
                image=memo.planner_image,
                bootstrap=bootstrap_for(api, namespace, cluster, memo.bootstrap),
            )
            finished = status.get("phase") in REBALANCE_FINAL
        if finished:
            memo.unfinished.discard(key)
        else:
            memo.unfinished.add(key)
    metrics.observe_reconcile(
        "Reassignment" if kind == "reassignments" else "Rebalance", time.monotonic() - started
    )


#: Final phases of the two kinds ``progress_event`` takes, by plural.
FINAL_BY_KIND = {"reassignments": FINAL_PHASES, "rebalances": REBALANCE_FINAL}


@kopf.on.event(specs.GROUP, specs.VERSION, "reassignments")
@kopf.on.event(specs.GROUP, specs.VERSION, "rebalances")
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
    kind = resource.plural
    key = (kind, namespace or "default", name)
    if event.get("type") == "DELETED":
        memo.unfinished.discard(key)
        return
    meta, status = body.get("metadata") or {}, body.get("status") or {}
    changed = status.get("observedGeneration") != meta.get("generation")
    approve = (meta.get("annotations") or {}).get("spindle.io/approve")
    if status.get("phase") in FINAL_BY_KIND[kind] and not changed:
        return
    if changed or meta.get("deletionTimestamp") or approve or key not in memo.unfinished:
        pass_once(memo, kind, key[1], name, logger)


def _watch_reassignments(memo: kopf.Memo) -> None:
    """Every ``WATCH_SECONDS``, one pass over each unfinished Reassignment and Rebalance."""
    logger = logging.getLogger("spindle.operator.watcher")
    while not memo.watcher_stop.wait(WATCH_SECONDS):
        for kind, namespace, name in sorted(memo.unfinished.copy()):
            try:
                pass_once(memo, kind, namespace, name, logger)
            except Exception:  # one failing pass must not stop the watcher
                logger.exception("pass over %s %s/%s failed", kind, namespace, name)
