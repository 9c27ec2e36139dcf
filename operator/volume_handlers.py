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
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import kopf
from spindle.operator import handlers, metrics, registry, specs
from spindle.operator.brokers import AdminPool
from spindle.operator.decisions.reassignment import ClusterView
from spindle.operator.decisions.remediation_settings import RemediationSettings
from spindle.operator.decisions.volume_state import (
    HEALTH_ABNORMAL,
    HEALTH_NORMAL,
    BrokerUnreachable,
    DirReport,
)
from spindle.operator.kube import BROKERS, PVCS, KubeApi, KubeError
from spindle.operator.reconcile.remediation import Remediator, fix_offline_plan
from spindle.operator.specs import BrokerSpec, SpecError

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
            api = self._memo.get("api")
            body = api.get(BROKERS, namespace, name) if isinstance(api, KubeApi) else None
            if body is None:
                return
            # An unreachable broker is recorded for the reconcile; a bad spec it reports.
            with contextlib.suppress(BrokerUnreachable, SpecError):
                defaults = self._memo.get("config_defaults")
                self._memo.probe(BrokerSpec.from_body(body, config_defaults=defaults))
            handlers.reconcile_by_name(self._memo, namespace, name, LOG, refresh=True)
        except Exception as exc:  # a probe must never stop the loop; the next one retries
            LOG.warning("refreshing Broker %s/%s failed: %s", namespace, name, exc)


def with_directory_ids(
    reader: registry.DirectoryIdReader, broker: BrokerSpec, reports: list[DirReport]
) -> list[DirReport]:
    """``reports`` with each directory's id from the broker's registration in etcd (its
    ``spindle.etcd.endpoints``/``prefix``, see ``spindle.operator.registry``). Read after
    DescribeLogDirs answered: a broker registers before it serves requests, so a restarted
    broker's answer is never paired with its previous registration. An unreadable registration
    costs only the ids (logged), never the probe; the reader backs off from an etcd that is
    down so that a probe does not wait on it."""
    endpoints = [
        e.strip() for e in broker.config.get("spindle.etcd.endpoints", "").split(",") if e.strip()
    ]
    prefix = broker.config.get("spindle.etcd.prefix", registry.DEFAULT_PREFIX)
    ids, error = reader.read_or_error(endpoints, prefix, broker.broker_id)
    if error is not None:
        LOG.warning("Broker %s/%s: directory ids unknown: %s", broker.namespace, broker.name, error)
    if ids is None:
        return reports
    return [replace(r, directory_id=ids.get(r.path)) for r in reports]


def bootstrap_servers(broker: BrokerSpec, overrides: Mapping[str, str]) -> list[str]:
    """Where to ask ``broker``: ``--bootstrap CLUSTER=HOST:PORT`` when the operator was given
    one for its cluster (brokers outside Kubernetes, an operator outside the cluster), else
    the broker's own Service (``<name>.<namespace>.svc:<port>``)."""
    if broker.cluster in overrides:
        return overrides[broker.cluster].split(",")
    return [f"{broker.name}.{broker.namespace}.svc:{broker.port}"]


@kopf.on.startup()
def start_probes(memo: kopf.Memo, **_: Any) -> None:
    clients = AdminPool()
    overrides: Mapping[str, str] = memo.get("bootstrap") or {}

    last: dict[tuple[str, str], list[DirReport] | BrokerUnreachable] = {}
    ids = registry.DirectoryIdReader()

    def probe(broker: BrokerSpec) -> list[DirReport]:
        key = (broker.namespace, broker.name)
        try:
            reports = clients.describe_dirs(bootstrap_servers(broker, overrides), broker.broker_id)
        except BrokerUnreachable as exc:
            last[key] = exc
            raise
        reports = with_directory_ids(ids, broker, reports)
        last[key] = reports
        return reports

    def last_probe(broker: BrokerSpec) -> list[DirReport]:
        """What the probe loop last heard: event-driven reconciles must not wait on a broker
        (an unreachable one costs seconds of retries)."""
        answer = last.get((broker.namespace, broker.name))
        if answer is None:
            raise BrokerUnreachable(f"broker {broker.broker_id} has not been probed yet")
        if isinstance(answer, BrokerUnreachable):
            raise answer
        return answer

    # kafka-python logs every failed bootstrap attempt; a broker that is down is reported in
    # its LogVolumes' Reported condition instead.
    logging.getLogger("kafka").setLevel(logging.ERROR)

    def cordon(broker: BrokerSpec, paths: list[str]) -> None:
        clients.set_cordoned(bootstrap_servers(broker, overrides), broker.broker_id, paths)

    def move(
        broker: BrokerSpec, moves: Mapping[tuple[str, int], str]
    ) -> dict[tuple[str, int], str]:
        return clients.move_replicas(bootstrap_servers(broker, overrides), broker.broker_id, moves)

    def cluster_view(broker: BrokerSpec, topics: Sequence[str]) -> ClusterView:
        servers = bootstrap_servers(broker, overrides)
        return clients.cluster_view(servers, broker.cluster, topics)

    settings = memo.get("remediation")
    memo.remediator = Remediator(
        settings=settings if isinstance(settings, RemediationSettings) else RemediationSettings(),
        metadata=clients.partition_states,
        overrides=overrides,
        planner=fix_offline_plan,
    )
    memo.cordon = cordon
    memo.move = move
    memo.cluster_view = cluster_view
    memo.logdir_clients = clients
    memo.last_probe = last_probe
    memo.failed_pvs = {}
    memo.probe = probe
    memo.probe_loop = ProbeLoop(memo, float(memo.get("probe_period") or 2.0))
    memo.probe_loop.start()


@kopf.on.cleanup()
def stop_probes(memo: kopf.Memo, **_: Any) -> None:
    loop = memo.get("probe_loop")
    if isinstance(loop, ProbeLoop):
        loop.stop()
    clients = memo.get("logdir_clients")
    if isinstance(clients, AdminPool):
        clients.close()


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
    api = memo.get("api")
    if not isinstance(api, KubeApi):
        return
    try:
        claim = api.get(PVCS, namespace, claim_name)
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
        name = (body.get("metadata") or {}).get("name")
        detail = status.get("message") or status.get("reason") or "no reason given"
        memo.failed_pvs[name] = str(detail)
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
