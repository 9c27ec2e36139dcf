"""JSON endpoints and the server-sent-event stream (documented in README, "Dashboard").

Reads return the same view dicts the pages render. Actions are ``POST``; a script
authenticates with ``Authorization: Bearer <token>``; a browser session must also send its
CSRF token (``X-CSRF-Token`` header or ``csrf`` form field). Errors are ``{"error": ...}``
with the HTTP status Kubernetes would use (401, 403, 404, 409).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from spindle.operator.dashboard import proposals, views
from spindle.operator.dashboard.actions import ACTIONS, ActionError, perform
from spindle.operator.dashboard.auth import User, csrf_matches
from spindle.operator.dashboard.client import (
    BROKERS,
    EVENTS,
    LOGVOLUMES,
    REASSIGNMENTS,
    REBALANCES,
    ApiError,
    Kind,
)
from spindle.operator.dashboard.context import dashboard, identify, same_origin

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Every endpoint below registers itself here; the app adds the table (aiohttp's own way of
# keeping each route next to its handler).
routes = web.RouteTableDef()


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, default=str))


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status)


def _found(data: dict[str, Any] | None, kind: str) -> web.Response:
    """The object's view, or 404 naming the kind."""
    return _json(data) if data is not None else _error(404, f"{kind} not found")


async def readable(request: web.Request) -> bool:
    """Reads are open, or need a user the API server vouches for (per the setting)."""
    if dashboard(request).settings.read_access == "open":
        return True
    user, _ = await identify(request)
    return user is not None


def reader(handler: Handler) -> Handler:
    async def guarded(request: web.Request) -> web.StreamResponse:
        if not await readable(request):
            return _error(401, "authentication required: send Authorization: Bearer <token>")
        return await handler(request)

    return guarded


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def overview_data(request: web.Request) -> dict[str, Any]:
    store = dashboard(request).store
    return views.overview(store.objects(BROKERS), store.objects(LOGVOLUMES))


def _addressed(request: web.Request, kind: Kind) -> dict[str, Any] | None:
    """The watched object the path's ``{namespace}/{name}`` names, if there is one."""
    match = request.match_info
    return dashboard(request).store.get(kind, match["namespace"], match["name"])


async def volume_data(request: web.Request) -> dict[str, Any] | None:
    board = dashboard(request)
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    volume = _addressed(request, LOGVOLUMES)
    if volume is None:
        return None
    selector = f"involvedObject.kind=LogVolume,involvedObject.name={name}"
    try:
        events, _ = await board.kube.list(EVENTS, namespace, query={"fieldSelector": selector})
    except ApiError:
        events = []  # history is a courtesy: the volume itself still shows
    mine = [
        r for r in board.store.objects(REASSIGNMENTS) if r["metadata"]["namespace"] == namespace
    ]
    return views.volume_page(volume, events, mine)


def reassignments_data(request: web.Request) -> list[dict[str, Any]]:
    now = utcnow()
    return [
        proposals.reassignment_view(r, now=now)
        for r in dashboard(request).store.objects(REASSIGNMENTS)
    ]


def rebalances_data(request: web.Request) -> list[dict[str, Any]]:
    return [proposals.rebalance_view(r) for r in dashboard(request).store.objects(REBALANCES)]


async def reassignment_data(request: web.Request) -> dict[str, Any] | None:
    item = _addressed(request, REASSIGNMENTS)
    return None if item is None else proposals.reassignment_view(item, now=utcnow())


async def rebalance_data(request: web.Request) -> dict[str, Any] | None:
    item = _addressed(request, REBALANCES)
    return None if item is None else proposals.rebalance_view(item)


@dataclass(frozen=True)
class Detail:
    """One kind with a view of a single object: ``GET /api/v1/<plural>/NS/NAME`` here, and a
    page of its own in ``pages``; both 404 naming ``kind`` when the object is not there."""

    kind: str
    plural: str
    data: Callable[[web.Request], Awaitable[dict[str, Any] | None]]


DETAILS = {
    d.kind: d
    for d in (
        Detail("LogVolume", "logvolumes", volume_data),
        Detail("Reassignment", "reassignments", reassignment_data),
        Detail("Rebalance", "rebalances", rebalance_data),
    )
}


def _detail_endpoint(detail: Detail) -> Handler:
    @reader
    async def get(request: web.Request) -> web.StreamResponse:
        return _found(await detail.data(request), detail.kind)

    return get


for _detail in DETAILS.values():
    routes.get(f"/api/v1/{_detail.plural}/{{namespace}}/{{name}}")(_detail_endpoint(_detail))


@routes.get("/api/v1/overview")
@reader
async def get_overview(request: web.Request) -> web.StreamResponse:
    return _json(overview_data(request))


@routes.get("/api/v1/reassignments")
@reader
async def get_reassignments(request: web.Request) -> web.StreamResponse:
    return _json({"items": reassignments_data(request)})


@routes.get("/api/v1/rebalances")
@reader
async def get_rebalances(request: web.Request) -> web.StreamResponse:
    return _json({"items": rebalances_data(request)})


@routes.get("/api/v1/whoami")
async def whoami(request: web.Request) -> web.StreamResponse:
    user, _ = await identify(request)
    if user is None:
        return _error(401, "not authenticated")
    return _json({"username": user.username, "groups": list(user.groups)})


async def authorised_user(request: web.Request, form: dict[str, str]) -> User:
    """The acting user, or ``ActionError`` 401/403: a header token, or a browser session
    with its CSRF token from a same-origin page."""
    if not same_origin(request):
        raise ActionError(403, "cross-site request refused")
    user, session = await identify(request)
    if user is None:
        raise ActionError(401, "log in with a Kubernetes token to change anything")
    if session is not None:
        given = request.headers.get("X-CSRF-Token") or form.get("csrf")
        if not csrf_matches(session.csrf, given):
            raise ActionError(403, "missing or wrong CSRF token; reload the page and try again")
    return user


async def run_action(request: web.Request, form: dict[str, str]) -> dict[str, Any]:
    """Shared by the JSON endpoint and the pages' forms: authenticate, then ``perform``."""
    plural, verb = request.match_info["plural"], request.match_info["action"]
    action = ACTIONS.get((plural, verb))
    if action is None:
        raise ActionError(404, f"no action {verb!r} on {plural!r}; known: {sorted(ACTIONS)}")
    user = await authorised_user(request, form)
    board = dashboard(request)
    return await perform(
        kube=board.kube,
        authority=board.authority,
        store=board.store,
        user=user,
        action=action,
        namespace=request.match_info["namespace"],
        name=request.match_info["name"],
    )


@routes.post("/api/v1/{plural}/{namespace}/{name}/{action}")
async def post_action(request: web.Request) -> web.StreamResponse:
    form = {k: str(v) for k, v in (await request.post()).items()}
    try:
        patched = await run_action(request, form)
    except ActionError as exc:
        return _error(exc.status, exc.message)
    return _json({"ok": True, "object": patched})


@routes.get("/api/v1/watch")
async def watch(request: web.Request) -> web.StreamResponse:
    """Server-sent events: one ``change`` event per object change, as
    ``{"kind", "namespace", "name", "type"}``; ``?kinds=LogVolume,Broker`` filters."""
    if not await readable(request):
        return _error(401, "authentication required")
    board = dashboard(request)
    wanted = {k for k in request.query.get("kinds", "").split(",") if k}
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # nginx ingress: do not buffer the stream
        }
    )
    await response.prepare(request)
    with board.store.subscribe() as queue, contextlib.suppress(ConnectionResetError):
        await response.write(b"retry: 2000\n: connected\n\n")
        while True:
            try:
                change = await asyncio.wait_for(queue.get(), board.settings.keepalive_seconds)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            if not wanted or change.kind in wanted:
                data = json.dumps(change.as_json())
                await response.write(f"event: change\ndata: {data}\n\n".encode())
    return response
