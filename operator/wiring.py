"""The operator's composition root: every port and every piece of shared state, built once.

The kopf handlers (``handlers``, ``volume_handlers``) decide *when*; the reconcilers
(``reconcile``) decide *what*; both need the same few things -- the Kubernetes client, the one
pooled Kafka admin client, the directory-id reader, the per-Broker locks, what the probe loop
last heard -- and the operator's command-line settings. ``Wiring`` holds them, and this module
is the one place they are made and joined (``Wiring.from_memo``, called by the one start-up
handler, ``handlers.configure``). kopf hands its memo (shallow copied, so shared) to every
handler; the memo carries only the settings ``spindle-operator run`` put in and the
``Wiring``: no module-global state, and a second operator in the same process (tests) gets
its own.

Layering (import-linter): above the reconcilers and the ports, below the handlers; nothing here
decides when or what.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from spindle.operator import registry
from spindle.operator.brokers import AdminPool
from spindle.operator.decisions.reassignment import ClusterView
from spindle.operator.decisions.remediation_settings import RemediationSettings
from spindle.operator.decisions.volume_state import BrokerUnreachable, DirReport
from spindle.operator.kube import KubeApi
from spindle.operator.reconcile.remediation import Remediator, fix_offline_plan
from spindle.operator.specs import BrokerSpec

LOG = logging.getLogger("spindle.operator.volumes")


class Locks:
    """One lock per (namespace, name), so that passes over one object never overlap (kopf runs
    sync handlers in a thread pool, and a Broker's own events and its owned objects' events
    may arrive together)."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def __call__(self, namespace: str, name: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((namespace, name), threading.Lock())


@dataclass(frozen=True)
class Settings:
    """What ``spindle-operator run`` puts into kopf's memo (``__main__``), with the defaults
    ``kopf run -m spindle.operator`` gets."""

    #: ``--bootstrap CLUSTER=HOST:PORT``: where a cluster's brokers are, when not its Services.
    bootstrap: Mapping[str, str] = field(default_factory=dict)
    #: The image the planner's Job runs.
    planner_image: str = "spindle:latest"
    #: Seconds between two probes of a Broker's directories.
    probe_period: float = 2.0
    remediation: RemediationSettings = field(default_factory=RemediationSettings)
    #: Broker config every Broker gets unless it sets the key (``--etcd-endpoints``).
    config_defaults: Mapping[str, str] | None = None

    @classmethod
    def from_memo(cls, memo: Mapping[str, Any]) -> Settings:
        remediation = memo.get("remediation")
        return cls(
            bootstrap=dict(memo.get("bootstrap") or {}),
            planner_image=str(memo.get("planner_image") or "spindle:latest"),
            probe_period=float(memo.get("probe_period") or 2.0),
            remediation=remediation
            if isinstance(remediation, RemediationSettings)
            else RemediationSettings(),
            config_defaults=memo.get("config_defaults"),
        )


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


class Wiring:
    """The ports and the shared state of one running operator (see the module docstring).

    Its methods are what the reconcile steps are handed (``reconcile.context``'s ``Prober``,
    ``Cordoner``, ``Mover``, ``Viewer``), each asking the one pooled admin client at the
    Broker's bootstrap servers. Thread-safe: kopf's handler threads, the probe loop's workers
    and the reassignment watcher share it."""

    def __init__(
        self,
        settings: Settings,
        *,
        api: KubeApi,
        admin: AdminPool,
        directory_ids: registry.DirectoryIdReader,
    ) -> None:
        self.settings = settings
        self.api = api
        self.admin = admin
        self.directory_ids = directory_ids
        #: Reconciles of one Broker never overlap; nor passes of one Reassignment/Rebalance.
        self.broker_locks = Locks()
        self.pass_locks = Locks()
        #: Unfinished Reassignments and Rebalances as (plural, namespace, name): the watcher's.
        self.unfinished: set[tuple[str, str, str]] = set()
        #: PVs seen in phase Failed (name -> message; ``reconcile.context.Context.failed_pvs``).
        self.failed_pvs: dict[str, str] = {}
        self.watcher_stop = threading.Event()
        self.remediator = Remediator(
            settings=settings.remediation,
            metadata=admin.partition_states,
            overrides=settings.bootstrap,
            planner=fix_offline_plan,
        )
        self._last: dict[tuple[str, str], list[DirReport] | BrokerUnreachable] = {}

    @classmethod
    def from_memo(cls, memo: Mapping[str, Any]) -> Wiring:
        """The operator's wiring from the settings in kopf's memo, with the real ports."""
        return cls(
            Settings.from_memo(memo),
            api=KubeApi.from_environment(),
            admin=AdminPool(),
            directory_ids=registry.DirectoryIdReader(),
        )

    def servers(self, broker: BrokerSpec) -> list[str]:
        """Where to ask ``broker``: ``--bootstrap CLUSTER=HOST:PORT`` when the operator was
        given one for its cluster (brokers outside Kubernetes, an operator outside the
        cluster), else the broker's own Service (``<name>.<namespace>.svc:<port>``)."""
        if broker.cluster in self.settings.bootstrap:
            return self.settings.bootstrap[broker.cluster].split(",")
        return [f"{broker.name}.{broker.namespace}.svc:{broker.port}"]

    def broker_spec(self, body: Mapping[str, Any]) -> BrokerSpec:
        return BrokerSpec.from_body(body, config_defaults=self.settings.config_defaults)

    def probe(self, broker: BrokerSpec) -> list[DirReport]:
        """Ask the broker for its directories now (the probe loop), with their ids."""
        key = (broker.namespace, broker.name)
        try:
            reports = self.admin.describe_dirs(self.servers(broker), broker.broker_id)
        except BrokerUnreachable as exc:
            self._last[key] = exc
            raise
        reports = with_directory_ids(self.directory_ids, broker, reports)
        self._last[key] = reports
        return reports

    def last_probe(self, broker: BrokerSpec) -> list[DirReport]:
        """What the probe loop last heard: event-driven reconciles must not wait on a broker
        (an unreachable one costs seconds of retries)."""
        answer = self._last.get((broker.namespace, broker.name))
        if answer is None:
            raise BrokerUnreachable(f"broker {broker.broker_id} has not been probed yet")
        if isinstance(answer, BrokerUnreachable):
            raise answer
        return answer

    def cordon(self, broker: BrokerSpec, paths: list[str]) -> None:
        self.admin.set_cordoned(self.servers(broker), broker.broker_id, paths)

    def move(
        self, broker: BrokerSpec, moves: Mapping[tuple[str, int], str]
    ) -> dict[tuple[str, int], str]:
        return self.admin.move_replicas(self.servers(broker), broker.broker_id, moves)

    def cluster_view(self, broker: BrokerSpec, topics: Sequence[str]) -> ClusterView:
        return self.admin.cluster_view(self.servers(broker), broker.cluster, topics)

    def broker_steps(self) -> dict[str, Any]:
        """What both Broker passes take (``reconcile_broker`` / ``refresh_broker`` keywords)."""
        return {
            "failed_pvs": self.failed_pvs,
            "cordon": self.cordon,
            "move": self.move,
            "cluster_view": self.cluster_view,
            "config_defaults": self.settings.config_defaults,
        }
