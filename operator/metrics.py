"""The operator's own Prometheus metrics (``prometheus_client``), served by ``--metrics``.

Why a module of its own: every part of the operator that acts (reconcilers, the probe loop,
remediation) reports here, and one registry is what ``/metrics`` serves. The metrics live in
``REGISTRY`` (not prometheus_client's global default registry) so that importing the operator
in a process that serves its own metrics (a test, an embedding) registers nothing there.

What is exported (all names prefixed ``spindle_operator_``):

* ``logvolumes{state}``: LogVolumes by ``status.state`` as the operator last wrote or saw
  them (every state of the CRD's enum is exported, zeros included, so a dashboard can sum);
* ``remediations_started_total{action}``, ``remediations_succeeded_total{action}``,
  ``remediations_failed_total{action}``: remediations of failed volumes (``action`` is the
  policy: ``ReplaceVolume``, ``MoveReplicas``), counted by the remediation code;
* ``rebalance_proposals_total``, ``rebalance_approvals_total``,
  ``rebalance_executions_total{result}``: a Rebalance's proposal ready, approved, and its
  execution ended (``Completed``, ``Failed``, ``Stopped``);
* ``bytes_moving{kind}``: bytes still to move, ``drain`` (what Draining LogVolumes still
  hold) and ``reassignment`` (bytesTotal - bytesDone of the Reassignments in flight);
* ``last_reconcile_duration_seconds{kind}`` and ``reconciles_total{kind}``: how long the last
  reconcile of a Broker (or a pass over a Reassignment or Rebalance) took, and how many ran.

Thread-safe: prometheus_client's metrics are, and ``KeyedGauge`` takes a lock. Pure
bookkeeping, no I/O but the HTTP server ``register_server`` starts with the operator.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import kopf
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "spindle_operator"
#: The states of a LogVolume (the CRD's ``status.state`` enum), each exported even when zero.
VOLUME_STATES = (
    "Pending",
    "Active",
    "Cordoned",
    "Draining",
    "Empty",
    "Offline",
    "Replacing",
    "Rebuilding",
    "Released",
)
#: Remediation actions (a Broker's remediation policy), each exported even when zero.
REMEDIATION_ACTIONS = ("ReplaceVolume", "MoveReplicas")

REGISTRY = CollectorRegistry(auto_describe=True)


class KeyedGauge(Collector):
    """A gauge whose value per label is the sum of what each object contributes.

    Objects (a Broker's volumes, a Reassignment) come and go; each says what it contributes
    now (``set``) under a key of its own, and is forgotten when it goes (``forget``), so a
    deleted object never leaves a stale value behind, which a plain labelled Gauge would.
    """

    def __init__(
        self, name: str, documentation: str, label: str, *, always: Iterable[str] = ()
    ) -> None:
        self._name = name
        self._doc = documentation
        self._label = label
        self._always = tuple(always)
        self._values: dict[tuple[str, ...], dict[str, float]] = {}
        self._lock = threading.Lock()

    def set(self, key: tuple[str, ...], values: Mapping[str, float]) -> None:
        """What the object ``key`` contributes now, per label value (replacing what it did)."""
        with self._lock:
            self._values[key] = dict(values)

    def forget(self, key: tuple[str, ...]) -> None:
        with self._lock:
            self._values.pop(key, None)

    def value(self, label: str) -> float:
        """The exported value for one label value (what a scrape would show)."""
        with self._lock:
            return sum(v.get(label, 0.0) for v in self._values.values())

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            totals: dict[str, float] = dict.fromkeys(self._always, 0.0)
            for contribution in self._values.values():
                for label, value in contribution.items():
                    totals[label] = totals.get(label, 0.0) + value
        family = GaugeMetricFamily(self._name, self._doc, labels=[self._label])
        for label in sorted(totals):
            family.add_metric([label], totals[label])
        yield family

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self._name, self._doc, labels=[self._label])


VOLUMES = KeyedGauge(
    f"{PREFIX}_logvolumes",
    "LogVolumes by status.state, as the operator last wrote or saw them.",
    "state",
    always=VOLUME_STATES,
)
BYTES_MOVING = KeyedGauge(
    f"{PREFIX}_bytes_moving",
    "Bytes still to move: drain (left in Draining LogVolumes), reassignment (in flight).",
    "kind",
    always=("drain", "reassignment"),
)
REGISTRY.register(VOLUMES)
REGISTRY.register(BYTES_MOVING)

REMEDIATIONS_STARTED = Counter(
    f"{PREFIX}_remediations_started",
    "Remediations of failed volumes started, by action.",
    ["action"],
    registry=REGISTRY,
)
REMEDIATIONS_SUCCEEDED = Counter(
    f"{PREFIX}_remediations_succeeded",
    "Remediations that brought their volume back (Active), by action.",
    ["action"],
    registry=REGISTRY,
)
REMEDIATIONS_FAILED = Counter(
    f"{PREFIX}_remediations_failed",
    "Remediations that gave up (the volume stays Offline), by action.",
    ["action"],
    registry=REGISTRY,
)
for _action in REMEDIATION_ACTIONS:  # export zeros: a rate over a missing series is no rate
    for _counter in (REMEDIATIONS_STARTED, REMEDIATIONS_SUCCEEDED, REMEDIATIONS_FAILED):
        _counter.labels(action=_action)

REBALANCE_PROPOSALS = Counter(
    f"{PREFIX}_rebalance_proposals",
    "Rebalance proposals made ready (the planner's plan read back).",
    registry=REGISTRY,
)
REBALANCE_APPROVALS = Counter(
    f"{PREFIX}_rebalance_approvals",
    "Rebalance proposals approved (field, annotation or autoApprove) and executed.",
    registry=REGISTRY,
)
REBALANCE_EXECUTIONS = Counter(
    f"{PREFIX}_rebalance_executions",
    "Rebalance executions that ended, by result (Completed, Failed, Stopped).",
    ["result"],
    registry=REGISTRY,
)
for _result in ("Completed", "Failed", "Stopped"):
    REBALANCE_EXECUTIONS.labels(result=_result)

RECONCILE_SECONDS = Gauge(
    f"{PREFIX}_last_reconcile_duration_seconds",
    "Wall time of the last reconcile (Broker) or pass (Reassignment, Rebalance), by kind.",
    ["kind"],
    registry=REGISTRY,
)
RECONCILES = Counter(
    f"{PREFIX}_reconciles",
    "Reconciles (Broker) and passes (Reassignment, Rebalance) run, by kind.",
    ["kind"],
    registry=REGISTRY,
)


def observe_reconcile(kind: str, seconds: float) -> None:
    """One reconcile of ``kind`` (``Broker``, ``Reassignment``, ``Rebalance``) took ``seconds``."""
    RECONCILE_SECONDS.labels(kind=kind).set(seconds)
    RECONCILES.labels(kind=kind).inc()


def rebalance_transition(before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """Count what one Rebalance pass did, from its status before and after the pass: a
    proposal made ready, an approval (``approvalTime`` set), an execution ended (a final
    phase reached after approval; an approval with nothing to move ends in the same pass)."""
    was, now = before.get("phase"), after.get("phase")
    if now == "ProposalReady" and was != "ProposalReady":
        REBALANCE_PROPOSALS.inc()
    approved = after.get("approvalTime")
    if approved and approved != before.get("approvalTime"):
        REBALANCE_APPROVALS.inc()
    if approved and now in ("Completed", "Failed", "Stopped") and was != now:
        REBALANCE_EXECUTIONS.labels(result=now).inc()


def record_logvolumes(namespace: str, broker: str, logvolumes: Iterable[Mapping[str, Any]]) -> None:
    """One Broker's LogVolumes as a reconcile left them (their ``status.state``, and the
    ``usedBytes`` still in the Draining ones), replacing what was recorded for that Broker."""
    counts: dict[str, float] = {}
    draining = 0
    for logvolume in logvolumes:
        status = logvolume.get("status") or {}
        state = str(status.get("state") or "Pending")
        counts[state] = counts.get(state, 0.0) + 1
        if state == "Draining" and isinstance(status.get("usedBytes"), int):
            draining += status["usedBytes"]
    VOLUMES.set(("Broker", namespace, broker), counts)
    record_moving("drain", (namespace, broker), draining)


def record_moving(kind: str, key: tuple[str, ...], remaining: int) -> None:
    """Bytes an object (a Broker's drains, a Reassignment) still has to move; 0 forgets it."""
    if remaining > 0:
        BYTES_MOVING.set((kind, *key), {kind: float(remaining)})
    else:
        BYTES_MOVING.forget((kind, *key))


def forget_broker(namespace: str, broker: str) -> None:
    """A deleted Broker's volumes and drains no longer count."""
    VOLUMES.forget(("Broker", namespace, broker))
    BYTES_MOVING.forget(("drain", namespace, broker))


def register_server(host: str, port: int, registry: kopf.OperatorRegistry | None = None) -> None:
    """Serve ``REGISTRY`` as Prometheus text on ``http://host:port/metrics`` while the operator
    runs (``spindle-operator run --metrics HOST:PORT``): prometheus_client's own HTTP server,
    a daemon thread, started and stopped with the operator. A port that cannot be bound stops
    the operator's start-up with that error rather than running without its metrics."""
    servers: list[Any] = []

    def start_metrics(logger: Any, **_: Any) -> None:
        try:
            server, _thread = start_http_server(port, addr=host, registry=REGISTRY)
        except OSError as exc:
            raise kopf.PermanentError(f"metrics cannot listen on {host}:{port}: {exc}") from exc
        servers.append(server)
        logger.info("metrics on http://%s:%d/metrics", host, server.server_port)

    def stop_metrics(**_: Any) -> None:
        while servers:
            server = servers.pop()
            server.shutdown()
            server.server_close()

    kopf.on.startup(registry=registry, id="spindle-metrics")(start_metrics)
    kopf.on.cleanup(registry=registry, id="spindle-metrics")(stop_metrics)
