"""What a log directory's state is, from everything the operator can see about it.

Pure: the reconciler gathers the evidence (the broker's DescribeLogDirs answer for the
directory, the claim, its PV, the claim's volume-health Events, the Pod's node) into an
``Evidence`` and ``decide`` says what the LogVolume's ``state``, ``failure`` and byte counts
are. Every failure source of DESIGN.md §2 maps to ``Offline`` with the source named, so a
user (and remediation) can tell a broken disk from a lost claim from a dead node.

The sources, strongest first (the first that holds is the one reported):

* ``IOError``: the broker answered KAFKA_STORAGE_ERROR for the directory (KIP-112: its
  failure channel took the directory offline after an I/O error);
* ``PersistentVolumeFailed``: the claim's PV is in phase ``Failed``;
* ``ClaimLost``: the claim is in phase ``Lost`` (its PV is gone);
* ``VolumeHealth``: the newest volume-health Event on the claim says abnormal (Kubernetes'
  external health monitor and kubelet post ``VolumeConditionAbnormal``);
* ``NodeLost``: the Pod's node is gone or not Ready.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Reasons of Kubernetes' volume-health Events (CSI external-health-monitor, kubelet).
HEALTH_ABNORMAL = "VolumeConditionAbnormal"
HEALTH_NORMAL = "VolumeConditionNormal"
STORAGE_ERROR = "KafkaStorageError"


class BrokerUnreachable(RuntimeError):
    """A broker could not be asked (raised by ``spindle.operator.brokers``, defined here so
    that reconcilers can catch it without importing a Kafka client); the message says which
    broker, where and why, and goes into a LogVolume condition as is."""


@dataclass(frozen=True)
class DirReport:
    """One log directory as its broker's DescribeLogDirs described it."""

    path: str
    error: str | None  # kafka-python's error class name, None when the directory is online
    replicas: int = 0
    used_bytes: int = 0
    total_bytes: int | None = None  # DescribeLogDirs v4; None when the broker did not say
    usable_bytes: int | None = None
    cordoned: bool = False  # named in the broker's cordoned.log.dirs (KIP-1066)
    #: (topic, partition) -> bytes of the live replicas here; futures (copies arriving) apart.
    partitions: Mapping[tuple[str, int], int] = field(default_factory=dict)
    futures: Mapping[tuple[str, int], int] = field(default_factory=dict)
    #: KIP-858 ``directory.id``, from the broker's registration (``spindle.operator.registry``:
    #: DescribeLogDirs does not carry it); None when it could not be read.
    directory_id: str | None = None
    #: When the DescribeLogDirs answer arrived (UTC): the time of the byte counts, which a
    #: drain's rate divides by (a reconcile may use the probe loop's last answer); None when
    #: not known.
    described_at: datetime.datetime | None = None


@dataclass(frozen=True)
class Failure:
    source: str
    message: str


@dataclass(frozen=True)
class Evidence:
    """What the reconciler saw about one directory in this pass (``desired``: the
    LogVolume's ``spec.desiredState``)."""

    report: DirReport | None = None  # None: the broker was not reached or did not list it
    probe_error: str | None = None  # why the broker could not be asked, if it could not
    pvc: Mapping[str, Any] | None = None
    pv: Mapping[str, Any] | None = None
    health_events: Sequence[Mapping[str, Any]] = ()
    node_problem: str | None = None  # "node n1 is gone", "node n1 is not Ready (...)"
    desired: str = "Active"


def match_report(reports: Sequence[DirReport], path: str) -> DirReport | None:
    """The broker's report for the directory mounted at ``path``: the same path, else the
    same last component (``data-<id>``) -- a broker run outside Kubernetes (loopback
    development, ``--bootstrap``) keeps its directories elsewhere under the same names."""
    for report in reports:
        if report.path.rstrip("/") == path.rstrip("/"):
            return report
    name = path.rstrip("/").rsplit("/", 1)[-1]
    matches = [r for r in reports if r.path.rstrip("/").rsplit("/", 1)[-1] == name]
    return matches[0] if len(matches) == 1 else None


def _health_failure(events: Sequence[Mapping[str, Any]]) -> Failure | None:
    def stamp(event: Mapping[str, Any]) -> str:
        return str(
            event.get("lastTimestamp")
            or event.get("eventTime")
            or (event.get("metadata") or {}).get("creationTimestamp")
            or ""
        )

    relevant = [e for e in events if e.get("reason") in (HEALTH_ABNORMAL, HEALTH_NORMAL)]
    if not relevant:
        return None
    newest = max(relevant, key=stamp)
    if newest.get("reason") != HEALTH_ABNORMAL:
        return None
    return Failure("VolumeHealth", str(newest.get("message") or "volume condition abnormal"))


def find_failure(evidence: Evidence) -> Failure | None:
    """The strongest failure the evidence shows, or None (see the module docstring)."""
    report = evidence.report
    if report is not None and report.error is not None:
        return Failure(
            "IOError",
            f"the broker reports log directory {report.path} offline ({report.error})",
        )
    pv = evidence.pv or {}
    pv_status = pv.get("status") or {}
    if pv_status.get("phase") == "Failed":
        name = (pv.get("metadata") or {}).get("name", "?")
        detail = pv_status.get("message") or pv_status.get("reason") or "no reason given"
        return Failure("PersistentVolumeFailed", f"PersistentVolume {name} is Failed: {detail}")
    pvc = evidence.pvc or {}
    if ((pvc.get("status") or {}).get("phase")) == "Lost":
        name = (pvc.get("metadata") or {}).get("name", "?")
        return Failure("ClaimLost", f"PersistentVolumeClaim {name} is Lost (its volume is gone)")
    health = _health_failure(evidence.health_events)
    if health is not None:
        return health
    if evidence.node_problem:
        return Failure("NodeLost", evidence.node_problem)
    return None


def decide_state(
    current: Mapping[str, Any], evidence: Evidence, failure: Failure | None
) -> tuple[str, Failure | None]:
    """The LogVolume's state and failure for this pass.

    A failure makes it ``Offline``. Without one, a directory its broker reports online is
    ``Active``; when the broker could not be asked, the last state stands (an unreachable
    broker says nothing about its disks), and so does a broker-reported I/O failure: the
    directory stays offline in the broker until it restarts, so only a new report clears it.
    """
    if failure is not None:
        return "Offline", failure
    old_failure = current.get("failure") or {}
    pv_name = ((evidence.pv or {}).get("metadata") or {}).get("name")
    if (
        old_failure.get("source") == "PersistentVolumeFailed"
        and pv_name
        and pv_name == current.get("pvName")
    ):
        # A PV that failed stays failed for this directory until the claim is bound to
        # another PV (replaced): the PV controller flips a bound PV's phase back to Bound.
        return "Offline", Failure("PersistentVolumeFailed", str(old_failure.get("message") or ""))
    if evidence.report is None:
        state = str(current.get("state") or "Pending")
        if state == "Offline" and old_failure.get("source") == "IOError":
            return state, Failure("IOError", str(old_failure.get("message") or ""))
        if state == "Offline":
            return "Pending", None  # the non-broker failure cleared; wait for a report
        return state, None
    if evidence.desired == "Drained" and evidence.report.cordoned:
        return ("Empty" if evidence.report.replicas == 0 else "Draining"), None
    return ("Cordoned" if evidence.report.cordoned else "Active"), None
