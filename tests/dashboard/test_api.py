"""The JSON endpoints and event stream in-process (no browser), against the real API server,
with reads set to "authenticated" and the dashboard serving one named namespace (a watch per
namespace, as a Role-only install needs); and that the README documents every endpoint served."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from spindle.operator.dashboard import DashboardSettings, api, start
from spindle.operator.dashboard.actions import ACTIONS
from spindle.operator.dashboard.client import AsyncKube

from ..operator.conftest import ROOT, free_port, temporary_namespace

BROKER = """
apiVersion: spindle.io/v1alpha1
kind: Broker
metadata: {name: solo}
spec: {brokerId: 7, cluster: solo, rack: r1, volumes: [{id: 0, size: 1Gi}]}
"""


@pytest.fixture(scope="module")
def scoped(spindle_crds: Any) -> Iterator[tuple[str, str]]:
    """A namespace outside the operator's (no reconciler here) and a token for a user with
    no rights at all: authenticated, so allowed to read when reads need only that."""
    with temporary_namespace(spindle_crds, "api") as ns:
        ns.kubectl("create", "serviceaccount", "reader")
        yield ns.namespace, ns.token("reader")


async def test_authenticated_reads_need_a_token_the_api_server_accepts_and_events_stream_changes(
    spindle_crds: Any, scoped: tuple[str, str]
) -> None:
    namespace, token = scoped
    settings = DashboardSettings(
        port=free_port(), read_access="authenticated", namespaces=(namespace,), keepalive_seconds=1
    )
    running = await start(settings, AsyncKube.from_kubeconfig(str(spindle_crds.kubeconfig)))
    base = running.url.rstrip("/")
    bearer = {"Authorization": f"Bearer {token}"}
    try:
        await asyncio.wait_for(running.store.ready.wait(), 30)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/api/v1/overview") as answer:
                assert answer.status == 401
            async with http.get(
                f"{base}/api/v1/overview", headers={"Authorization": "Bearer nonsense"}
            ) as answer:
                assert answer.status == 401
            async with http.get(f"{base}/", allow_redirects=False) as answer:
                assert answer.status == 303
                assert answer.headers["Location"].startswith("/login?next=")
            async with http.get(f"{base}/api/v1/whoami", headers=bearer) as answer:
                assert (await answer.json())[
                    "username"
                ] == f"system:serviceaccount:{namespace}:reader"
            async with http.get(f"{base}/api/v1/watch?kinds=Broker", headers=bearer) as stream:
                assert stream.headers["Content-Type"] == "text/event-stream"
                await asyncio.to_thread(
                    spindle_crds.kubectl, "-n", namespace, "apply", "-f", "-", input=BROKER
                )
                change = await asyncio.wait_for(_next_change(stream), 30)
            assert change == {
                "kind": "Broker",
                "namespace": namespace,
                "name": "solo",
                "type": "ADDED",
            }
            async with http.get(f"{base}/api/v1/overview", headers=bearer) as answer:
                overview = await answer.json()
            (cluster,) = overview["clusters"]
            assert cluster["brokers"][0]["name"] == "solo"
            assert cluster["brokers"][0]["rack"] == "r1"
            async with http.post(
                f"{base}/api/v1/brokers/{namespace}/solo/approve", headers=bearer
            ) as answer:
                assert answer.status == 404  # no such action on Brokers
            async with http.post(
                f"{base}/login", data={"token": "nonsense", "next": "/"}
            ) as answer:
                assert answer.status == 401
    finally:
        await running.stop()


async def _next_change(stream: aiohttp.ClientResponse) -> dict[str, Any]:
    event = ""
    async for raw in stream.content:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == "change":
            data: dict[str, Any] = json.loads(line[6:])
            return data
    raise AssertionError("the event stream ended")


def test_the_operator_stops_when_the_dashboard_port_is_taken(
    spindle_crds: Any, tmp_path: Any
) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                "spindle-operator",
                "run",
                "--namespace",
                "nothing-here",
                "--dashboard",
                f"127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            check=False,
            env=spindle_crds.env,
            cwd=tmp_path,
            timeout=120,
        )
    assert result.returncode != 0
    assert f"dashboard cannot listen on 127.0.0.1:{port}" in result.stdout + result.stderr


def test_the_operator_refuses_a_malformed_dashboard_address() -> None:
    result = subprocess.run(
        ["spindle-operator", "run", "--dashboard", "8081"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "--dashboard expects HOST:PORT" in result.stderr


def _documented(text: str) -> set[str]:
    """``METHOD PATH`` for each endpoint the README's table names, its shorthands expanded:
    ``X[/NS/NAME]`` is X and X/NS/NAME, ``{a,b}`` each of a and b."""
    found = set()
    for method, path in re.findall(r"`(GET|POST) (/api/v1/[^`?\s]*)", text):
        paths = [path]
        if "[" in path:
            paths = [path.replace("[", "").replace("]", ""), re.sub(r"\[.*?\]", "", path)]
        for one in paths:
            braces = re.search(r"\{(.*?)\}", one)
            options = braces.group(1).split(",") if braces else [""]
            found |= {
                f"{method} {one.replace(braces.group(0), o) if braces else one}" for o in options
            }
    return found


def test_every_json_endpoint_and_action_is_documented_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("**The dashboard.**") : readme.index("**The planner.**")]
    documented = _documented(section)
    served = set()
    for route in api.routes:
        assert isinstance(route, web.RouteDef)
        path = route.path.replace("{namespace}", "NS").replace("{name}", "NAME")
        if "{plural}" in path:
            plurals = {plural for plural, _ in ACTIONS}
            served |= {f"{route.method} {path.replace('{plural}', p)}" for p in plurals}
        else:
            served.add(f"{route.method} {path}")
    served = {s.replace("{action}", "ACTION") for s in served}
    assert served == documented
    # Each action is named in the README's row for POST.
    (row,) = [line for line in section.splitlines() if "`POST /api/v1/" in line]
    assert {verb for _, verb in ACTIONS} <= set(re.findall(r"`(\w+)`", row))
