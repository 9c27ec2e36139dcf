"""kopf handlers that keep every LogVolume's status fresh: *when* the operator looks at disks.

Two ways in, both ending in ``handlers.reconcile_by_name(refresh=True)`` (observe and write
status, apply nothing):

* a probe loop (a thread started with the operator) that refreshes every known Broker each
  ``--probe-period`` seconds: DescribeLogDirs to the broker, its claims, PVs, health Events
  and node. A broker's own failure reports (KAFKA_STORAGE_ERROR) are seen this way;
* events that name a failure before the next probe: a PV changing (``Failed``), a volume
  health Event on a claim. Claims and Pods already trigger a Broker reconcile
  (``handlers.owned_changed``).

No timers or daemons on Brokers or LogVolumes: kopf would put a finalizer on each, and a
Broker must stay deletable when the operator is down. Which Brokers exist is learnt from
kopf's watch (``on.event``, no finalizer) into an in-memory set; a restarted operator relearns
it from the watch's initial listing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import kopf
from spindle.operator import handlers, metrics, specs
from spindle.operator.decisions.volume_state import (
    HEALTH_ABNORMAL,
    HEALTH_NORMAL,
    BrokerUnreachable,
)
from spindle.operator.kube import BROKERS, PVCS, KubeError
from spindle.operator.specs import SpecError
from spindle.operator.wiring import Wiring

LOG = logging.getLogger("spindle.operator.volumes")


class ProbeLoop:
    """Refreshes every known Broker each period, each in a worker of its own so that one
    unreachable broker (its DescribeLogDirs retrying) does not delay the others' probes; a
    Broker whose previous refresh is still running is skipped this round."""

    def __init__(self, memo: kopf.Memo, period: float, workers: int = 4) -> None:
        self._memo = memo
        self._period = period
        self._known: set[tuple[str, str]] = set()
        self._guard = threading.Lock()
        self._running: dict[tuple[str, str], Future[None]] = {}
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="probe")
        self._thread = threading.Thread(target=self._run, name="probe-loop", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def known(self, namespace: str, name: str, present: bool) -> None:
        with self._guard:
            if present:
                self._known.add((namespace, name))
            else:
                self._known.discard((namespace, name))

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            with self._guard:
                brokers = sorted(self._known)
            for key in brokers:
                running = self._running.get(key)
                if running is not None and not running.done():
                    continue
                self._running[key] = self._pool.submit(self._refresh, *key)

    def _refresh(self, namespace: str, name: str) -> None:
        """Ask the broker first, outside the Broker's lock, then write status from it."""
        try:
            wired = self._memo.get("wiring")
            if not isinstance(wired, Wiring):
                return
            body = wired.api.get(BROKERS, namespace, name)
            if body is None:
                return
            # An unreachable broker is recorded for the reconcile; a bad spec it reports.
            with contextlib.suppress(BrokerUnreachable, SpecError):
                wired.probe(wired.broker_spec(body))
            handlers.reconcile_by_name(self._memo, namespace, name, LOG, refresh=True)
        except Exception as exc:  # a probe must never stop the loop; the next one retries
            LOG.warning("refreshing Broker %s/%s failed: %s", namespace, name, exc)


@kopf.on.startup()
def start_probes(memo: kopf.Memo, **_: Any) -> None:
    """Start the probe loop (its answers and clients are the ``Wiring``'s, made by
    ``handlers.configure``, which kopf runs first: it is registered first)."""
    # kafka-python logs every failed bootstrap attempt; a broker that is down is reported in
    # its LogVolumes' Reported condition instead.
    logging.getLogger("kafka").setLevel(logging.ERROR)
    memo.probe_loop = ProbeLoop(memo, handlers.wiring(memo).settings.probe_period)
    memo.probe_loop.start()


@kopf.on.cleanup()
def stop_probes(memo: kopf.Memo, **_: Any) -> None:
    loop = memo.get("probe_loop")
    if isinstance(loop, ProbeLoop):
        loop.stop()
    wired = memo.get("wiring")
    if isinstance(wired, Wiring):
        wired.admin.close()


@kopf.on.event(specs.GROUP, specs.VERSION, "brokers")
def broker_seen(
    type: str | None,
    namespace: str | None,
    name: str,
    body: Mapping[str, Any],
    memo: kopf.Memo,
    **_: Any,
) -> None:
    loop = memo.get("probe_loop")
    if isinstance(loop, ProbeLoop):
        gone = type == "DELETED" or bool((body.get("metadata") or {}).get("deletionTimestamp"))
        loop.known(namespace or "default", name, not gone)
        if gone:
            metrics.forget_broker(namespace or "default", name)


def _refresh_claim_owner(
    memo: kopf.Memo, namespace: str, claim_name: str, logger: logging.Logger | Any
) -> None:
    wired = memo.get("wiring")
    if not isinstance(wired, Wiring):
        return
    try:
        claim = wired.api.get(PVCS, namespace, claim_name)
    except KubeError:
        return
    broker = ((claim or {}).get("metadata", {}).get("labels") or {}).get(specs.LABEL_BROKER)
    if broker:
        handlers.reconcile_by_name(memo, namespace, broker, logger)


def _claimed(body: Mapping[str, Any], **_: Any) -> bool:
    return bool((body.get("spec") or {}).get("claimRef"))


@kopf.on.event("", "v1", "persistentvolumes", when=_claimed)
def volume_changed(
    body: Mapping[str, Any], memo: kopf.Memo, logger: logging.Logger | Any, **_: Any
) -> None:
    """A PV's phase changed (``Failed``, released): refresh the Broker whose claim it backs.
    A ``Failed`` phase is remembered (the PV controller puts a bound PV back to ``Bound``
    at once, so the reconcile's own read may miss it)."""
    status = body.get("status") or {}
    if status.get("phase") == "Failed":
        name = str((body.get("metadata") or {}).get("name"))
        detail = status.get("message") or status.get("reason") or "no reason given"
        handlers.wiring(memo).failed_pvs[name] = str(detail)
    ref = (body.get("spec") or {}).get("claimRef") or {}
    if ref.get("namespace") and ref.get("name"):
        _refresh_claim_owner(memo, ref["namespace"], ref["name"], logger)


def _health_event(body: Mapping[str, Any], **_: Any) -> bool:
    involved = body.get("involvedObject") or {}
    return involved.get("kind") == "PersistentVolumeClaim" and body.get("reason") in (
        HEALTH_ABNORMAL,
        HEALTH_NORMAL,
    )


@kopf.on.event("", "v1", "events", when=_health_event)
def volume_health_reported(
    body: Mapping[str, Any], memo: kopf.Memo, logger: logging.Logger | Any, **_: Any
) -> None:
    """A volume-health Event on a claim (Kubernetes' health monitor or kubelet)."""
    involved = body.get("involvedObject") or {}
    namespace = involved.get("namespace") or (body.get("metadata") or {}).get("namespace")
    if namespace and involved.get("name"):
        _refresh_claim_owner(memo, namespace, involved["name"], logger)
