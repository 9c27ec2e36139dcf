"""A LogVolume's status: what the operator shows of one log directory, from the claim and the
evidence (``volume_state`` decides the state and the failure; this module writes them out with
the bytes, the directory id, the conditions and the probe stamp). Pure."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from spindle.operator.decisions.volume_state import Evidence, Failure, decide_state, find_failure
from spindle.operator.quantity import format_bytes, quantity_bytes
from spindle.operator.specs.broker import BrokerSpec, VolumeSpec
from spindle.operator.specs.meta import Obj
from spindle.operator.specs.names import mount_path, pvc_name
from spindle.operator.specs.status import Condition, merge_conditions

#: At most this many of a directory's partitions are listed in its status, largest first: the
#: dashboard's volume page shows them, and a LogVolume whose directory holds thousands stays a
#: small object (``replicaCount`` still counts them all). The CRD's ``maxItems`` matches.
LISTED_PARTITIONS = 100


def held_partitions(sizes: Mapping[tuple[str, int], int]) -> list[dict[str, Any]]:
    """The partitions whose current replica the directory holds, as the broker's DescribeLogDirs
    reported them: largest first (then by name), at most ``LISTED_PARTITIONS``."""
    ranked = sorted(sizes.items(), key=lambda item: (-item[1], item[0]))[:LISTED_PARTITIONS]
    return [{"topic": t, "partition": p, "sizeBytes": size} for (t, p), size in ranked]


def logvolume_status(
    volume: VolumeSpec,
    broker: BrokerSpec,
    *,
    current: Mapping[str, Any],
    pvc: Mapping[str, Any] | None,
    generation: int,
    now: str,
    evidence: Evidence | None = None,
) -> Obj:
    """Status of a LogVolume from the claim and, when given, everything else the reconciler
    saw (``evidence``: the broker's DescribeLogDirs answer, the PV, health Events, the node).

    ``state`` and ``failure`` come from ``volume_state``; a LogVolume nobody has reported on
    yet is ``Pending``. Bytes are the broker's (used = the replicas' sizes, usable and total
    from DescribeLogDirs v4); capacity falls back to the bound claim's, or its request.
    ``directoryId`` is the one the broker registered for the directory (the report's, see
    ``spindle.operator.registry``); when it could not be read the last one shown stays.
    ``lastProbeTime`` is rewritten at most every ``PROBE_STAMP_SECONDS`` when nothing else
    changed, so that a quiet volume does not cost a status write per probe.
    """
    evidence = evidence if evidence is not None else Evidence(pvc=pvc)
    pvc_status = (pvc or {}).get("status") or {}
    capacity = (pvc_status.get("capacity") or {}).get("storage")
    failure = find_failure(evidence)
    state, failure = decide_state(current, evidence, failure)
    report = evidence.report
    total = volume.size_bytes
    if report is not None and report.total_bytes is not None and report.total_bytes > 0:
        total = report.total_bytes
    elif capacity:
        total = quantity_bytes(capacity)
    status: Obj = {
        "observedGeneration": generation,
        "state": state,
        "path": mount_path(volume.id),
        "pvcName": pvc_name(broker.name, volume.id),
        "claimPhase": pvc_status.get("phase") or "Pending",
        "totalBytes": total,
    }
    if report is not None and report.directory_id:
        # The registered id, offline or not: a replaced directory registers a new one.
        status["directoryId"] = report.directory_id
    if report is not None and report.error is None:
        status["usedBytes"] = report.used_bytes
        status["replicaCount"] = report.replicas
        status["partitions"] = held_partitions(report.partitions)
        status["cordoned"] = report.cordoned
        if report.usable_bytes is not None and report.usable_bytes >= 0:
            status["usableBytes"] = report.usable_bytes
    used = status.get("usedBytes", current.get("usedBytes"))
    status["usage"] = (
        f"{format_bytes(used) if isinstance(used, int) else '?'}/{format_bytes(total)}"
    )
    changed = state != current.get("state")
    status["lastTransitionTime"] = now if changed else (current.get("lastTransitionTime") or now)
    old_failure = current.get("failure") or {}
    if failure is not None:
        same = old_failure.get("source") == failure.source
        since = old_failure.get("since") if same and old_failure.get("since") else now
        status["failure"] = {
            "source": failure.source,
            "message": failure.message,
            "since": since,
            "time": since,  # the dashboard's name for it
        }
    elif old_failure:
        status["failure"] = None  # merge-patch removes it
    pv = ((pvc or {}).get("spec") or {}).get("volumeName")
    if pv:
        status["pvName"] = pv
    status["conditions"] = merge_conditions(
        current.get("conditions") or [],
        _conditions(state, failure, evidence),
        now=now,
        generation=generation,
    )
    status["lastProbeTime"] = _probe_stamp(current, status, now)
    return status


#: A status write only to move ``lastProbeTime`` happens at most this often.
PROBE_STAMP_SECONDS = 30


def _probe_stamp(current: Mapping[str, Any], wanted: Mapping[str, Any], now: str) -> str:
    last = current.get("lastProbeTime")
    if not isinstance(last, str):
        return now
    others_same = all(
        current.get(k) == v for k, v in wanted.items() if k not in ("conditions", "lastProbeTime")
    ) and _same_conditions(current.get("conditions") or [], wanted.get("conditions") or [])
    if not others_same:
        return now
    try:
        age = datetime.datetime.fromisoformat(now) - datetime.datetime.fromisoformat(last)
    except ValueError:
        return now
    return last if age.total_seconds() < PROBE_STAMP_SECONDS else now


def _same_conditions(a: Any, b: Any) -> bool:
    def key(items: Any) -> list[tuple[Any, ...]]:
        return sorted(
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in items
        )

    return key(a) == key(b)


def _conditions(state: str, failure: Failure | None, evidence: Evidence) -> list[Condition]:
    if failure is not None:
        ready = Condition("Ready", "False", failure.source, failure.message)
    elif state == "Pending":
        ready = Condition(
            "Ready", "Unknown", "NotReported", "the broker has not reported this directory"
        )
    else:
        ready = Condition("Ready", "True", state, f"the broker serves this directory ({state})")
    if evidence.probe_error:
        reported = Condition("Reported", "False", "BrokerUnreachable", evidence.probe_error)
    elif evidence.report is None:
        reported = Condition(
            "Reported", "False", "NotListed", "the broker does not list this directory"
        )
    else:
        reported = Condition(
            "Reported", "True", "DescribeLogDirs", "the broker described this directory"
        )
    return [ready, reported]
