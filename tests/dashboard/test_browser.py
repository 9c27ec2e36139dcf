"""The dashboard in a real browser (Debian's chromium, headless, driven by Playwright) against a
real operator serving it on the local control plane, with the README's example cluster.

One browser for the module; each test opens its own context (its own cookies), so a logged-in
test and an anonymous one never share a session.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from spindle.operator.handlers import WATCH_SECONDS

GI = 1024**3
MOVES = [
    {
        "topic": "orders",
        "partition": 3,
        "sourceBroker": 2,
        "sourceDir": "/var/lib/spindle/data-2",
        "destinationBroker": 2,
        "destinationDir": "/var/lib/spindle/data-0",
        "bytes": 214748364,
    },
    {
        "topic": "payments",
        "partition": 0,
        "sourceBroker": 1,
        "sourceDir": "/var/lib/spindle/data-2",
        "destinationBroker": 1,
        "destinationDir": "/var/lib/spindle/data-0",
        "bytes": 107374182,
    },
]
PROPOSAL = {
    "phase": "ProposalReady",
    "proposal": {
        "moves": 2,
        "planner": "greedy",
        "interBrokerBytes": 0,
        "intraBrokerBytes": 322122546,
        "balanceBefore": "max/min dir used 0.5/0.1",
        "balanceAfter": "max/min dir used 0.3/0.3",
        "brokers": [],  # filled from the example's usage by the fixture
        "directories": [],  # filled from the example's usage by the fixture
        "goals": [
            {"name": "DISK_BYTES", "status": "met"},
            {"name": "BROKER_BYTES", "status": "notInScope"},
            {
                "name": "REPLICAS",
                "status": "unachievable",
                "reason": "broker 2 out of band; each out of reach under the hard rules",
            },
        ],
        "replicaMoves": MOVES,
    },
}
FULL_REBALANCE = """
apiVersion: spindle.io/v1alpha1
kind: Rebalance
metadata: {name: demo-full}
spec: {cluster: demo, mode: full}
"""


@pytest.fixture(scope="module")
def proposals(demo: Any, usage: dict[str, tuple[float, int]]) -> Any:
    """The example Rebalance and a second one, each with a proposal waiting for approval
    (as the planner's summary would put it: every directory before and after, every move)."""
    demo.kubectl("apply", "-f", "-", input=FULL_REBALANCE)
    # intra-broker: each directory ends at its broker's mean; brokers keep their bytes.
    used = {(b, v): usage[f"demo-{b}-data-{v}"][0] for b in range(3) for v in range(3)}
    mean = {b: sum(used[b, v] for v in range(3)) / 3 for b in range(3)}
    brokers = [
        {
            "brokerId": b,
            "bytesBefore": int(3 * GI * mean[b]),
            "bytesAfter": int(3 * GI * mean[b]),
            "utilisationBefore": mean[b],
            "utilisationAfter": mean[b],
        }
        for b in range(3)
    ]
    dirs = [
        {
            "brokerId": b,
            "path": f"/var/lib/spindle/data-{v}",
            "state": "Active",
            "bytesBefore": int(GI * used[b, v]),
            "bytesAfter": int(GI * mean[b]),
            "utilisationBefore": used[b, v],
            "utilisationAfter": mean[b],
        }
        for b in range(3)
        for v in range(3)
    ]
    status = {
        **PROPOSAL,
        "proposal": {**PROPOSAL["proposal"], "brokers": brokers, "directories": dirs},
    }
    for name in ("demo-disks", "demo-full"):
        _keep_status(demo, name, status)
    return demo


def _keep_status(demo: Any, name: str, status: dict[str, Any]) -> None:
    """Patch the proposal in (playing the planner's part) until it stays.

    The operator passes over an unfinished Rebalance every ``WATCH_SECONDS`` (here each pass
    finds no planner ServiceAccount and writes phase Pending); a pass that read the object
    just before this patch writes its status just after it, and every later pass then starts
    over from Pending (a CI run once failed so: no Approve button, phase Pending). A pass that
    read the patched ProposalReady keeps it, so one watcher interval without a change means the
    proposal stays."""
    for _ in range(5):
        demo.patch_status("rebalance", name, status)
        time.sleep(WATCH_SECONDS + 1)
        if (demo.get("rebalance", name).get("status") or {}).get("phase") == "ProposalReady":
            return
    raise AssertionError(f"the operator kept overwriting {name}'s status")


def context(browser: Any, dashboard_url: str, **options: Any) -> Any:
    ctx = browser.new_context(
        base_url=dashboard_url, viewport={"width": 1400, "height": 1000}, **options
    )
    ctx.set_default_timeout(30_000)
    return ctx


def log_in(page: Any, token: str) -> None:
    page.goto("/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/")
    assert page.get_by_text("Signed in as").is_visible()


def test_overview_shows_the_example_cluster_with_usage_bars_per_volume(
    browser: Any,
    dashboard_url: str,
    demo: Any,
    shots: Path,
    usage: dict[str, tuple[float, int]],
    states: dict[str, str],
) -> None:
    page = context(browser, dashboard_url).new_page()
    page.goto("/")
    page.wait_for_selector(
        f'tr[data-volume="{demo.namespace}/demo-2-data-2"][data-used]:not([data-used=""])'
    )
    brokers = page.locator("article.broker")
    assert brokers.count() == 3
    for b, rack in enumerate(("rack-a", "rack-b", "rack-c")):
        card = page.locator(f'article[data-broker="{demo.namespace}/demo-{b}"]')
        assert f"rack {rack}" in card.locator(".meta").inner_text()
        assert card.locator("tr.volume").count() == 3
        for v in range(3):
            used, replicas = usage[f"demo-{b}-data-{v}"]
            row = card.locator(f'tr[data-volume="{demo.namespace}/demo-{b}-data-{v}"]')
            state = states[f"demo-{b}-data-{v}"]
            assert row.get_attribute("data-state") == state
            assert float(row.get_attribute("data-used")) == pytest.approx(used, abs=1e-3)
            width = row.locator("rect.fill").get_attribute("width")
            assert float(width.rstrip("%")) == pytest.approx(100 * used, abs=0.01)
            assert row.locator(".bar").get_attribute("class").split()[1] == f"state-{state}"
            cells = row.locator("td").all_inner_texts()
            assert cells[-1] == str(replicas)
            assert f"{used * 1024:.1f} MiB / 1.0 GiB · {100 * used:.1f}%" in cells[1]
    page.screenshot(path=str(shots / "overview.png"), full_page=True)


def test_a_volume_going_offline_turns_its_bar_offline_without_a_reload(
    browser: Any, dashboard_url: str, demo: Any, shots: Path
) -> None:
    page = context(browser, dashboard_url).new_page()
    page.goto("/")
    page.wait_for_selector("#live-status:has-text('live')")
    page.evaluate("window.__noReload = 'still here'")
    target = f'tr[data-volume="{demo.namespace}/demo-1-data-1"]'
    assert page.locator(target).get_attribute("data-state") == "Active"
    demo.patch_status(
        "logvolume",
        "demo-1-data-1",
        {
            "state": "Offline",
            "failure": {
                "source": "IOError",
                "message": "read-only file system on /var/lib/spindle/data-1",
                "time": "2026-11-24T12:00:00Z",
            },
        },
    )
    page.wait_for_selector(f'{target}[data-state="Offline"]')
    assert page.evaluate("window.__noReload") == "still here"
    row = page.locator(target)
    assert "state-Offline" in row.locator(".bar").get_attribute("class")
    assert row.locator(".badge").inner_text() == "Offline"
    card = page.locator(f'article[data-broker="{demo.namespace}/demo-1"]')
    assert card.locator(".online").inner_text() == "2/3"
    page.screenshot(path=str(shots / "overview-volume-offline.png"), full_page=True)
    page.locator(f"{target} a").click()
    page.wait_for_url(f"**/volumes/{demo.namespace}/demo-1-data-1")
    assert "read-only file system" in page.locator("table.history").inner_text()
    page.screenshot(path=str(shots / "volume-offline.png"), full_page=True)


def test_approving_a_proposal_in_the_page_patches_the_rebalance_and_records_the_user(
    browser: Any, dashboard_url: str, proposals: Any, shots: Path
) -> None:
    page = context(browser, dashboard_url).new_page()
    log_in(page, proposals.token("dash-operator-user"))
    page.goto(f"/rebalances/{proposals.namespace}/demo-disks")
    moves = page.locator("table.moves tbody tr")
    assert moves.count() == 2
    first = moves.nth(0).locator("th, td").all_inner_texts()
    assert first[:5] == ["orders-3", "2", "/var/lib/spindle/data-2", "2", "/var/lib/spindle/data-0"]
    assert "unachievable" in page.locator("ul.goals").inner_text()
    assert page.locator("figure.chart .pair").count() == 3 + 9
    page.screenshot(path=str(shots / "proposal.png"), full_page=True)
    page.get_by_role("button", name="Approve proposal").click()
    page.wait_for_selector(".flash")
    rebalance = proposals.get("rebalance", "demo-disks")
    assert rebalance["spec"]["approve"] is True
    user = f"system:serviceaccount:{proposals.namespace}:dash-operator-user"
    events = [
        e
        for e in proposals.items("events")
        if e["involvedObject"]["name"] == "demo-disks" and e["reason"] == "ApprovedInDashboard"
    ]
    assert len(events) == 1
    assert user in events[0]["message"]
    assert page.get_by_role("button", name="Approve proposal").count() == 0


def test_an_unauthenticated_approve_is_refused_and_changes_nothing(
    browser: Any, dashboard_url: str, proposals: Any
) -> None:
    before = proposals.get("rebalance", "demo-full")
    page = context(browser, dashboard_url).new_page()
    page.goto(f"/rebalances/{proposals.namespace}/demo-full")
    with page.expect_response(lambda r: "/approve" in r.url) as answer:
        page.get_by_role("button", name="Approve proposal").click()
    assert answer.value.status == 401
    assert "log in" in page.locator("p.error").inner_text().lower()
    after = proposals.get("rebalance", "demo-full")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"].get("approve") is False


def test_an_unauthorised_approve_is_refused_recorded_and_changes_nothing(
    browser: Any, dashboard_url: str, proposals: Any
) -> None:
    before = proposals.get("rebalance", "demo-full")
    page = context(browser, dashboard_url).new_page()
    log_in(page, proposals.token("dash-viewer"))
    page.goto(f"/rebalances/{proposals.namespace}/demo-full")
    with page.expect_response(lambda r: "/approve" in r.url) as answer:
        page.get_by_role("button", name="Approve proposal").click()
    assert answer.value.status == 403
    assert "cannot patch" in page.locator("p.error").inner_text()
    after = proposals.get("rebalance", "demo-full")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"].get("approve") is False
    viewer = f"system:serviceaccount:{proposals.namespace}:dash-viewer"
    refused = [
        e
        for e in proposals.items("events")
        if e["involvedObject"]["name"] == "demo-full" and e["reason"] == "DashboardActionRefused"
    ]
    assert any(viewer in e["message"] for e in refused)


def test_a_session_post_without_its_csrf_token_is_refused(
    browser: Any, dashboard_url: str, proposals: Any
) -> None:
    page = context(browser, dashboard_url).new_page()
    log_in(page, proposals.token("dash-operator-user"))
    answer = page.request.post(
        f"/api/v1/rebalances/{proposals.namespace}/demo-full/approve", form={"next": "/"}
    )
    assert answer.status == 403
    assert "CSRF" in answer.json()["error"]
    assert proposals.get("rebalance", "demo-full")["spec"].get("approve") is False


def test_json_endpoints_serve_scripts_with_a_bearer_token(
    dashboard_url: str, proposals: Any
) -> None:
    with urllib.request.urlopen(f"{dashboard_url}/api/v1/overview") as answer:
        overview = json.load(answer)
    (cluster,) = [c for c in overview["clusters"] if c["namespace"] == proposals.namespace]
    assert [b["name"] for b in cluster["brokers"]] == ["demo-0", "demo-1", "demo-2"]
    assert cluster["balance"]["broker"]["met"] is not None
    url = f"{dashboard_url}/api/v1/logvolumes/{proposals.namespace}/demo-2-data-1/cordon"
    token = proposals.token("dash-viewer")
    request = urllib.request.Request(
        url, method="POST", headers={"Authorization": f"Bearer {token}"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request)
    assert refused.value.code == 403
    refused.value.close()
    token = proposals.token("dash-operator-user")
    request = urllib.request.Request(
        url, method="POST", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request) as answer:
        assert json.load(answer)["ok"] is True
    assert proposals.get("logvolume", "demo-2-data-1")["spec"]["desiredState"] == "Cordoned"


PAGES = [
    "/",
    "/volumes/{ns}/demo-1-data-1",
    "/reassignments",
    "/reassignments/{ns}/orders-0-spread",
    "/rebalances/{ns}/demo-disks",
    "/login",
]


def test_pages_have_no_serious_or_critical_accessibility_violations(
    browser: Any, dashboard_url: str, proposals: Any, axe: str
) -> None:
    source = axe
    page = context(browser, dashboard_url).new_page()
    found = {}
    for path in PAGES:
        page.goto(path.format(ns=proposals.namespace))
        page.evaluate(source)
        result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
        serious = [
            f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}"
            for v in result["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        if serious:
            found[path] = serious
    assert found == {}


def test_the_reassignment_page_shows_progress_rate_and_each_partition(
    browser: Any, dashboard_url: str, demo: Any, wait_for: Callable[..., Any]
) -> None:
    demo.patch_status(
        "reassignment",
        "orders-0-spread",
        {
            "phase": "Moving",
            "partitionsTotal": 2,
            "partitionsDone": 1,
            "bytesTotal": 400 * 1024**2,
            "bytesDone": 100 * 1024**2,
            "startTime": "2026-01-01T00:00:00Z",
            "partitions": [
                {
                    "topic": "orders",
                    "partition": 0,
                    "phase": "Completed",
                    "originalReplicas": [0, 1, 2],
                    "bytesTotal": 100 * 1024**2,
                    "bytesDone": 100 * 1024**2,
                },
                {
                    "topic": "orders",
                    "partition": 1,
                    "phase": "Moving",
                    "originalReplicas": [1, 2, 0],
                    "bytesTotal": 300 * 1024**2,
                    "bytesDone": 0,
                },
            ],
        },
    )
    page = context(browser, dashboard_url).new_page()
    page.goto(f"/reassignments/{demo.namespace}/orders-0-spread")
    wait_for(
        lambda: "25.0%" in page.locator("dl.details").inner_text(),
        what="the progress to show",
        timeout=30,
    )
    rows = page.locator("table.list tbody tr").all_inner_texts()
    assert "Completed" in rows[0]
    assert "Moving" in rows[1]
    rate = page.locator("dl.details div").filter(has=page.locator("dt", has_text="Rate"))
    assert rate.inner_text().endswith("/s")  # a rate while Moving, not "—"
    assert "/var/lib/spindle/data-1" in rows[0]
    log_in(page, demo.token("dash-operator-user"))
    page.goto(f"/reassignments/{demo.namespace}/orders-0-spread")
    page.get_by_role("button", name="Cancel (roll back)").click()
    page.wait_for_selector(".flash")
    assert demo.get("reassignment", "orders-0-spread")["spec"]["cancel"] is True
    assert page.get_by_text("Cancellation requested.").is_visible()


def test_pages_load_only_the_dashboards_own_files_nothing_from_a_cdn(
    browser: Any, dashboard_url: str, proposals: Any
) -> None:
    page = context(browser, dashboard_url).new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    policies = set()
    for path in PAGES:
        answer = page.goto(path.format(ns=proposals.namespace))
        policies.add(answer.headers["content-security-policy"])
    elsewhere = [u for u in requested if not u.startswith(dashboard_url + "/")]
    assert elsewhere == []
    assert any(urlsplit(u).path.endswith(".js") for u in requested)
    assert any(urlsplit(u).path.endswith(".css") for u in requested)
    # The browser itself would refuse anything else: scripts, styles, images only from here.
    (policy,) = policies
    assert "default-src 'self'" in policy
    assert "script-src 'self'" in policy


VOLUME_STATES = [
    "Active",
    "Cordoned",
    "Draining",
    "Offline",
    "Replacing",
    "Rebuilding",
    "Empty",
    "Released",
]


def test_each_volume_state_colours_its_bar_as_the_legend_shows_and_no_two_alike(
    browser: Any, dashboard_url: str, demo: Any
) -> None:
    """Last in the module: it moves the example's volumes through every state."""
    names = [f"demo-{b}-data-{v}" for b in range(3) for v in range(3)]
    for name, state in zip(names, VOLUME_STATES, strict=False):
        # Offline stands only with its failure (the operator's rule: without one it is Pending).
        failure = {"source": "IOError", "message": "test", "time": "2026-11-24T12:00:00Z"}
        demo.patch_status(
            "logvolume", name, {"state": state, "failure": failure if state == "Offline" else None}
        )
    page = context(browser, dashboard_url).new_page()
    page.goto("/")
    colours = {}
    for name, state in zip(names, VOLUME_STATES, strict=False):
        selector = f'tr[data-volume="{demo.namespace}/{name}"][data-state="{state}"]'
        page.locator(selector).wait_for()
        # One script reads all three: live updates swap <main> between two evaluations, and a
        # detached element's computed style is empty (seen on CI: the swatch read '').
        bar, badge, swatch = page.evaluate(
            """([selector, state]) => {
                const row = document.querySelector(selector);
                const swatch = document.querySelector(`.legend .swatch.state-${state}`);
                return [
                    getComputedStyle(row.querySelector("rect.fill")).fill,
                    getComputedStyle(row.querySelector(".badge")).backgroundColor,
                    getComputedStyle(swatch).backgroundColor,
                ];
            }""",
            [selector, state],
        )
        assert bar == badge == swatch, (state, bar, badge, swatch)
        colours[state] = bar
    assert len(set(colours.values())) == len(VOLUME_STATES), colours
