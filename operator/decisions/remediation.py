"""What to do about an offline log directory, decided from its LogVolume's status alone.

Pure: ``decide(record, facts, now, settings)`` takes the remediation record kept in the
LogVolume's ``status.remediation``, what the operator sees this pass (``Facts``: the
directory's observed state, the claim, the Pod, the partitions' replicas and ISRs) and the
time, and returns the next ``Step``: one action for the reconciler to carry out (delete the
old claim, restart the Pod, create a Reassignment, or nothing), the new record, the state
the LogVolume shows, its ``Remediating`` condition and the Events to emit. Everything the
next pass needs is in the record, so an operator restarted mid-remediation resumes where the
status says it was (``reconcile.remediation`` is the thin part that gathers and applies).

Policies (``Broker.spec.remediation.policy``, else the operator's ``--remediation-policy``):

* ``Manual``: report only (the volume stays ``Offline``; the condition says so);
* ``ReplaceVolume``: a new claim and volume for the same volume id, the broker restarted
  with the empty directory (a new ``directory.id``); the replicas that lived there are
  re-created from their other replicas (KIP-858: the old directory is LOST). ``Replacing``
  (old claim deleted, Pod restarted, new claim bound) -> ``Rebuilding`` (the broker serves the
  new directory; followers catching up) -> ``Active`` once the broker is back in every ISR
  it belongs to;
* ``MoveReplicas``: each affected partition gets a new home as the planner's ``fix-offline``
  mode places it (``Facts.plan``): another directory of the same broker where room allows
  (AlterReplicaLogDirs: a Spindle broker re-creates the replica there live and refetches it
  from its leader), else another broker (a Reassignment replacing this broker in its replica
  list). Without a plan (the planner could not run) every replica goes to the broker outside
  its partition with the fewest replicas. ``Moving`` until every re-homed replica is back in
  its ISR and the Reassignment completed; the directory stays Offline;
* ``Auto`` (the default): ``ReplaceVolume`` when every affected partition has an in-sync
  replica on another broker, else report (there is nothing to copy from); a node that is
  gone or not Ready (``NodeLost``) is reported, not answered by deleting its claims.

Guard rails, all checked here: one remediation per broker at a time; at most
``max_failures`` failures of one volume within ``window`` -- the one after stays ``Offline``
with ``Remediating=False, reason CoolDown``; a claim is never deleted while any partition
that lived on it lacks an in-sync replica elsewhere (ReplaceVolume is refused, not forced);
every transition carries an Event.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spindle.operator.decisions.remediation_settings import RemediationSettings
from spindle.operator.specs.meta import Obj
from spindle.operator.specs.status import Condition

TP = tuple[str, int]

#: Phases in which a remediation owns the volume (and its broker: one at a time).
ACTIVE_PHASES = frozenset({"Replacing", "Rebuilding", "Moving"})
#: LogVolume states shown while the phase runs (MoveReplicas leaves the directory Offline).
SHOWN_STATE = {"Replacing": "Replacing", "Rebuilding": "Rebuilding"}
#: Failure stamps kept in the record (enough for any sane ``max_failures``).
HISTORY = 10
#: Passes MoveReplicas asks the planner for a fix-offline plan before placing without one.
PLAN_ATTEMPTS = 3


@dataclass(frozen=True)
class PartitionState:
    """One partition as the metadata describes it."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()  # replicas in an offline (LOST) directory


@dataclass(frozen=True)
class Facts:
    """What the operator sees about one volume in this pass (gathered by the reconciler)."""

    broker_id: int
    volume: str  # the LogVolume's name, for messages
    policy: str  # effective policy (the Broker's, else the operator default)
    observed: str  # the state the evidence alone gives (``volume_state.decide_state``)
    failure_source: str | None = None
    failure_message: str | None = None
    failure_since: str | None = None
    #: Another LogVolume of the same broker with a remediation running, if any.
    busy_with: str | None = None
    claim_uid: str | None = None
    claim_terminating: bool = False
    claim_bound: bool = False
    pv_name: str | None = None
    pod_uid: str | None = None
    pod_terminating: bool = False
    #: The broker describes the directory without an error.
    dir_online: bool = False
    #: Partitions the broker reports in the directory now (while it is online).
    hosted: frozenset[TP] = frozenset()
    #: Partitions the broker reports in any of its online directories (rebuilt or not).
    broker_hosted: frozenset[TP] = frozenset()
    #: Partitions the LogVolume's status listed when the directory was last online: a failed
    #: directory lists nothing, and the controller may not have marked its replicas offline
    #: in the metadata yet when the operator first sees the broker's KAFKA_STORAGE_ERROR.
    last_listed: frozenset[TP] = frozenset()
    #: The cluster's partitions (None: the metadata could not be read this pass).
    partitions: Mapping[TP, PartitionState] | None = None
    #: The cluster's brokers (for MoveReplicas destinations), with their replica counts.
    brokers: Mapping[int, int] = field(default_factory=dict)
    #: Phase of the Reassignment a MoveReplicas remediation created (None: not found).
    reassignment_phase: str | None = None
    #: MoveReplicas: the planner's fix-offline plan (reassignment JSON entries with
    #: ``log_dirs``; None: not asked or not available) and why it is not available.
    plan: tuple[Obj, ...] | None = None
    plan_error: str | None = None


@dataclass(frozen=True)
class Step:
    """The next step: ``action`` is one of ``none``, ``replace-claim`` (delete the old claim,
    then the Pod), ``restart-pod`` (delete the old Pod), ``create-reassignment``, ``move``
    (AlterReplicaLogDirs of ``intra`` on the broker, and the Reassignment if any)."""

    action: str
    record: Obj | None
    state: str | None  # the LogVolume state to show instead of the observed one
    condition: Condition | None
    events: tuple[tuple[str, str, str], ...] = ()
    #: For create-reassignment: its name and partitions ({topic, partition, replicas}).
    reassignment: tuple[str, tuple[Obj, ...]] | None = None
    #: For move: replicas of this broker to re-home ({topic, partition, dir}).
    intra: tuple[Obj, ...] = ()


def parse_time(stamp: Any) -> datetime.datetime | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def stamp(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def affected_partitions(facts: Facts) -> list[TP] | None:
    """The partitions whose replica on this broker lived in the directory: what the broker
    reports there while it is online, every replica of this broker the metadata lists as
    offline (a directory that failed lists nothing; with two offline directories this counts
    both -- the safe side), and those the LogVolume listed before the failure that the
    metadata still assigns to this broker (found on the node: a MoveReplicas that judged by
    the metadata alone, a moment before the controller marked the replicas offline, moved
    nothing and called it done). None when the metadata was not read."""
    if facts.partitions is None:
        return None
    out = set(facts.hosted)
    for tp, part in facts.partitions.items():
        listed = tp in facts.last_listed and facts.broker_id in part.replicas
        if facts.broker_id in part.offline or listed:
            out.add(tp)
    return sorted(out)


def only_copies(facts: Facts, affected: Sequence[TP]) -> list[TP]:
    """Affected partitions with no in-sync replica on another broker: the directory holds
    their only good copy, so its claim must not be deleted."""
    parts = facts.partitions or {}
    return [
        tp for tp in affected if tp not in parts or not (set(parts[tp].isr) - {facts.broker_id})
    ]


def lagging(facts: Facts) -> list[TP]:
    """Partitions this broker replicates but does not host in an online directory yet, or is
    not in the ISR of (not rebuilt yet). Both: an ISR read a moment before the controller
    took in the broker's new directory could still name it."""
    return sorted(
        tp
        for tp, part in (facts.partitions or {}).items()
        if facts.broker_id in part.replicas
        and (facts.broker_id not in part.isr or tp not in facts.broker_hosted)
    )


def _failures(
    record: Mapping[str, Any], facts: Facts, now: datetime.datetime, window: float
) -> list[str]:
    """The failure stamps within the window, this failure's included (a failure is known by
    its ``since``: the same failure seen again adds nothing)."""
    seen = [s for s in record.get("failures") or [] if isinstance(s, str)]
    if facts.failure_since and facts.failure_since not in seen:
        seen.append(facts.failure_since)
    recent = []
    for s in seen:
        at = parse_time(s)
        if at is not None and (now - at).total_seconds() < window:
            recent.append(s)
    return recent[-HISTORY:]


def _cond(status: str, reason: str, message: str) -> Condition:
    return Condition("Remediating", status, reason, message)


def _hold(
    record: Obj, reason: str, message: str, events: Sequence[tuple[str, str, str]] = ()
) -> Step:
    """Not remediating (held back): the record says why; the volume shows what it is."""
    new = {**record, "phase": reason, "message": message}
    changed = record.get("phase") != reason or record.get("message") != message
    return Step(
        "none",
        new,
        None,
        _cond("False", reason, message),
        tuple(events) if changed else (),
    )


def decide(
    record: Mapping[str, Any] | None,
    facts: Facts,
    now: datetime.datetime,
    settings: RemediationSettings,
) -> Step:
    """The next step for one volume (see the module docstring)."""
    rec: Obj = dict(record or {})
    phase = rec.get("phase")
    if phase in ACTIVE_PHASES:
        return _continue(rec, facts, now, settings)
    handled = rec.get("lastFailure") is not None and rec.get("lastFailure") == facts.failure_since
    if facts.observed == "Offline" and handled and phase in ("Succeeded", "Failed"):
        # This very failure was dealt with (MoveReplicas leaves the directory Offline).
        return Step("none", rec, None, _cond("False", str(phase), str(rec.get("message") or "")))
    if facts.observed != "Offline":
        if not rec:
            return Step("none", None, None, None)
        # Remembered (history, last outcome); no longer offline, so nothing is held back.
        if phase in ("CoolDown", "Manual", "Unsafe", "Busy", "Waiting"):
            done = {
                **rec,
                "phase": "Recovered",
                "message": f"{facts.volume} is {facts.observed} again",
            }
            return Step("none", done, None, _cond("False", "Recovered", done["message"]))
        return Step(
            "none", rec, None, _cond("False", str(phase or "Idle"), str(rec.get("message") or ""))
        )
    return _start(rec, facts, now, settings)


def _start(rec: Obj, facts: Facts, now: datetime.datetime, settings: RemediationSettings) -> Step:
    """The volume is Offline and nothing runs for it: start a remediation if allowed."""
    failures = _failures(rec, facts, now, settings.window_seconds)
    rec = {**rec, "failures": failures}
    source = facts.failure_source or "unknown"
    if facts.policy == "Manual":
        return _hold(
            rec,
            "Manual",
            f"policy Manual: {facts.volume} is left Offline ({source}) for an operator to act",
            [
                (
                    "Warning",
                    "RemediationManual",
                    f"{facts.volume} failed ({source}); policy Manual, nothing done",
                )
            ],
        )
    if len(failures) >= settings.max_failures:
        message = (
            f"{facts.volume} failed {len(failures)} times within "
            f"{int(settings.window_seconds)} s (limit {settings.max_failures}); left Offline "
            "so that a disk that keeps failing does not loop"
        )
        return _hold(rec, "CoolDown", message, [("Warning", "RemediationCoolDown", message)])
    if facts.busy_with:
        return _hold(
            rec,
            "Busy",
            f"waiting: {facts.busy_with} on the same broker is being remediated",
            [("Normal", "RemediationWaiting", f"{facts.volume} waits for {facts.busy_with}")],
        )
    affected = affected_partitions(facts)
    if affected is None:
        return _hold(
            rec, "Waiting", "waiting for the cluster's metadata to judge what the directory held"
        )
    unsafe = only_copies(facts, affected)
    policy = facts.policy
    if unsafe:
        names = ", ".join(f"{t}-{p}" for t, p in unsafe[:10]) + (" ..." if len(unsafe) > 10 else "")
        message = (
            f"not remediated: {len(unsafe)} partition(s) have no in-sync replica outside "
            f"{facts.volume} ({names}); its claim holds their only copy and is kept"
        )
        return _hold(rec, "Unsafe", message, [("Warning", "RemediationRefused", message)])
    if policy == "Auto" and source == "NodeLost":
        message = (
            f"{facts.volume}'s node is gone or not Ready: Auto replaces no volume for a node "
            "problem (a node back in a minute keeps its disks); policy ReplaceVolume or "
            "MoveReplicas acts on it"
        )
        return _hold(rec, "Waiting", message, [("Warning", "RemediationWaiting", message)])
    if policy in ("Auto", "ReplaceVolume"):
        return _start_replace(rec, facts, now, affected, source)
    return _start_move(rec, facts, now, affected, source)


def _start_replace(
    rec: Obj, facts: Facts, now: datetime.datetime, affected: Sequence[TP], source: str
) -> Step:
    if facts.claim_uid is None:
        return _hold(rec, "Waiting", "waiting for the volume's claim to be seen")
    new: Obj = {
        **rec,
        "policy": "ReplaceVolume",
        "phase": "Replacing",
        "startedAt": stamp(now),
        "lastFailure": facts.failure_since,
        "source": source,
        "oldClaimUid": facts.claim_uid,
        "oldPvName": facts.pv_name,
        "oldPodUid": facts.pod_uid,
        "partitions": len(affected),
        "message": "deleting the failed volume's claim and restarting the broker",
    }
    event = (
        "Normal",
        "RemediationStarted",
        f"{facts.volume} ({source}): ReplaceVolume -- {len(affected)} partition(s) will be "
        f"rebuilt from their in-sync replicas; deleting claim (PV {facts.pv_name})",
    )
    return Step(
        "replace-claim", new, "Replacing", _cond("True", "Replacing", new["message"]), (event,)
    )


def _planned_homes(
    facts: Facts, affected: Sequence[TP]
) -> tuple[list[Obj], list[Obj], list[TP]] | str:
    """Where the plan puts each affected replica of this broker: re-homed in another of its
    directories ({topic, partition, dir}), on another broker ({topic, partition, replicas}),
    or not in the plan (for the fallback rule); a message when a partition has no broker to go
    to under the fallback rule."""
    parts = facts.partitions or {}
    planned = {(str(e["topic"]), int(e["partition"])): e for e in facts.plan or ()}
    intra: list[Obj] = []
    cross: list[Obj] = []
    rest: list[TP] = []
    for tp in affected:
        replicas = list(parts[tp].replicas)
        entry = planned.get(tp)
        new = [int(b) for b in entry["replicas"]] if entry is not None else None
        dirs = list((entry or {}).get("log_dirs") or [])
        if new == replicas and len(dirs) == len(new) and dirs[new.index(facts.broker_id)] != "any":
            intra.append(
                {"topic": tp[0], "partition": tp[1], "dir": dirs[new.index(facts.broker_id)]}
            )
        elif new is not None and facts.broker_id not in new:
            cross.append({"topic": tp[0], "partition": tp[1], "replicas": new})
        else:
            rest.append(tp)
    load = dict(facts.brokers)
    for tp in rest:
        replicas = list(parts[tp].replicas)
        candidates = [b for b in sorted(load) if b not in replicas and b != facts.broker_id]
        if not candidates:
            return f"MoveReplicas: no broker outside {tp[0]}-{tp[1]}'s replicas {replicas} to move it to"
        dest = min(candidates, key=lambda b: (load[b], b))
        load[dest] += 1
        cross.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "replicas": [dest if r == facts.broker_id else r for r in replicas],
            }
        )
    return intra, cross, rest


def _start_move(
    rec: Obj, facts: Facts, now: datetime.datetime, affected: Sequence[TP], source: str
) -> Step:
    attempts = int(rec.get("planAttempts") or 0)
    if facts.plan is None and facts.plan_error and attempts < PLAN_ATTEMPTS:
        # Often passing (a snapshot taken while a replica was being created): ask again.
        message = (
            f"MoveReplicas: no fix-offline plan yet ({facts.plan_error}); asking the planner "
            f"again ({attempts + 1} of {PLAN_ATTEMPTS})"
        )
        return _hold({**rec, "planAttempts": attempts + 1}, "Waiting", message)
    homes = _planned_homes(facts, affected)
    if isinstance(homes, str):
        return _hold(rec, "Unsafe", homes)
    intra, targets, unplanned = homes
    if not targets and not intra:
        done = {
            **rec,
            "phase": "Succeeded",
            "policy": "MoveReplicas",
            "lastFailure": facts.failure_since,
            "message": "MoveReplicas: the directory held no replicas",
        }
        return Step("none", done, None, _cond("False", "Succeeded", done["message"]))
    name = f"{facts.volume}-move-{now.astimezone(datetime.UTC).strftime('%Y%m%d%H%M%S')}"
    message = f"re-homing {len(intra)} replica(s) in other directories of broker {facts.broker_id}"
    if targets:
        message += f", moving {len(targets)} to other brokers (Reassignment {name})"
    if unplanned:
        why = facts.plan_error or "not in the plan"
        message += f"; {len(unplanned)} placed without the planner ({why})"
    new: Obj = {
        **rec,
        "policy": "MoveReplicas",
        "phase": "Moving",
        "startedAt": stamp(now),
        "lastFailure": facts.failure_since,
        "source": source,
        "reassignment": name if targets else None,  # None: removed by the merge patch
        "created": None,
        "planAttempts": None,
        "moves": targets,
        "intra": intra,
        "partitions": len(targets) + len(intra),
        "message": message,
    }
    event = (
        "Normal",
        "RemediationStarted",
        f"{facts.volume} ({source}): MoveReplicas -- {message}",
    )
    return Step(
        "move",
        new,
        None,
        _cond("True", "Moving", message),
        (event,),
        reassignment=(name, tuple(targets)) if targets else None,
        intra=tuple(intra),
    )


def _elapsed(rec: Mapping[str, Any], now: datetime.datetime) -> str:
    started = parse_time(rec.get("startedAt"))
    return f"{(now - started).total_seconds():.0f} s" if started else "?"


def _finish(rec: Obj, facts: Facts, now: datetime.datetime, outcome: str, message: str) -> Step:
    """The remediation ended, ``Succeeded`` or ``Failed``: the record says how and when, and
    an Event on the volume says so (a Warning for a failure)."""
    new = {**rec, "phase": outcome, "message": message, "finishedAt": stamp(now)}
    kind, reason = (
        ("Normal", "RemediationSucceeded")
        if outcome == "Succeeded"
        else ("Warning", "RemediationFailed")
    )
    event = (kind, reason, f"{facts.volume}: {message}")
    return Step("none", new, None, _cond("False", outcome, message), (event,))


def _continue(
    rec: Obj, facts: Facts, now: datetime.datetime, settings: RemediationSettings
) -> Step:
    phase = rec["phase"]
    if phase == "Moving":
        return _moving(rec, facts, now)
    if phase == "Replacing":
        step = _replacing(rec, facts, now)
        started = parse_time(rec.get("startedAt"))
        late = started is not None and (
            (now - started).total_seconds() > settings.replace_timeout_seconds
        )
        if step.action == "none" and step.state == "Replacing" and late:
            message = (
                f"gave up after {int(settings.replace_timeout_seconds)} s in Replacing "
                f"({step.record.get('message') if step.record else ''})"
            )
            return _finish(rec, facts, now, "Failed", message)
        return step
    return _rebuilding(rec, facts, now)


def _waiting(rec: Obj, phase: str, message: str, action: str = "none") -> Step:
    new = {**rec, "message": message}
    return Step(action, new, SHOWN_STATE.get(phase), _cond("True", phase, message))


def _replacing(rec: Obj, facts: Facts, now: datetime.datetime) -> Step:
    old_claim, old_pod = rec.get("oldClaimUid"), rec.get("oldPodUid")
    if facts.claim_uid is not None and facts.claim_uid == old_claim and not facts.claim_terminating:
        # Resumed before the claim was deleted (or its deletion was lost): do it now.
        return _waiting(rec, "Replacing", "deleting the failed volume's claim", "replace-claim")
    if facts.pod_uid is not None and facts.pod_uid == old_pod and not facts.pod_terminating:
        return _waiting(rec, "Replacing", "restarting the broker Pod", "restart-pod")
    if facts.claim_uid is None or facts.claim_uid == old_claim:
        return _waiting(
            rec, "Replacing", "waiting for the old claim to go and a new one to be made"
        )
    if not facts.claim_bound or facts.pod_uid is None or facts.pod_uid == old_pod:
        return _waiting(
            rec, "Replacing", "waiting for the new claim to bind and the broker Pod to start"
        )
    if not facts.dir_online:
        return _waiting(
            rec, "Replacing", "waiting for the broker to serve the new, empty directory"
        )
    message = (
        f"new volume {facts.pv_name} online; re-creating its replicas from their in-sync copies"
    )
    new = {
        **rec,
        "phase": "Rebuilding",
        "newPvName": facts.pv_name,
        "replacedAt": stamp(now),
        "message": message,
    }
    event = (
        "Normal",
        "VolumeReplaced",
        f"{facts.volume}: claim bound to {facts.pv_name} after {_elapsed(rec, now)}; rebuilding",
    )
    return Step("none", new, "Rebuilding", _cond("True", "Rebuilding", message), (event,))


def _rebuilding(rec: Obj, facts: Facts, now: datetime.datetime) -> Step:
    if (
        facts.observed == "Offline"
        and facts.failure_since
        and facts.failure_since != rec.get("lastFailure")
    ):
        message = f"the new volume failed too ({facts.failure_source}) while rebuilding"
        return _finish(rec, facts, now, "Failed", message)
    if facts.partitions is None or not facts.dir_online:
        return _waiting(rec, "Rebuilding", "waiting for the broker's metadata and directory report")
    behind = lagging(facts)
    if behind:
        names = ", ".join(f"{t}-{p}" for t, p in behind[:5]) + (" ..." if len(behind) > 5 else "")
        return _waiting(rec, "Rebuilding", f"{len(behind)} partition(s) catching up: {names}")
    message = (
        f"every replica of broker {facts.broker_id} is back in sync after {_elapsed(rec, now)}"
    )
    return _finish(rec, facts, now, "Succeeded", message)


def rehomed(facts: Facts, move: Mapping[str, Any]) -> bool:
    """A re-homed replica is done: the broker serves it from an online directory and it is
    back in its partition's ISR."""
    tp = (str(move.get("topic")), int(move.get("partition") or 0))
    part = (facts.partitions or {}).get(tp)
    return part is not None and tp in facts.broker_hosted and facts.broker_id in part.isr


def _moving(rec: Obj, facts: Facts, now: datetime.datetime) -> Step:
    name = rec.get("reassignment")
    intra = [m for m in rec.get("intra") or [] if isinstance(m, dict)]
    pending = tuple(m for m in intra if not rehomed(facts, m))
    if name and (
        facts.reassignment_phase in ("Failed", "Cancelled")
        or (facts.reassignment_phase is None and rec.get("created"))
    ):
        message = f"Reassignment {name} ended {facts.reassignment_phase or 'missing'}"
        return _finish(rec, facts, now, "Failed", message)
    if not pending and (not name or facts.reassignment_phase == "Completed"):
        parts = []
        if intra:
            parts.append(
                f"{len(intra)} replica(s) re-homed in other directories of broker {facts.broker_id} and back in sync"
            )
        if name:
            parts.append(f"Reassignment {name} completed")
        message = f"{'; '.join(parts)} after {_elapsed(rec, now)}"
        return _finish(rec, facts, now, "Succeeded", message)
    reassignment = None
    waiting = []
    if intra:
        waiting.append(f"{len(intra) - len(pending)} of {len(intra)} re-homed replica(s) in sync")
    if name and facts.reassignment_phase is None:
        # Resumed after the record was written but before the Reassignment was created.
        moves = tuple(m for m in rec.get("moves") or [] if isinstance(m, dict))
        reassignment = (str(name), moves)
        waiting.append(f"creating Reassignment {name}")
    elif name:
        rec = {**rec, "created": True}
        waiting.append(f"Reassignment {name} is {facts.reassignment_phase}")
    # Re-homing is idempotent: asked again until done (refused while the broker still leads).
    action = "move" if pending or reassignment else "none"
    step = _waiting(rec, "Moving", "; ".join(waiting), action)
    return Step(
        step.action,
        step.record,
        step.state,
        step.condition,
        reassignment=reassignment,
        intra=pending,
    )
