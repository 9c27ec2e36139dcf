"""A Broker's phase and its kubectl-standard conditions, from what the reconcile saw. Pure.

* ``Ready``: the broker serves -- its Pod runs and is ready and every declared log directory
  is online (``ONLINE_STATES``: a draining or cordoned directory still serves);
* ``Reconciled``: the owned objects match the spec, or why not (a refused storage change);
* ``Degraded``: something about the broker's disks needs attention or is in progress, the
  worst first as the reason: ``VolumesOffline`` (failed, with each failure source),
  ``VolumesRebuilding`` (remediation replacing or rebuilding a directory),
  ``VolumesDraining`` (bytes left and time to go), ``StorageChangeRefused`` (a spec edit
  waiting for a volume to be emptied, say); its message lists every one of them.

``kubectl wait --for=condition=Ready broker/NAME`` and ``kubectl get broker -o
jsonpath='{.status.conditions[?(@.type=="Degraded")]}'`` read these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from spindle.operator.quantity import format_bytes
from spindle.operator.specs.status import ONLINE_STATES, Condition, broker_phase

#: Degraded reasons, worst first: (reason, LogVolume states, how the message names them).
DEGRADED_STATES: tuple[tuple[str, frozenset[str], str], ...] = (
    ("VolumesOffline", frozenset({"Offline"}), "offline"),
    ("VolumesRebuilding", frozenset({"Replacing", "Rebuilding"}), "being rebuilt"),
    ("VolumesDraining", frozenset({"Draining"}), "draining"),
)


def _describe(name: str, status: Mapping[str, Any]) -> str:
    state = status.get("state")
    if state == "Offline":
        return f"{name} ({(status.get('failure') or {}).get('source')})"
    if state == "Draining":
        drain = status.get("drain") or {}
        left = drain.get("bytesLeft", status.get("usedBytes"))
        parts = [f"{format_bytes(left)} left" if isinstance(left, int) else "?"]
        if drain.get("timeRemaining"):
            parts.append(f"{drain['timeRemaining']} to go")
        if drain.get("message"):
            parts.append(str(drain["message"]))
        return f"{name} ({', '.join(parts)})"
    return f"{name} ({state})"


def broker_conditions(
    broker: str,
    pod: Mapping[str, Any] | None,
    volumes: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    declared: int,
    refusal: tuple[str, str] | None = None,
) -> tuple[str, Condition, Condition, Condition]:
    """Phase, ``Ready``, ``Reconciled`` and ``Degraded`` of Broker ``broker``.

    ``volumes``: (LogVolume name, status) of each declared volume that has a LogVolume;
    ``declared``: how many volumes the spec declares; ``refusal``: (reason, message) of a
    refused storage change, None when the change was applied."""
    online = sum(1 for _, s in volumes if s.get("state") in ONLINE_STATES)
    phase = broker_phase(pod, online, declared)
    if phase == "Running" and refusal is not None:
        phase = "Degraded"  # serving, but not as declared: the refused edit is pending
    pod_phase = ((pod or {}).get("status") or {}).get("phase", "missing")
    ready = Condition(
        "Ready",
        "True" if phase == "Running" else "False",
        "BrokerRunning" if phase == "Running" else f"Broker{phase}",
        f"pod {broker} is {pod_phase}; {online}/{declared} log directories online",
    )
    if refusal is None:
        reconciled = Condition("Reconciled", "True", "Reconciled", "owned objects match the spec")
    else:
        reconciled = Condition("Reconciled", "False", *refusal)
    reasons: list[str] = []
    parts: list[str] = []
    for reason, states, label in DEGRADED_STATES:
        named = [_describe(n, s) for n, s in volumes if s.get("state") in states]
        if named:
            reasons.append(reason)
            parts.append(f"{label}: {', '.join(named)}")
    if refusal is not None:
        reasons.append("StorageChangeRefused")
        parts.append(f"spec change refused: {refusal[1]}")
    if reasons:
        degraded = Condition("Degraded", "True", reasons[0], "; ".join(parts))
    else:
        degraded = Condition(
            "Degraded", "False", "AllVolumesHealthy", "no log directory is offline, rebuilding "
            "or draining"
        )  # fmt: skip
    return phase, ready, reconciled, degraded
