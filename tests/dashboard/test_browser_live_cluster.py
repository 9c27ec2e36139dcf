"""Approving a real proposal through the page makes the operator carry it out.

The operator tests' ``world`` (tests/operator/conftest.py): a real Spindle broker on four tmpfs
log directories and ``spindle-operator run --dashboard`` driving it against the session's real
API server. Data is skewed onto one directory for real (a Reassignment), a Rebalance in planner
Job mode runs the planner Job's own command until its status is ProposalReady, and the proposal
page in headless chromium (Debian's, driven by Playwright) is used as an operator would: log in
with a ServiceAccount token, click Approve, watch the Rebalance start executing, click Stop.
A token without the RBAC to patch Rebalances is refused first and starts nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ..operator.conftest import CLUSTER, World
from .conftest import ACCESS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs per log dir: needs root"),
]

# Slow enough that the first batch is still moving when the page's Stop is clicked.
THROTTLE = 100 * 1024


@pytest.fixture(scope="module")
def proposed(world: World) -> World:
    """Rebalance ``rb``, planned by the real planner from the real broker's DescribeLogDirs
    after every partition of the ``skewed`` topic was put on one directory, ProposalReady."""
    w = world
    w.ns.apply(ACCESS)
    w.skew("skew")
    w.ns.apply(json.dumps({
        "apiVersion": "spindle.io/v1alpha1", "kind": "Rebalance", "metadata": {"name": "rb"},
        "spec": {"cluster": CLUSTER, "mode": "intra-broker", "maxConcurrentMoves": 3,
                 "planner": {"mode": "Job"}, "throttle": {"intraBrokerBytesPerSecond": THROTTLE}},
    }))  # fmt: skip
    done = w.run_planner_job("rb-plan")
    assert done.returncode == 0, done.stderr[-3000:]
    status = w.wait_phase("rb", "ProposalReady", kind="rebalance")
    assert status["proposal"]["moves"] >= 1
    return w


def open_proposal(browser: Any, w: World, service_account: str) -> Any:
    """A fresh browser context logged in with ``service_account``'s token, on rb's page."""
    assert w.operator.dashboard_url
    ctx = browser.new_context(
        base_url=w.operator.dashboard_url, viewport={"width": 1400, "height": 1000}
    )
    ctx.set_default_timeout(30_000)
    page = ctx.new_page()
    page.goto("/login")
    page.get_by_label("Token").fill(w.ns.token(service_account))
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/")
    page.goto(f"/rebalances/{w.ns.namespace}/rb")
    return page


def events(w: World, reason: str) -> list[str]:
    return [e["message"] for e in w.ns.events(reason) if e["involvedObject"]["name"] == "rb"]


def test_an_approve_without_the_right_to_patch_is_refused_and_starts_nothing(
    browser: Any, proposed: World
) -> None:
    w = proposed
    before = w.ns.get("rebalance", "rb")
    page = open_proposal(browser, w, "dash-viewer")
    with page.expect_response(lambda r: "/approve" in r.url) as answer:
        page.get_by_role("button", name="Approve proposal").click()
    assert answer.value.status == 403
    assert "cannot patch" in page.locator("p.error").inner_text()
    after = w.ns.get("rebalance", "rb")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"].get("approve") is not True
    assert after["status"]["phase"] == "ProposalReady"
    assert w.made_by("rb") == set()
    viewer = f"system:serviceaccount:{w.ns.namespace}:dash-viewer"
    assert any(viewer in m for m in events(w, "DashboardActionRefused"))


def test_approving_a_planned_proposal_in_the_page_creates_its_reassignments(
    browser: Any, proposed: World, shots: Path
) -> None:
    w = proposed
    proposal = w.status("rb", "rebalance")["proposal"]
    hot = w.dirs[0]
    page = open_proposal(browser, w, "dash-operator-user")
    # The page lists the planner's moves, each from the hot directory to another of broker 1.
    rows = page.locator("table.moves tbody tr")
    assert rows.count() == len(proposal["replicaMoves"]) == proposal["moves"]
    for i, move in enumerate(proposal["replicaMoves"]):
        cells = rows.nth(i).locator("th, td").all_inner_texts()
        assert cells[:5] == [
            f"{move['topic']}-{move['partition']}",
            "1",
            move["sourceDir"],
            "1",
            move["destinationDir"],
        ]
    assert any(
        cells.startswith(f"1:{hot}") for cells in page.locator("table.util th").all_inner_texts()
    )
    page.screenshot(path=str(shots / "proposal-planned.png"), full_page=True)
    assert w.made_by("rb") == set()  # nothing runs before approval

    page.get_by_role("button", name="Approve proposal").click()
    page.wait_for_selector(".flash")
    created = w.wait("rb's first Reassignment", lambda: w.made_by("rb"))
    assert created == {"rb-1"}
    first = w.ns.get("reassignment", "rb-1")
    assert first["metadata"]["labels"]["spindle.io/rebalance"] == "rb"
    assert first["metadata"]["ownerReferences"][0]["name"] == "rb"
    moved = {(p["topic"], p["partition"]): p["logDirs"] for p in first["spec"]["partitions"]}
    planned = {
        (m["topic"], m["partition"]): [m["destinationDir"]] for m in proposal["replicaMoves"]
    }
    assert moved.items() <= planned.items()
    status = w.wait_phase("rb", "Executing", kind="rebalance")
    assert status["reassignment"] == "rb-1"
    w.wait_moving("rb-1")  # the broker is copying a replica for it
    user = f"system:serviceaccount:{w.ns.namespace}:dash-operator-user"
    assert [m for m in events(w, "ApprovedInDashboard") if user in m]

    # The open page follows by itself: Executing, with a link to the running batch.
    page.wait_for_selector("h1 .phase-Executing")
    page.wait_for_selector(f'a[href="/reassignments/{w.ns.namespace}/rb-1"]')
    page.screenshot(path=str(shots / "proposal-executing.png"), full_page=True)

    page.get_by_role("button", name="Stop").click()
    page.wait_for_selector(".flash")
    final = w.wait_phase("rb", "Stopped", "Completed", "Failed", kind="rebalance", timeout=180)
    assert final["phase"] == "Stopped", final
    assert w.status("rb-1")["phase"] == "Cancelled"
    assert w.made_by("rb") == {"rb-1"}  # no batch started after the stop
    assert [m for m in events(w, "StoppedInDashboard") if user in m]
