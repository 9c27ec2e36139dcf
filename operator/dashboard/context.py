"""What every request handler shares: the dashboard's state, and who is asking."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

import jinja2
from aiohttp import web
from spindle.operator.dashboard.auth import Authority, Session, Sessions, User
from spindle.operator.dashboard.client import AsyncKube
from spindle.operator.dashboard.settings import DashboardSettings
from spindle.operator.dashboard.store import Store

COOKIE = "spindle_session"


@dataclass
class Dashboard:
    """Everything a request handler needs, one per application."""

    settings: DashboardSettings
    kube: AsyncKube
    store: Store
    authority: Authority
    sessions: Sessions
    templates: jinja2.Environment


DASHBOARD = web.AppKey("dashboard", Dashboard)


def dashboard(request: web.Request) -> Dashboard:
    return request.app[DASHBOARD]


def session_of(request: web.Request) -> Session | None:
    return dashboard(request).sessions.get(request.cookies.get(COOKIE))


async def identify(request: web.Request) -> tuple[User | None, Session | None]:
    """The user behind this request, checked with TokenReview now: an ``Authorization:
    Bearer`` header first, else the browser session's token. ``(None, None)`` if neither."""
    board = dashboard(request)
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return await board.authority.authenticate(header[7:].strip()), None
    session = session_of(request)
    if session is None:
        return None, None
    user = await board.authority.authenticate(session.token)
    if user is None:  # revoked or expired token: the session goes too
        board.sessions.drop(session.id)
        return None, None
    return user, session


def same_origin(request: web.Request) -> bool:
    """Whether a browser POST comes from a page of this dashboard (Fetch Metadata, else the
    Origin header). A request with neither header is not from a modern browser's form."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    return urlsplit(origin).netloc == request.host


class Static:
    """The pages' CSS and JavaScript, read once and served from memory with a content hash in
    the URL (so browsers may cache them). Not aiohttp's static route: an editable install links
    each file from elsewhere, and that route rightly refuses to follow links."""

    TYPES: ClassVar[dict[str, str]] = {".css": "text/css", ".js": "text/javascript"}

    def __init__(self, files: dict[str, bytes]) -> None:
        self._files = files
        self._versions = {n: hashlib.sha256(b).hexdigest()[:12] for n, b in files.items()}

    @classmethod
    def load(cls, folder: Path) -> Static:
        return cls(
            {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix in cls.TYPES}
        )

    def url(self, name: str) -> str:
        return f"/static/{name}?v={self._versions[name]}"

    async def serve(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        body = self._files.get(name)
        if body is None:
            raise web.HTTPNotFound()
        cache = (
            "max-age=86400, immutable"
            if request.query.get("v") == self._versions[name]
            else "no-cache"
        )
        return web.Response(
            body=body,
            content_type=self.TYPES[Path(name).suffix],
            headers={"Cache-Control": cache},
        )


STATIC = web.AppKey("static", Static)
