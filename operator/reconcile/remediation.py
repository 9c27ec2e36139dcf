"""The remediation step of a Broker's refresh: gather the facts, ask the pure decision
(``decisions.remediation.decide``), carry out the one action it names, keep its record.

Runs after ``observe_volumes`` (the broker was just asked) and before ``volume_status``,
which writes each LogVolume's status with the step's record, shown state and ``Remediating``
condition laid over what the evidence says (``overlay``). The actions are the only writes:

* ``replace-claim``: delete the failed volume's claim (precondition: its uid is the one the
  record names, so a claim made since is never touched), then the broker Pod. The claim waits
  (``kubernetes.io/pvc-protection``) until the Pod is gone; the Broker's reconcile, woken by
  those deletions, makes a new claim of the same name and a new Pod, which mounts the new,
  empty file system;
* ``restart-pod``: delete the Pod the record names (resuming after a crash in between).
  Both restarts are the roller's (``reconcile.roller.restart_pod``);
* ``create-reassignment``: a Reassignment replacing this broker in each affected partition;
* ``move`` (MoveReplicas): AlterReplicaLogDirs on the broker for the replicas the planner's
  ``fix-offline`` mode re-homes in its other directories (a Spindle broker re-creates a
  replica of an offline directory there live; asked again each pass until it is back in
  sync -- the broker refuses while it still leads the partition), and the Reassignment for
  those that go to other brokers.

MoveReplicas asks the planner (``spindle.rebalance``, in-process: a handful of offline
replicas plan in well under a second) on a fresh snapshot of the cluster
(``brokers.gather_snapshot``), once, when it starts; without a plan it falls back to the
broker outside the partition with the fewest replicas.

The cluster's metadata (replicas, ISR, offline replicas) is read only while some volume of
the broker is Offline or being remediated, from every broker of the cluster (the broker in
question may be restarting).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from spindle.operator import metrics, specs
from spindle.operator.brokers import BrokerError, gather_snapshot
from spindle.operator.decisions.remediation import (
    ACTIVE_PHASES,
    SHOWN_STATE,
    TP,
    Facts,
    PartitionState,
    Step,
    decide,
    parse_time,
)
from spindle.operator.decisions.remediation_settings import RemediationSettings
from spindle.operator.decisions.volume_state import (
    BrokerUnreachable,
    Evidence,
    decide_state,
    find_failure,
)
from spindle.operator.kube import BROKERS, PVCS, REASSIGNMENTS, KubeError
from spindle.operator.reconcile.context import Context
from spindle.operator.reconcile.roller import restart_pod
from spindle.operator.specs import Obj
from spindle.operator.specs.names import API_VERSION
from spindle.operator.specs.status import Condition, merge_conditions
from spindle.rebalance import Goals, PlanError, Request, SnapshotError, parse_snapshot
from spindle.rebalance.api import plan

LABEL_REMEDIATION = "spindle.io/remediation-of"


class MetadataReader(Protocol):
    """Metadata of the cluster, asked of ``servers``: partition -> replicas/ISR/offline;
    raises ``BrokerUnreachable`` when no broker answers."""

    def __call__(self, servers: list[str]) -> Mapping[TP, PartitionState]: ...


class Planner(Protocol):
    """The planner's fix-offline plan for the cluster ``servers`` reach (``dir_states``: the
    states of directories the brokers do not know, e.g. cordoned): its reassignment JSON
    entries; raises ``FixOfflineUnavailable`` with the reason when there is none."""

    def __call__(
        self, servers: list[str], dir_states: Mapping[tuple[int, str], str]
    ) -> list[Obj]: ...


class FixOfflineUnavailable(RuntimeError):
    """No fix-offline plan could be made; the message says why."""


def fix_offline_plan(servers: list[str], dir_states: Mapping[tuple[int, str], str]) -> list[Obj]:
    """A fresh snapshot of the cluster, planned in the planner's ``fix-offline`` mode."""
    try:
        doc = gather_snapshot(servers, dir_states=dir_states)
        result = plan(parse_snapshot(doc), Request(mode="fix-offline"), Goals())
    except (BrokerError, PlanError, SnapshotError) as exc:
        raise FixOfflineUnavailable(str(exc)) from exc
    except Exception as exc:  # a Kafka client error, a broker gone mid-read: no plan this pass
        raise FixOfflineUnavailable(f"the planner could not run: {exc!r}") from exc
    return [dict(e) for e in result.plan.get("partitions") or ()]


@dataclass(frozen=True)
class Remediator:
    """What the remediation step needs from the operator: its settings, a metadata reader,
    where a cluster's brokers listen (``reassignment.bootstrap_for``) and the fix-offline
    planner (None: MoveReplicas places replicas by the fallback rule)."""

    settings: RemediationSettings
    metadata: MetadataReader
    overrides: Mapping[str, str]
    planner: Planner | None = None


def _policy(ctx: Context, settings: RemediationSettings) -> str:
    return ctx.broker.remediation_policy or settings.default_policy


def _brokers(ctx: Context) -> dict[int, str]:
    """The cluster's Brokers in this namespace: broker id -> Service address (the rule of
    ``reassignment.bootstrap_for``, keeping the ids for MoveReplicas' destinations)."""
    out: dict[int, str] = {}
    answer = ctx.api.request("GET", BROKERS.path(ctx.broker.namespace))
    for b in answer.get("items") or []:
        spec = b.get("spec") or {}
        if spec.get("cluster") != ctx.broker.cluster:
            continue
        name = (b.get("status") or {}).get("serviceName") or b["metadata"]["name"]
        out[int(spec["brokerId"])] = f"{name}.{ctx.broker.namespace}.svc:{spec.get('port') or 9092}"
    return out


def _observed(
    current: Mapping[str, Any], evidence: Evidence, now: str
) -> tuple[str, Any, str | None]:
    """The state the evidence alone gives, its failure and the failure's ``since`` (the
    same rule ``specs.logvolume_status`` writes)."""
    state, failure = decide_state(current, evidence, find_failure(evidence))
    if failure is None:
        return state, None, None
    old = current.get("failure") or {}
    since = old.get("since") if old.get("source") == failure.source and old.get("since") else now
    return state, failure, str(since)


def _servers(ctx: Context, remediator: Remediator, addresses: Mapping[int, str]) -> list[str]:
    if ctx.broker.cluster in remediator.overrides:
        return remediator.overrides[ctx.broker.cluster].split(",")
    return sorted(addresses.values())


def _plan(ctx: Context, remediator: Remediator) -> tuple[tuple[Obj, ...] | None, str | None]:
    """The fix-offline plan for MoveReplicas, or why there is none. This broker's cordoned
    and draining directories are named (the brokers do not report those states)."""
    if remediator.planner is None:
        return None, None
    states: dict[tuple[int, str], str] = {}
    for e in ctx.evidence.values():
        if e.report is None or e.report.error is not None:
            continue
        if e.desired == "Drained" or e.report.cordoned:
            states[(ctx.broker.broker_id, e.report.path)] = (
                "Draining" if e.desired == "Drained" else "Cordoned"
            )
    try:
        plan = remediator.planner(_servers(ctx, remediator, _brokers(ctx)), states)
    except FixOfflineUnavailable as exc:
        return None, str(exc)
    return tuple(plan), None


def _cluster(
    ctx: Context, remediator: Remediator
) -> tuple[Mapping[TP, PartitionState] | None, dict[int, int]]:
    """The cluster's partitions (None when no broker answers) and its brokers with their
    replica counts."""
    addresses = _brokers(ctx)
    servers = _servers(ctx, remediator, addresses)
    partitions: Mapping[TP, PartitionState] | None
    try:
        partitions = remediator.metadata(servers)
    except BrokerUnreachable:
        partitions = None
    brokers = dict.fromkeys(addresses, 0)
    for part in (partitions or {}).values():
        for b in part.replicas:
            brokers[b] = brokers.get(b, 0) + 1
    return partitions, brokers


def remediate(ctx: Context) -> None:
    """Decide and act for every volume of the broker (see the module docstring)."""
    remediator = ctx.remediator
    if remediator is None or not isinstance(remediator, Remediator):
        return
    settings = remediator.settings
    now = parse_time(ctx.now) or datetime.datetime.now(datetime.UTC)
    records = {
        v: dict((lv.get("status") or {}).get("remediation") or {})
        for v, lv in ctx.logvolumes.items()
    }
    observed = {
        v: _observed((ctx.logvolumes.get(v) or {}).get("status") or {}, e, ctx.now)
        for v, e in ctx.evidence.items()
    }
    needed = any(o[0] == "Offline" for o in observed.values()) or any(
        r.get("phase") in ACTIVE_PHASES for r in records.values()
    )
    if not needed and not any(records.values()):
        return
    partitions, brokers = _cluster(ctx, remediator) if needed else (None, {})
    busy = {
        v: specs.logvolume_name(ctx.broker.name, v)
        for v, r in records.items()
        if r.get("phase") in ACTIVE_PHASES
    }
    policy = _policy(ctx, settings)
    for volume in ctx.broker.volumes:
        if volume.id not in ctx.logvolumes or volume.id not in observed:
            continue
        shown = ((ctx.logvolumes[volume.id].get("status") or {}).get("state")) or ""
        if (
            observed[volume.id][0] == "Offline"
            and shown != "Offline"
            and records[volume.id].get("phase") not in ACTIVE_PHASES
        ):
            continue  # show Offline (and its Event) first; remediation starts next pass
        facts = _facts(ctx, volume.id, policy, observed[volume.id], partitions, brokers)
        others = [n for v, n in busy.items() if v != volume.id]
        facts = replace(facts, busy_with=others[0] if others else None)
        step = decide(records[volume.id] or None, facts, now, settings)
        if step.action == "move" and records[volume.id].get("phase") not in ACTIVE_PHASES:
            # A MoveReplicas about to start: only now is the planner worth asking (a snapshot
            # of every broker's directories), and the decision is taken again with its plan.
            plan, error = _plan(ctx, remediator)
            facts = replace(facts, plan=plan, plan_error=error)
            step = decide(records[volume.id] or None, facts, now, settings)
        for type_, reason, message in step.events:
            ctx.emit(type_, reason, message)
            _count(reason, step.record or {})
        _act(ctx, volume.id, step)
        ctx.remediation[volume.id] = step
        if step.record and step.record.get("phase") in ACTIVE_PHASES:
            busy[volume.id] = facts.volume


def _count(reason: str, record: Mapping[str, Any]) -> None:
    """The operator's remediation counters (``operator.metrics``), from the Event reasons."""
    counter = {
        "RemediationStarted": metrics.REMEDIATIONS_STARTED,
        "RemediationSucceeded": metrics.REMEDIATIONS_SUCCEEDED,
        "RemediationFailed": metrics.REMEDIATIONS_FAILED,
    }.get(reason)
    if counter is not None and record.get("policy") in metrics.REMEDIATION_ACTIONS:
        counter.labels(action=str(record["policy"])).inc()


def _facts(
    ctx: Context,
    volume_id: int,
    policy: str,
    observed: tuple[str, Any, str | None],
    partitions: Mapping[TP, PartitionState] | None,
    brokers: Mapping[int, int],
) -> Facts:
    state, failure, since = observed
    evidence = ctx.evidence[volume_id]
    claim = ctx.claims.get(volume_id) or {}
    claim_meta = claim.get("metadata") or {}
    pod_meta = (ctx.pod or {}).get("metadata") or {}
    report = evidence.report
    status = ctx.logvolumes[volume_id].get("status") or {}
    record = status.get("remediation") or {}
    reassignment_phase = None
    if record.get("phase") == "Moving" and record.get("reassignment"):
        found = ctx.api.get(REASSIGNMENTS, ctx.broker.namespace, str(record["reassignment"]))
        if found is not None:
            reassignment_phase = str((found.get("status") or {}).get("phase") or "Pending")
    return Facts(
        broker_id=ctx.broker.broker_id,
        volume=specs.logvolume_name(ctx.broker.name, volume_id),
        policy=policy,
        observed=state,
        failure_source=failure.source if failure else None,
        failure_message=failure.message if failure else None,
        failure_since=since,
        claim_uid=claim_meta.get("uid"),
        claim_terminating=bool(claim_meta.get("deletionTimestamp")),
        claim_bound=((claim.get("status") or {}).get("phase")) == "Bound",
        pv_name=(claim.get("spec") or {}).get("volumeName"),
        pod_uid=pod_meta.get("uid"),
        pod_terminating=bool(pod_meta.get("deletionTimestamp")),
        dir_online=report is not None and report.error is None,
        broker_hosted=frozenset(
            tp
            for e in ctx.evidence.values()
            if e.report is not None and e.report.error is None
            for tp in e.report.partitions
        ),
        hosted=frozenset(report.partitions)
        if report is not None and report.error is None
        else frozenset(),
        last_listed=frozenset(
            (str(p["topic"]), int(p["partition"]))
            for p in status.get("partitions") or ()
            if isinstance(p, dict) and "topic" in p and "partition" in p
        ),
        partitions=partitions,
        brokers=brokers,
        reassignment_phase=reassignment_phase,
    )


def _delete(ctx: Context, path: str, uid: str) -> bool:
    """DELETE with a uid precondition: only the very object the record names."""
    body = {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Background",
        "preconditions": {"uid": uid},
    }
    try:
        ctx.api.request("DELETE", path, body=body)
    except KubeError as exc:
        if exc.status in (404, 409):  # gone, or a newer object of that name: not ours
            return False
        raise
    return True


def _act(ctx: Context, volume_id: int, step: Step) -> None:
    record = step.record or {}
    namespace = ctx.broker.namespace
    name = specs.logvolume_name(ctx.broker.name, volume_id)
    if step.action == "replace-claim":
        claim = specs.pvc_name(ctx.broker.name, volume_id)
        if _delete(ctx, PVCS.path(namespace, claim), str(record["oldClaimUid"])):
            ctx.emit(
                "Normal",
                "RemediationClaimDeleted",
                f"{name}: deleted claim {claim} (PV {record.get('oldPvName')})",
            )
    restart = step.action in ("replace-claim", "restart-pod") and record.get("oldPodUid")
    # The restart goes through the roller, the one step that deletes broker Pods.
    if restart and restart_pod(ctx.api, namespace, ctx.broker.name, str(record["oldPodUid"])):
        ctx.emit(
            "Normal",
            "RemediationPodRestarted",
            f"{name}: deleted Pod {ctx.broker.name}; it comes back with the new volume",
        )
    if step.action == "move" and step.intra:
        _rehome(ctx, name, step)
    if step.action in ("create-reassignment", "move") and step.reassignment is not None:
        rname, moves = step.reassignment
        body: Obj = {
            "apiVersion": API_VERSION,
            "kind": "Reassignment",
            "metadata": {
                "name": rname,
                "namespace": namespace,
                "labels": {LABEL_REMEDIATION: name, specs.LABEL_BROKER: ctx.broker.name},
            },
            "spec": {"cluster": ctx.broker.cluster, "partitions": [dict(m) for m in moves]},
        }
        try:
            ctx.api.create(REASSIGNMENTS, namespace, body)
            ctx.emit(
                "Normal", "RemediationReassignmentCreated", f"{name}: created Reassignment {rname}"
            )
        except KubeError as exc:
            if exc.status != 409:
                raise


def _rehome(ctx: Context, name: str, step: Step) -> None:
    """AlterReplicaLogDirs for the replicas MoveReplicas re-homes on this broker. Refusals are
    retried next pass; only the start and refusals other than the broker's KAFKA_STORAGE_ERROR
    (it still leads the partition, or the directory failed) are Events."""
    if ctx.move is None:
        return
    moves = {(str(m["topic"]), int(m["partition"])): str(m["dir"]) for m in step.intra}
    try:
        refused = ctx.move(ctx.broker, moves)
    except BrokerUnreachable as exc:
        ctx.emit("Warning", "RemediationRehomeFailed", f"{name}: {exc}")
        return
    if step.events:
        started = len(moves) - len(refused)
        ctx.emit(
            "Normal",
            "RemediationRehoming",
            f"{name}: AlterReplicaLogDirs on broker {ctx.broker.broker_id}: {started} of "
            f"{len(moves)} replica(s) re-created in other directories, refetching from leaders",
        )
    odd = {tp: e for tp, e in refused.items() if e != "KafkaStorageError"}
    if odd:
        listed = ", ".join(f"{t}-{p}: {e}" for (t, p), e in sorted(odd.items())[:5])
        ctx.emit("Warning", "RemediationRehomeRefused", f"{name}: broker refused {listed}")


def overlay(ctx: Context, volume_id: int, current: Mapping[str, Any], wanted: Obj) -> None:
    """Lay the remediation's record, shown state and ``Remediating`` condition over the
    status the evidence gives (``volume_status`` calls this before writing)."""
    step = ctx.remediation.get(volume_id)
    if step is None:
        step = _standing(current)
        if step is None:
            return
    if step.record is not None:
        wanted["remediation"] = step.record
    if step.state is not None:
        wanted["state"] = step.state
        if current.get("state") == step.state and current.get("lastTransitionTime"):
            wanted["lastTransitionTime"] = current["lastTransitionTime"]
    if step.condition is not None:
        merged = merge_conditions(
            current.get("conditions") or [],
            [step.condition],
            now=ctx.now,
            generation=int(wanted.get("observedGeneration") or 0),
        )
        others = [c for c in wanted.get("conditions") or [] if c.get("type") != "Remediating"]
        wanted["conditions"] = [*others, *merged]


def _standing(current: Mapping[str, Any]) -> Step | None:
    """A pass that did not decide (a full reconcile, which runs on events, not on a fresh
    broker answer) keeps what the last decision showed: the state and the condition."""
    record = current.get("remediation")
    if not record:
        return None
    kept = [
        Condition(
            str(c.get("type")), str(c.get("status")), str(c.get("reason")), str(c.get("message"))
        )
        for c in current.get("conditions") or []
        if c.get("type") == "Remediating"
    ]
    return Step(
        "none",
        None,
        SHOWN_STATE.get(str(record.get("phase"))),
        kept[0] if kept else None,
    )


def broker_condition(statuses: Mapping[str, Mapping[str, Any]]) -> Condition:
    """The Broker's ``Remediating`` condition: which of its LogVolumes are being remediated."""
    running = sorted(
        f"{name} ({(s.get('remediation') or {}).get('phase')})"
        for name, s in statuses.items()
        if (s.get("remediation") or {}).get("phase") in ACTIVE_PHASES
    )
    if running:
        return Condition(
            "Remediating", "True", "VolumeRemediation", "remediating: " + ", ".join(running)
        )
    return Condition("Remediating", "False", "Idle", "no log directory is being remediated")
