"""The dashboard's aiohttp application and its start/stop.

``pages`` serves the HTML (server-rendered Jinja templates, a little plain JavaScript for live
updates; no build step, nothing fetched from elsewhere at run time), ``api`` the JSON
endpoints and the server-sent-event stream the pages and scripts use. Both read the ``Store``
(objects kept current by watches) and change things only through ``actions``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import jinja2
from aiohttp import web
from spindle.operator.dashboard import api, pages
from spindle.operator.dashboard.auth import Authority, Sessions
from spindle.operator.dashboard.client import AsyncKube
from spindle.operator.dashboard.context import DASHBOARD, STATIC, Dashboard, Static
from spindle.operator.dashboard.fmt import DASH, human_bytes, percent
from spindle.operator.dashboard.settings import DashboardSettings
from spindle.operator.dashboard.store import Store

log = logging.getLogger(__name__)
HERE = Path(__file__).parent


def template_environment() -> jinja2.Environment:
    """The pages' templates. Strict: a value a template names but the view lacks is an error
    (a 500 and a failing test), never a silently empty cell."""
    templates = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # Globals, not per-render values: imported macros see globals but not the render context.
    templates.globals.update(dash=DASH, human_bytes=human_bytes, percent=percent)
    return templates


def create_app(
    settings: DashboardSettings, kube: AsyncKube, store: Store | None = None
) -> web.Application:
    """The application; the caller starts ``store`` (``start`` below does both)."""
    app = web.Application(client_max_size=64 * 1024)
    templates = template_environment()
    app[DASHBOARD] = Dashboard(
        settings=settings,
        kube=kube,
        store=store or Store(kube, settings.namespaces),
        authority=Authority(kube, audiences=settings.token_audiences),
        sessions=Sessions(),
        templates=templates,
    )
    app.middlewares.append(security_headers)
    app.add_routes(api.routes)
    app.add_routes(pages.routes)
    static = Static.load(HERE / "static")
    app[STATIC] = static
    app.router.add_get("/static/{name}", static.serve)
    return app


@web.middleware
async def security_headers(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """No framing, no inline scripts from elsewhere, no sniffing: the pages load only this
    dashboard's own static files."""
    response = await handler(request)
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    )
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    return response


class Running:
    """A started dashboard: its runner, store and client, stopped together."""

    def __init__(self, runner: web.AppRunner, store: Store, kube: AsyncKube, url: str) -> None:
        self.runner = runner
        self.store = store
        self.kube = kube
        self.url = url

    async def stop(self) -> None:
        await self.store.stop()
        await self.runner.cleanup()
        await self.kube.close()


async def start(settings: DashboardSettings, kube: AsyncKube | None = None) -> Running:
    """Start watching and serving on the current event loop (the operator's, under kopf)."""
    kube = kube or AsyncKube.from_environment()
    app = create_app(settings, kube)
    store = app[DASHBOARD].store
    store.start()
    # Open event streams never end by themselves: give them a short grace at shutdown.
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=3.0)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port)
    await site.start()
    url = f"http://{settings.host}:{settings.port}/"
    log.info("dashboard serving on %s (reads %s)", url, settings.read_access)
    return Running(runner, store, kube, url)
