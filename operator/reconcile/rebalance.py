"""Rebalance reconciliation: plan → proposal → approval → execution → done, one step per pass,
with ``status.phase`` (and the ConfigMap the planner wrote) as the only memory.

Phases and what moves a Rebalance on:

- ``Pending`` → ``Snapshotting``: the planner workload is launched (``workloads.planner``: a
  Job running Spark in local mode, or ``spark-submit`` in cluster mode); it snapshots the
  brokers itself (Metadata + DescribeLogDirs) and writes ``<name>-plan``.
- ``Snapshotting`` → ``Planning`` once the workload has written its snapshot's time there.
- ``Planning`` → ``ProposalReady`` once the ConfigMap holds a plan (the proposal goes to
  ``status.proposal``), or ``Failed`` with the planner's reason (a hard goal no placement
  meets) or the Pod's.
- ``ProposalReady`` → ``Executing`` on approval (``spec.approve``, the annotation
  ``spindle.io/approve: "true"``, or ``spec.autoApprove``). A proposal older than
  ``spec.proposalTtl``, or one whose moves' sources changed since its snapshot, is planned
  again instead (back to ``Pending``), never executed. An approval is for the proposal it was
  given to: when that proposal is re-planned, the operator withdraws it (``spec.approve`` set
  false, the annotation removed, an ``ApprovalWithdrawn`` Event) and the new proposal waits
  for its own review, as Strimzi's KafkaRebalance does with Cruise Control; only
  ``spec.autoApprove`` carries over to the new one.
- ``Executing``: the plan's partitions are split into batches under the concurrency caps
  (``spindle.operator.decisions.proposal.batches``) and run as Reassignments ``<name>-1``,
  ``<name>-2``, ... one after another; after the last, a preferred leader election over the
  partitions whose preferred leader the plan changed (the planner's ``election.json``; Kafka's
  ``kafka-leader-election --election-type preferred`` on the same list), so leadership lands
  where the proposal said at no cost in bytes; then ``Completed``. ``Failed`` if one fails.
- ``spec.stop`` at any point before the end: planning is abandoned, or the running
  Reassignment is cancelled (rolled back) and the Rebalance is ``Stopped`` once it is.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spindle.operator import metrics
from spindle.operator.brokers import BrokerError, cluster_admin
from spindle.operator.decisions import proposal as proposals
from spindle.operator.kube import REASSIGNMENTS, REBALANCES, KubeApi, KubeError
from spindle.operator.reconcile.context import EventSink, ResourcePass
from spindle.operator.specs import Condition, merge_conditions
from spindle.operator.specs import planner as builders
from spindle.operator.specs.reassignment import build_rebalance_reassignment
from spindle.operator.workloads import planner

APPROVE_ANNOTATION = "spindle.io/approve"
FINAL = frozenset({"Completed", "Stopped", "Failed"})
DEFAULT_TTL = "15m"


def parse_duration(text: str) -> float:
    """``90s``, ``15m``, ``1h30m`` → seconds."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text.strip())
    if not text.strip() or parts is None:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 15m, 1h)")
    h, m, s = (int(g or 0) for g in parts.groups())
    return float(h * 3600 + m * 60 + s)


@dataclass
class Pass(ResourcePass):
    api: KubeApi
    body: Mapping[str, Any]
    now: datetime.datetime
    emit: EventSink
    image: str
    bootstrap: Sequence[str]
    status: dict[str, Any]
    conditions: list[Condition] = field(default_factory=list)

    @property
    def spec(self) -> Mapping[str, Any]:
        spec: Mapping[str, Any] = self.body.get("spec") or {}
        return spec

    @property
    def ns(self) -> str:
        return str(self.meta["namespace"])

    @property
    def plan_name(self) -> str:
        return builders.plan_name(str(self.meta["name"]))

    def phase(self, phase: str, reason: str, message: str, *, warning: bool = False) -> None:
        if self.status.get("phase") != phase:
            self.emit("Warning" if warning else "Normal", reason, message)
        self.status["phase"] = phase
        self.conditions.append(
            Condition("Progressing", "False" if phase in FINAL else "True", reason, message)
        )
        if phase in FINAL:
            self.status.setdefault("completionTime", self.stamp)

    def approved(self) -> bool:
        annotations = self.meta.get("annotations") or {}
        return bool(
            self.spec.get("approve")
            or self.spec.get("autoApprove")
            or str(annotations.get(APPROVE_ANNOTATION, "")).lower() == "true"
        )


def _plan(ctx: Pass) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    docs = planner.read_result(ctx.api, ctx.ns, ctx.plan_name)
    if not docs or "plan.json" not in docs:
        return None
    return json.loads(docs["plan.json"]), json.loads(docs.get("moves.json") or "[]")


def start(ctx: Pass) -> None:
    if ctx.spec.get("stop"):
        ctx.phase("Stopped", "Stopped", "stopped before planning")
        return
    planner.forget(ctx.api, ctx.ns, str(ctx.meta["name"]))  # a stale plan must not be read
    try:
        planner.launch(ctx.api, ctx.body, image=ctx.image, bootstrap=ctx.bootstrap)
    except planner.PlannerAccountMissing as exc:  # waits: the next pass tries again
        if not any(
            c.get("type") == "PlannerReady" and c.get("status") == "False"
            for c in ctx.status.get("conditions") or []
        ):
            ctx.emit("Warning", "PlannerAccountMissing", str(exc))
        ctx.conditions.append(Condition("PlannerReady", "False", "PlannerAccountMissing", str(exc)))
        ctx.status["phase"] = "Pending"
        return
    ctx.conditions.append(Condition("PlannerReady", "True", "PlannerStarted", "planner launched"))
    ctx.status.update(plannerJob=ctx.plan_name, planningStartTime=ctx.stamp)
    ctx.status.pop("proposal", None)
    mode = (ctx.spec.get("planner") or {}).get("mode") or "Job"
    ctx.phase(
        "Snapshotting",
        "PlannerStarted",
        f"planner {mode} {ctx.plan_name} started; it takes the brokers' snapshot first",
    )


def planning(ctx: Pass) -> None:
    if ctx.spec.get("stop"):
        planner.forget(ctx.api, ctx.ns, str(ctx.meta["name"]))
        ctx.phase("Stopped", "Stopped", "stopped while planning")
        return
    docs = planner.read_result(ctx.api, ctx.ns, ctx.plan_name)
    if docs and docs.get("error"):
        ctx.phase("Failed", "PlanRefused", docs["error"], warning=True)
        return
    if docs and "summary.json" in docs:
        summary = json.loads(docs["summary.json"])
        moves = json.loads(docs.get("moves.json") or "[]")
        ctx.status["proposal"] = proposals.proposal(
            summary, moves, snapshot_time=docs.get("snapshotTime", ctx.stamp)
        )
        ctx.status["planningTime"] = ctx.stamp
        ctx.phase(
            "ProposalReady",
            "ProposalReady",
            f"{ctx.status['proposal']['moves']} moves proposed; approve to execute",
        )
        return
    if docs and docs.get("snapshotTime"):
        ctx.phase("Planning", "SnapshotTaken", f"brokers' snapshot taken at {docs['snapshotTime']}")
    state = planner.job_state(ctx.api, ctx.ns, ctx.plan_name)
    if state is None:
        ctx.status["phase"] = "Pending"  # the Job went away before writing: plan again
    elif state.phase == "Failed":
        ctx.phase(
            "Failed", "PlannerFailed", state.message or "the planner Job failed", warning=True
        )
    elif state.phase == "Succeeded" and "summary.json" not in (
        planner.read_result(ctx.api, ctx.ns, ctx.plan_name) or {}
    ):
        # spark-submit in cluster mode exits 0 when its driver fails; the driver writes the
        # plan before it exits, so a finished Job without one (at most the snapshot's time)
        # means the driver failed.
        pods = ", ".join(planner.planner_pods(ctx.api, ctx.ns, str(ctx.meta["name"])))
        ctx.phase(
            "Failed", "PlannerFailed",
            f"the planner finished without writing {ctx.plan_name}; see the logs of {pods}",
            warning=True,
        )  # fmt: skip
    else:
        ctx.status["plannerPods"] = planner.planner_pods(ctx.api, ctx.ns, str(ctx.meta["name"]))


def proposal_ready(ctx: Pass) -> None:
    if ctx.spec.get("stop"):
        ctx.phase("Stopped", "Stopped", "stopped before execution")
        return
    proposal = ctx.status.get("proposal") or {}
    ttl = parse_duration(str(ctx.spec.get("proposalTtl") or DEFAULT_TTL))
    taken = datetime.datetime.strptime(
        proposal.get("snapshotTime") or ctx.stamp, "%Y-%m-%dT%H:%M:%SZ"
    ).replace(tzinfo=datetime.UTC)
    if (ctx.now - taken).total_seconds() > ttl:
        _replan(ctx, f"the proposal is older than proposalTtl ({ttl:.0f}s)")
        return
    if not ctx.approved():
        return
    stale = _stale(ctx)
    if stale is None:
        return  # brokers unreachable: the next pass asks again
    if stale:
        _replan(ctx, "the cluster changed since the snapshot: " + "; ".join(stale[:5]))
        return
    ctx.status.update(approvalTime=ctx.stamp, batch=0)
    ctx.phase("Executing", "Approved", "proposal approved; executing")
    executing(ctx)


def _replan(ctx: Pass, why: str) -> None:
    """Back to ``Pending`` for a new plan; an approval given by hand (field or annotation) was
    for the proposal being dropped, so it is withdrawn and the new proposal waits for review."""
    ctx.status["phase"] = "Pending"
    ctx.emit("Normal", "Replanning", why)
    annotations = ctx.meta.get("annotations") or {}
    by_annotation = APPROVE_ANNOTATION in annotations
    if ctx.spec.get("autoApprove") or not (ctx.spec.get("approve") or by_annotation):
        return
    patch: dict[str, Any] = {"spec": {"approve": False}} if ctx.spec.get("approve") else {}
    if by_annotation:
        patch["metadata"] = {"annotations": {APPROVE_ANNOTATION: None}}
    ctx.api.patch(REBALANCES, ctx.ns, str(ctx.meta["name"]), patch)
    ctx.emit(
        "Normal",
        "ApprovalWithdrawn",
        "the approved proposal is being planned again; review the new one and approve it",
    )


def _stale(ctx: Pass) -> list[str] | None:
    """Moves of the plan whose source changed since the snapshot; None when the brokers
    cannot be asked (the condition says so)."""
    loaded = _plan(ctx)
    moves = loaded[1] if loaded else []
    try:
        with cluster_admin(str(ctx.spec.get("cluster")), list(ctx.bootstrap)) as admin:
            view = admin.view(sorted({m["topic"] for m in moves}) or None)
    except BrokerError as exc:
        ctx.conditions.append(Condition("BrokersReachable", "False", "BrokerError", str(exc)))
        return None
    return proposals.stale_moves(moves, view)


def _caps(spec: Mapping[str, Any]) -> proposals.Caps:
    return proposals.Caps(
        max_moves=int(spec.get("maxConcurrentMoves") or proposals.Caps.max_moves),
        per_broker=int(spec.get("maxConcurrentMovesPerBroker") or proposals.Caps.per_broker),
        per_disk=int(spec.get("maxConcurrentMovesPerDisk") or proposals.Caps.per_disk),
    )


def executing(ctx: Pass) -> None:
    loaded = _plan(ctx)
    if loaded is None:
        ctx.phase(
            "Failed", "PlanLost", f"ConfigMap {ctx.plan_name} with the plan is gone", warning=True
        )
        return
    plan, moves = loaded
    batches = proposals.batches(plan, moves, _caps(ctx.spec))
    ctx.status["batches"] = len(batches)
    index = int(ctx.status.get("batch") or 0)
    if index == 0:
        if not batches:
            ctx.phase("Completed", "Completed", "nothing to move")
            return
        index = 1
    name = f"{ctx.meta['name']}-{index}"
    current = ctx.api.get(REASSIGNMENTS, ctx.ns, name)
    if current is None:
        if ctx.spec.get("stop"):
            ctx.phase("Stopped", "Stopped", "stopped between batches")
            return
        body = build_rebalance_reassignment(ctx.body, index, batches[index - 1])
        try:
            ctx.api.create(REASSIGNMENTS, ctx.ns, body)
        except KubeError as exc:
            if exc.status != 409:
                raise
        ctx.status.update(batch=index, reassignment=name)
        ctx.emit("Normal", "ReassignmentCreated", f"batch {index}/{len(batches)}: {name}")
        return
    _follow(ctx, current, index, len(batches))


def _follow(ctx: Pass, current: Mapping[str, Any], index: int, total: int) -> None:
    """The running batch's Reassignment decides: stop it, next batch, done or failed."""
    name = current["metadata"]["name"]
    phase = (current.get("status") or {}).get("phase")
    if ctx.spec.get("stop") and phase not in {"Completed", "Cancelled", "Failed"}:
        if not (current.get("spec") or {}).get("cancel"):
            ctx.api.patch(REASSIGNMENTS, ctx.ns, name, {"spec": {"cancel": True}})
            ctx.emit("Normal", "Stopping", f"cancelling {name} (rolling back)")
        return
    if phase == "Cancelled":
        ctx.phase("Stopped", "Stopped", f"{name} cancelled and rolled back")
    elif phase == "Failed":
        why = next(
            (c.get("message", "") for c in (current.get("status") or {}).get("conditions") or []
             if c.get("status") == "False"), "",
        )  # fmt: skip
        ctx.phase("Failed", "ReassignmentFailed", f"{name} failed: {why}", warning=True)
    elif phase == "Completed":
        if index >= total:
            if _elect_preferred(ctx):
                ctx.phase("Completed", "Completed", f"{total} reassignments completed")
        else:
            ctx.status["batch"] = index + 1
            executing(ctx)


def _elect_preferred(ctx: Pass) -> bool:
    """The plan's preferred election, once; False while the brokers cannot be asked (the next
    pass tries again). Partitions that could not elect (e.g. the preferred replica is not in
    sync yet) are reported in ``status.preferredElection`` and an Event, not a failure: the
    controller's ``auto.leader.rebalance.enable`` elects them later, as in Kafka."""
    if "preferredElection" in ctx.status:
        return True
    docs = planner.read_result(ctx.api, ctx.ns, ctx.plan_name) or {}
    listed = json.loads(docs.get("election.json") or '{"partitions": []}')["partitions"]
    wanted = [(str(e["topic"]), int(e["partition"])) for e in listed]
    try:
        with cluster_admin(str(ctx.spec.get("cluster")), list(ctx.bootstrap)) as admin:
            failed = admin.elect_preferred(wanted)
    except BrokerError as exc:
        ctx.conditions.append(Condition("BrokersReachable", "False", "BrokerError", str(exc)))
        return False
    ctx.status["preferredElection"] = {
        "partitions": len(wanted),
        "elected": len(wanted) - len(failed),
        "failed": [f"{t}-{p}: {why}" for (t, p), why in sorted(failed.items())][:20],
    }
    if wanted:
        ctx.emit(
            "Warning" if failed else "Normal",
            "PreferredLeaderElection",
            f"{len(wanted) - len(failed)} of {len(wanted)} partitions now led by their "
            f"preferred replica" + (f"; not elected: {len(failed)}" if failed else ""),
        )
    return True


Step = Callable[[Pass], None]
#: The step for each phase; a pass runs one (status written after it).
STEPS: dict[str, Step] = {
    "Pending": start,
    "Snapshotting": planning,
    "Planning": planning,
    "ProposalReady": proposal_ready,
    "Executing": executing,
}


def reconcile_rebalance(
    api: KubeApi,
    body: Mapping[str, Any],
    *,
    now: datetime.datetime,
    emit: EventSink,
    image: str,
    bootstrap: Sequence[str],
) -> dict[str, Any]:
    """One pass; returns the status written."""
    status = dict(body.get("status") or {})
    phase = status.get("phase") or "Pending"
    if phase in FINAL:
        return status
    ctx = Pass(api, body, now, emit, image, bootstrap, status)
    try:
        STEPS.get(phase, start)(ctx)
    except ValueError as exc:  # a bad proposalTtl
        ctx.phase("Failed", "InvalidSpec", str(exc), warning=True)
    meta = body["metadata"]
    generation = int(meta.get("generation") or 0)
    status["conditions"] = merge_conditions(
        status.get("conditions") or [], ctx.conditions, now=ctx.stamp, generation=generation
    ) if ctx.conditions else status.get("conditions") or []  # fmt: skip
    status["observedGeneration"] = generation
    removed = dict.fromkeys(set(body.get("status") or {}) - set(status))
    api.patch(
        REBALANCES, meta["namespace"], meta["name"], {"status": {**removed, **status}},
        subresource="status",
    )  # fmt: skip
    metrics.rebalance_transition(body.get("status") or {}, status)
    return status
