"""Serving the dashboard inside the operator: kopf start-up and clean-up handlers.

Registered only when ``spindle-operator run --dashboard HOST:PORT`` asks for it, so the
operator without the flag is exactly what it was. The dashboard runs on kopf's own event loop
(aiohttp, like kopf's liveness endpoint) with its own watches; a failure to bind the port
stops the operator's start-up with that error rather than leaving a silent half-operator.
"""

from __future__ import annotations

from typing import Any

import kopf
from spindle.operator.dashboard.app import Running, start
from spindle.operator.dashboard.settings import DashboardSettings


def register(settings: DashboardSettings, registry: kopf.OperatorRegistry | None = None) -> None:
    """Add the handlers that start and stop the dashboard to kopf's registry."""
    running: list[Running] = []

    async def start_dashboard(logger: Any, **_: Any) -> None:
        try:
            running.append(await start(settings))
        except OSError as exc:  # the port is taken or the address is not this host's
            raise kopf.PermanentError(
                f"dashboard cannot listen on {settings.host}:{settings.port}: {exc}"
            ) from exc
        logger.info("dashboard on %s", running[-1].url)

    async def stop_dashboard(**_: Any) -> None:
        while running:
            await running.pop().stop()

    kopf.on.startup(registry=registry, id="spindle-dashboard")(start_dashboard)
    kopf.on.cleanup(registry=registry, id="spindle-dashboard")(stop_dashboard)
