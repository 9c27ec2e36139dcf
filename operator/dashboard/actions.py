"""The state-changing actions: each is one merge patch, exactly what ``kubectl patch`` sends.

| action | object | patch |
| --- | --- | --- |
| approve | Rebalance | ``spec.approve: true`` (the operator then creates the Reassignment) |
| stop | Rebalance | ``spec.stop: true`` |
| cancel | Reassignment | ``spec.cancel: true`` (KIP-236 rollback) |
| cordon / drain / activate | LogVolume | ``spec.desiredState: Cordoned / Drained / Active`` |

Order: the object must exist and be served; the user's right to ``patch`` that object is
checked with a SubjectAccessReview; a precondition on what the page showed (a proposal must be
ready to approve) is checked; then the patch, then an Event on the object naming the user
(``kubectl describe`` shows it). A refusal for lack of rights is recorded as a Warning Event
too, so an audit sees attempts as well as changes; nothing else is touched.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spindle.operator.dashboard import proposals
from spindle.operator.dashboard.auth import Authority, User
from spindle.operator.dashboard.client import (
    EVENTS,
    LOGVOLUMES,
    REASSIGNMENTS,
    REBALANCES,
    ApiError,
    AsyncKube,
    Kind,
)
from spindle.operator.dashboard.store import Store
from spindle.operator.kube.events import build_event

COMPONENT = "spindle-dashboard"


@dataclass(frozen=True)
class Action:
    """One action on one kind: its patch, the Event reason and a past-tense verb."""

    name: str
    kind: Kind
    patch: Mapping[str, Any]
    reason: str
    done: str
    allowed: Callable[[Mapping[str, Any]], str | None] = lambda obj: None


def _approvable(obj: Mapping[str, Any]) -> str | None:
    view = proposals.rebalance_view(obj)
    if view["canApprove"]:
        return None
    if view["approved"]:
        return "the proposal is already approved"
    return f"there is no proposal waiting for approval (phase {view['phase']})"


def _stoppable(obj: Mapping[str, Any]) -> str | None:
    view = proposals.rebalance_view(obj)
    return None if view["canStop"] else f"the rebalance cannot be stopped in phase {view['phase']}"


def _cancellable(obj: Mapping[str, Any]) -> str | None:
    phase = (obj.get("status") or {}).get("phase") or "Pending"
    if (obj.get("spec") or {}).get("cancel"):
        return "cancellation was already requested"
    return None if phase in proposals.CANCELLABLE else f"nothing to cancel in phase {phase}"


ACTIONS: dict[tuple[str, str], Action] = {
    (a.kind.plural, a.name): a
    for a in (
        Action(
            "approve",
            REBALANCES,
            {"spec": {"approve": True}},
            "ApprovedInDashboard",
            "approved",
            _approvable,
        ),
        Action(
            "stop",
            REBALANCES,
            {"spec": {"stop": True}},
            "StoppedInDashboard",
            "stopped",
            _stoppable,
        ),
        Action(
            "cancel",
            REASSIGNMENTS,
            {"spec": {"cancel": True}},
            "CancelledInDashboard",
            "cancelled",
            _cancellable,
        ),
        Action(
            "cordon",
            LOGVOLUMES,
            {"spec": {"desiredState": "Cordoned"}},
            "CordonedInDashboard",
            "cordoned",
        ),
        Action(
            "drain",
            LOGVOLUMES,
            {"spec": {"desiredState": "Drained"}},
            "DrainedInDashboard",
            "set to drain",
        ),
        Action(
            "activate",
            LOGVOLUMES,
            {"spec": {"desiredState": "Active"}},
            "ActivatedInDashboard",
            "set back to Active",
        ),
    )
}


class ActionError(Exception):
    """An action refused: HTTP status to answer with and a message for the person."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def record_event(
    kube: AsyncKube, obj: Mapping[str, Any], *, type_: str, reason: str, message: str
) -> None:
    """A core/v1 Event on ``obj`` from the dashboard (what ``kubectl describe`` lists)."""
    meta = obj["metadata"]
    body = build_event(
        obj,
        type_=type_,
        reason=reason,
        message=message,
        now=_now(),
        component=COMPONENT,
        generate_name=f"{meta['name']}.",
    )
    await kube.create(EVENTS.path(meta["namespace"]), body)


async def perform(
    *,
    kube: AsyncKube,
    authority: Authority,
    store: Store,
    user: User,
    action: Action,
    namespace: str,
    name: str,
) -> dict[str, Any]:
    """Check, patch, record; returns the patched object. Raises ``ActionError``."""
    if not store.serves(namespace):
        raise ActionError(404, f"namespace {namespace} is not served by this dashboard")
    obj = await kube.get(action.kind, namespace, name)
    if obj is None:
        raise ActionError(404, f"{action.kind.kind} {namespace}/{name} not found")
    obj.setdefault("kind", action.kind.kind)
    obj.setdefault("apiVersion", action.kind.api_version)
    decision = await authority.authorize(
        user,
        verb="patch",
        group=action.kind.group,
        resource=action.kind.plural,
        namespace=namespace,
        name=name,
    )
    if not decision.allowed:
        await record_event(
            kube,
            obj,
            type_="Warning",
            reason="DashboardActionRefused",
            message=f"{user.username} may not {action.name} this {action.kind.kind}: {decision.reason}",
        )
        raise ActionError(
            403,
            f"{user.username} may not {action.name} {action.kind.kind} {namespace}/{name}: {decision.reason}",
        )
    problem = action.allowed(obj)
    if problem:
        raise ActionError(
            409, f"cannot {action.name} {action.kind.kind} {namespace}/{name}: {problem}"
        )
    try:
        patched = await kube.patch(action.kind, namespace, name, dict(action.patch))
    except ApiError as exc:
        raise ActionError(
            exc.status if 400 <= exc.status < 600 else 502, exc.server_message
        ) from exc
    patched.setdefault("kind", action.kind.kind)
    patched.setdefault("apiVersion", action.kind.api_version)
    store.apply(action.kind, "MODIFIED", patched)
    await record_event(
        kube,
        patched,
        type_="Normal",
        reason=action.reason,
        message=f"{action.kind.kind} {action.done} by {user.username} through the dashboard",
    )
    return patched
