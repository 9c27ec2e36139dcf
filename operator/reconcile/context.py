"""What one reconcile of a Broker reads and decides, handed from step to step; and what a pass
over a Reassignment or a Rebalance knows either way (``ResourcePass``)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from spindle.operator import specs
from spindle.operator.decisions.reassignment import ClusterView
from spindle.operator.decisions.release import LABEL_RELEASED
from spindle.operator.decisions.storage_diff import StorageDiff
from spindle.operator.decisions.volume_state import DirReport, Evidence
from spindle.operator.kube import KubeApi, Outcome
from spindle.operator.specs import BrokerSpec, VolumeSpec


class ResourcePass:
    """The body and the time of a pass over one Reassignment or Rebalance, and what both
    derive from them. Each kind's ``Pass`` dataclass declares the two fields."""

    body: Mapping[str, Any]
    now: datetime.datetime

    @property
    def meta(self) -> Mapping[str, Any]:
        meta: Mapping[str, Any] = self.body["metadata"]
        return meta

    @property
    def stamp(self) -> str:
        """The pass's time as status times are written (``now`` is in UTC)."""
        return self.now.strftime("%Y-%m-%dT%H:%M:%SZ")


class EventSink(Protocol):
    def __call__(self, type_: str, reason: str, message: str) -> None: ...


class Prober(Protocol):
    """Asks a broker for its log directories (``spindle.operator.brokers``); raises
    ``BrokerUnreachable`` with the reason when it cannot."""

    def __call__(self, broker: BrokerSpec) -> list[DirReport]: ...


class Cordoner(Protocol):
    """Sets a broker's ``cordoned.log.dirs`` (KIP-1066) to exactly ``paths``."""

    def __call__(self, broker: BrokerSpec, paths: list[str]) -> None: ...


class Mover(Protocol):
    """AlterReplicaLogDirs on one broker; returns the refused replicas by error name."""

    def __call__(
        self, broker: BrokerSpec, moves: Mapping[tuple[str, int], str]
    ) -> dict[tuple[str, int], str]: ...


class Viewer(Protocol):
    """The broker's cluster as ``Admin.view`` sees it (Metadata of ``topics``, every
    broker's DescribeLogDirs, reassignments in flight); ``BrokerUnreachable`` when it cannot."""

    def __call__(self, broker: BrokerSpec, topics: Sequence[str]) -> ClusterView: ...


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
    #: LogVolumes of released volumes (``Released``), by volume id (``reconcile.release``).
    released_logvolumes: dict[int, dict[str, Any]] = field(default_factory=dict)
    diff: StorageDiff = field(default_factory=StorageDiff)
    outcomes: list[Outcome] = field(default_factory=list)
    pod: dict[str, Any] | None = None
    probe: Prober | None = None
    cordon: Cordoner | None = None
    move: Mover | None = None
    #: The cluster's view, for drains that must leave the broker (``reconcile.drain``).
    cluster_view: Viewer | None = None
    evidence: dict[int, Evidence] = field(default_factory=dict)
    #: PVs the operator saw in phase Failed (name -> message): kube-controller-manager puts a
    #: bound PV back to Bound within milliseconds, so a re-read may no longer show it.
    failed_pvs: Mapping[str, str] = field(default_factory=dict)
    #: Remediation (``reconcile.remediation.Remediator``; None: not remediating) and the
    #: step it chose for each volume in this pass, laid over the LogVolume's status.
    remediator: Any = None
    remediation: dict[int, Any] = field(default_factory=dict)

    def held_volumes(self) -> list[VolumeSpec]:
        """The declared volumes that are the broker's in this pass: not one whose LogVolume is
        still ``Released``. Declaring a released volume id again is a spec change, and only the
        full reconcile it triggers takes the volume back (``reattach_released``: desiredState
        reset to Active, then state Pending); a periodic refresh can read the new spec first,
        and must neither observe, cordon, drain nor write that LogVolume -- it would show the
        directory Active (or Cordoned) under the released volume's stale ``desiredState``."""
        return [v for v in self.broker.volumes if v.id not in self.released_logvolumes]

    def selector(self) -> str:
        return f"{specs.LABEL_BROKER}={self.broker.name},!{LABEL_RELEASED}"

    def applied(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        if outcome.changed:
            self.emit("Normal", outcome.action, outcome.message())
