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
)
from spindle.operator.dashboard.context import dashboard, identify, same_origin

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, default=str))


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status)


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


async def volume_data(request: web.Request) -> dict[str, Any] | None:
    board = dashboard(request)
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    volume = board.store.get(LOGVOLUMES, namespace, name)
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


@reader
async def get_overview(request: web.Request) -> web.StreamResponse:
    return _json(overview_data(request))


@reader
async def get_volume(request: web.Request) -> web.StreamResponse:
    data = await volume_data(request)
    return _json(data) if data is not None else _error(404, "LogVolume not found")


@reader
async def get_reassignments(request: web.Request) -> web.StreamResponse:
    return _json({"items": reassignments_data(request)})


@reader
async def get_reassignment(request: web.Request) -> web.StreamResponse:
    item = dashboard(request).store.get(
        REASSIGNMENTS, request.match_info["namespace"], request.match_info["name"]
    )
    if item is None:
        return _error(404, "Reassignment not found")
    return _json(proposals.reassignment_view(item, now=utcnow()))


@reader
async def get_rebalances(request: web.Request) -> web.StreamResponse:
    return _json({"items": rebalances_data(request)})


@reader
async def get_rebalance(request: web.Request) -> web.StreamResponse:
    item = dashboard(request).store.get(
        REBALANCES, request.match_info["namespace"], request.match_info["name"]
    )
    if item is None:
        return _error(404, "Rebalance not found")
    return _json(proposals.rebalance_view(item))


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


async def post_action(request: web.Request) -> web.StreamResponse:
    form = {k: str(v) for k, v in (await request.post()).items()}
    try:
        patched = await run_action(request, form)
    except ActionError as exc:
        return _error(exc.status, exc.message)
    return _json({"ok": True, "object": patched})


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


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/v1/overview", get_overview)
    app.router.add_get("/api/v1/logvolumes/{namespace}/{name}", get_volume)
    app.router.add_get("/api/v1/reassignments", get_reassignments)
    app.router.add_get("/api/v1/reassignments/{namespace}/{name}", get_reassignment)
    app.router.add_get("/api/v1/rebalances", get_rebalances)
    app.router.add_get("/api/v1/rebalances/{namespace}/{name}", get_rebalance)
    app.router.add_post("/api/v1/{plural}/{namespace}/{name}/{action}", post_action)
    app.router.add_get("/api/v1/whoami", whoami)
    app.router.add_get("/api/v1/watch", watch)
