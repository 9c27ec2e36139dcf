"""What a Broker's status says: its phase, its conditions and how full its disks are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spindle.operator.specs.meta import Obj

# LogVolume states in which the broker serves the directory.
ONLINE_STATES = frozenset({"Active", "Cordoned", "Draining"})


@dataclass(frozen=True)
class Condition:
    """A kubectl-standard condition before it gets its transition time."""

    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str


def merge_conditions(
    existing: Sequence[Mapping[str, Any]],
    wanted: Sequence[Condition],
    *,
    now: str,
    generation: int,
) -> list[Obj]:
    """Conditions as they should be written: ``lastTransitionTime`` moves only when the
    status of a condition changes (kubectl's and controller-runtime's convention). One entry
    per type, the last wanted one (a pass may go through several phases, each saying its
    word; the API server refuses a list with a type twice)."""
    by_type = {c.get("type"): c for c in existing}
    last_word = {cond.type: cond for cond in wanted}  # first position, last value
    result: list[Obj] = []
    for cond in last_word.values():
        old = by_type.get(cond.type)
        since = old.get("lastTransitionTime") if old and old.get("status") == cond.status else None
        result.append(
            {
                "type": cond.type,
                "status": cond.status,
                "reason": cond.reason,
                "message": cond.message,
                "lastTransitionTime": since or now,
                "observedGeneration": generation,
            }
        )
    return result


def broker_phase(pod: Mapping[str, Any] | None, volumes_online: int, volumes_total: int) -> str:
    """Pending until the Pod runs and is ready; then Running, or Degraded when a log
    directory is not online; Failed when the Pod failed."""
    pod_status = (pod or {}).get("status") or {}
    phase = pod_status.get("phase")
    if phase == "Failed":
        return "Failed"
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod_status.get("conditions") or []
    )
    if phase != "Running" or not ready:
        return "Pending"
    return "Running" if volumes_online == volumes_total else "Degraded"


def used_percent(volume_statuses: Sequence[Mapping[str, Any]]) -> str | None:
    """Used bytes over capacity across the directories the broker has reported on; ``None``
    (column left empty) until it has reported on any — unknown is not zero."""
    used = total = 0
    for status in volume_statuses:
        if isinstance(status.get("usedBytes"), int) and isinstance(status.get("totalBytes"), int):
            used += status["usedBytes"]
            total += status["totalBytes"]
    if total <= 0:
        return None
    return f"{100 * used / total:.1f}%"
