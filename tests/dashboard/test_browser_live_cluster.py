"""The dashboard over a real broker: what it shows is what the broker reports, and approving a
real proposal through the page makes the operator carry it out.

The operator tests' ``world`` (tests/operator/conftest.py): a real Spindle broker on four tmpfs
log directories and ``spindle-operator run --dashboard`` driving it against the session's real
API server, the page in headless chromium (Debian's, driven by Playwright). Data is skewed onto
one directory for real (a Reassignment), a Rebalance in planner Job mode runs the planner Job's
own command until its status is ProposalReady, and the proposal page is used as an operator
would: log in with a ServiceAccount token, click Approve, watch the Rebalance start executing,
click Stop. A token without the RBAC to patch Rebalances is refused first and starts nothing.
Last, a Broker object declares the four directories as volumes: the overview's bars match the
broker's own DescribeLogDirs, and a directory failed for real (read-only remount) turns Offline
in the open page.
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

# Slow enough that the first batch (three half-megabyte partitions, ~30 s) is still moving when
# the page's Stop is clicked, even on a busy machine.
THROTTLE = 50 * 1024


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


def new_page(browser: Any, w: World) -> Any:
    """A page in a fresh browser context (its own cookies) on the world's dashboard."""
    assert w.operator.dashboard_url
    ctx = browser.new_context(
        base_url=w.operator.dashboard_url, viewport={"width": 1400, "height": 1000}
    )
    ctx.set_default_timeout(30_000)
    return ctx.new_page()


def open_proposal(browser: Any, w: World, service_account: str) -> Any:
    """A page logged in with ``service_account``'s token, on rb's page."""
    page = new_page(browser, w)
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
    # The batch's own page, in another tab: each partition with its target directory and state.
    batch = page.context.new_page()
    batch.goto(f"/reassignments/{w.ns.namespace}/rb-1")
    batch.wait_for_selector("h1 .phase-Moving")
    rows = batch.locator("table.list tbody tr")
    assert rows.count() == len(moved)
    for i in range(rows.count()):
        name, _, dirs, _, state = rows.nth(i).locator("th, td").all_inner_texts()[:5]
        topic, partition = name.rsplit("-", 1)
        assert [dirs] == moved[topic, int(partition)]
        assert state in {"Pending", "Moving", "Completed"}

    # The open proposal page followed by itself: Executing, with a link to the running batch.
    page.wait_for_selector("h1 .phase-Executing")
    page.wait_for_selector(f'a[href="/reassignments/{w.ns.namespace}/rb-1"]')
    page.screenshot(path=str(shots / "proposal-executing.png"), full_page=True)
    user = f"system:serviceaccount:{w.ns.namespace}:dash-operator-user"
    assert [m for m in events(w, "ApprovedInDashboard") if user in m]

    page.get_by_role("button", name="Stop").click()
    page.wait_for_selector(".flash")
    final = w.wait_phase("rb", "Stopped", "Completed", "Failed", kind="rebalance", timeout=180)
    assert final["phase"] == "Stopped", final
    assert w.status("rb-1")["phase"] == "Cancelled"
    assert w.made_by("rb") == {"rb-1"}  # no batch started after the stop
    batch.wait_for_selector("h1 .phase-Cancelled")  # that tab followed too
    states = [r.locator("td .phase").inner_text() for r in rows.all()]
    assert states == ["Cancelled"] * len(moved)
    assert [m for m in events(w, "StoppedInDashboard") if user in m]


BROKER = {
    "apiVersion": "spindle.io/v1alpha1",
    "kind": "Broker",
    "metadata": {"name": "loop-1"},
    "spec": {
        "brokerId": 1,
        "cluster": CLUSTER,
        "rack": "rack-a",
        "volumes": [{"id": i, "size": "24Mi"} for i in range(4)],
        # Report only: the failed disk stays Offline (what the page must show), not replaced.
        "remediation": {"policy": "Manual"},
    },
}
VOLUMES = [f"loop-1-data-{i}" for i in range(4)]


def held(w: World) -> dict[str, tuple[int, list[tuple[str, int, int]]]]:
    """Directory -> (its size, its current (not future) replicas as (topic, partition, bytes)),
    as the broker itself answers DescribeLogDirs."""
    return {
        d["log_dir"]: (
            d["total_bytes"],
            [
                (t["name"], p["partition_index"], p["partition_size"])
                for t in d.get("topics") or ()
                for p in t["partitions"]
                if not p["is_future_key"]
            ],
        )
        for d in w.admin.describe_log_dirs(brokers=[w.broker.node_id])[0]["log_dirs"]
    }


def reported(w: World) -> dict[str, tuple[float, int]]:
    """Directory -> (used fraction, replica count), from the broker's own answer."""
    return {
        path: (sum(size for _, _, size in replicas) / total, len(replicas))
        for path, (total, replicas) in held(w).items()
    }


def test_the_overview_shows_the_brokers_disks_as_it_reports_them_and_a_failing_one_turns_offline(
    browser: Any, world: World, shots: Path
) -> None:
    w = world
    w.ns.apply(json.dumps(BROKER))
    w.wait(
        "the four LogVolumes Active with the broker's figures",
        lambda: all(
            (s := w.status(v, "logvolume")).get("state") == "Active" and s.get("totalBytes")
            for v in VOLUMES
        ),
    )
    page = new_page(browser, w)
    page.goto("/")
    page.wait_for_selector("#live-status:has-text('live')")
    page.evaluate("window.__noReload = 'still here'")
    rows = [page.locator(f'tr[data-volume="{w.ns.namespace}/{v}"]') for v in VOLUMES]

    def bars_match_the_broker() -> dict[str, tuple[float, int]] | None:
        truth = reported(w)
        for row, path in zip(rows, w.dirs, strict=True):
            used, replicas = truth[path]
            shown = row.get_attribute("data-used")
            if not shown or abs(float(shown) - used) > 1e-3:
                return None
            if row.locator("td").last.inner_text() != str(replicas):
                return None
        return truth

    truth = w.wait("the bars to show what the broker reports", bars_match_the_broker, timeout=60)
    for row, path in zip(rows, w.dirs, strict=True):
        width = float(row.locator("rect.fill").get_attribute("width").rstrip("%"))
        assert width == pytest.approx(100 * truth[path][0], abs=0.01)
        assert row.get_attribute("data-state") == "Active"
        assert "state-Active" in row.locator(".bar").get_attribute("class")
    assert sum(replicas for _, replicas in truth.values()) >= 4 + 3  # canary, moves (+ skewed)
    card = page.locator(f'article[data-broker="{w.ns.namespace}/loop-1"]')
    assert "rack rack-a" in card.locator(".meta").inner_text()
    assert card.locator(".online").inner_text() == "4/4"
    page.screenshot(path=str(shots / "overview-real-broker.png"), full_page=True)
    # The busiest disk's page lists the partitions the broker says it holds.
    detail = page.context.new_page()
    detail.goto(f"/volumes/{w.ns.namespace}/{VOLUMES[0]}")
    listed = {
        tuple(row.locator("td").all_inner_texts()[:2])
        for row in detail.locator("table.partitions tbody tr").all()
    }
    assert listed == {(t, str(p)) for t, p, _ in held(w)[w.dirs[0]][1]}
    detail.close()

    w.fail_fourth_dir()
    failed = rows[3]
    page.wait_for_selector(
        f'tr[data-volume="{w.ns.namespace}/{VOLUMES[3]}"][data-state="Offline"]', timeout=60_000
    )
    assert page.evaluate("window.__noReload") == "still here"
    assert "state-Offline" in failed.locator(".bar").get_attribute("class")
    assert card.locator(".online").inner_text() == "3/4"
    assert [r.get_attribute("data-state") for r in rows[:3]] == ["Active"] * 3
    page.screenshot(path=str(shots / "overview-real-broker-offline.png"), full_page=True)
    failed.locator("a").first.click()
    page.wait_for_url(f"**/volumes/{w.ns.namespace}/{VOLUMES[3]}")
    assert "IOError" in page.locator("table.history").inner_text()
    page.screenshot(path=str(shots / "volume-real-offline.png"), full_page=True)
