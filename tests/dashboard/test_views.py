"""The dashboard's pure parts: view models from objects, balance against the planner's goals,
action preconditions, sessions and CSRF, settings parsing. No API server, no browser."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from spindle.operator.dashboard import fmt, proposals, views
from spindle.operator.dashboard.actions import ACTIONS
from spindle.operator.dashboard.app import template_environment
from spindle.operator.dashboard.auth import Sessions, User, csrf_matches
from spindle.operator.dashboard.settings import parse_listen
from spindle.operator.dashboard.store import literal, serves
from spindle.rebalance.input.model import Goals

GI = 1024**3


def broker(
    name: str, broker_id: int, *, rack: str | None = None, phase: str = "Running"
) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": name},
        "spec": {
            "brokerId": broker_id,
            "cluster": "c",
            "rack": rack,
            "volumes": [{"id": 0}, {"id": 1}],
        },
        "status": {"phase": phase, "volumesTotal": 2},
    }


def volume(
    b: str, v: int, *, state: str | None = "Active", used: float | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {"totalBytes": GI, "path": f"/var/lib/spindle/data-{v}"}
    if state is not None:
        status["state"] = state
    if used is not None:
        status["usedBytes"] = int(used * GI)
        status["replicaCount"] = 3
    return {
        "metadata": {"namespace": "ns", "name": f"{b}-data-{v}"},
        "spec": {"broker": b, "brokerId": int(b[-1]), "volumeId": v},
        "status": status,
    }


def test_unreported_bytes_are_unknown_not_zero() -> None:
    row = views.volume_row(volume("b-0", 0, state=None))
    assert row["state"] == "Pending"
    assert row["usedBytes"] is None
    assert row["usedFraction"] is None
    assert row["label"] == "— / 1.0 GiB"
    assert row["percent"] == "—"
    assert row["replicaCount"] is None


def test_overview_groups_volumes_under_their_broker_in_id_order() -> None:
    data = views.overview(
        [broker("b-1", 1), broker("b-0", 0, rack="r0")],
        [
            volume("b-0", 1, used=0.5),
            volume("b-0", 0, used=0.25),
            volume("b-1", 0, state="Offline"),
        ],
    )
    (cluster,) = data["clusters"]
    assert [b["name"] for b in cluster["brokers"]] == ["b-0", "b-1"]
    first = cluster["brokers"][0]
    assert [v["volumeId"] for v in first["volumes"]] == [0, 1]
    assert first["volumesOnline"] == 2
    assert first["usedFraction"] == pytest.approx(0.375)
    assert cluster["brokers"][1]["volumesOnline"] == 0
    assert cluster["counts"] == {"Active": 2, "Offline": 1}


def test_balance_uses_the_planners_band_and_says_unknown_without_bytes() -> None:
    unknown = views.overview([broker("b-0", 0)], [volume("b-0", 0)])
    assert unknown["clusters"][0]["balance"]["broker"]["met"] is None
    skewed = views.overview(
        [broker("b-0", 0), broker("b-1", 1)],
        [
            volume("b-0", 0, used=0.1),
            volume("b-0", 1, used=0.1),
            volume("b-1", 0, used=0.7),
            volume("b-1", 1, used=0.1),
        ],
    )
    figures = skewed["clusters"][0]["balance"]
    assert figures["broker"]["met"] is False
    assert figures["broker"]["outOfBand"] == 2  # 0.1 and 0.4 around a mean of 0.25, band x1.1
    assert figures["disk"]["outOfBand"] == 2  # broker 1's dirs: 0.7 and 0.1 around 0.4
    even = views.balance(
        views.overview(
            [broker("b-0", 0)], [volume("b-0", 0, used=0.3), volume("b-0", 1, used=0.3)]
        )["clusters"][0]["brokers"],
        Goals(),
    )
    assert even["broker"]["met"] is True
    assert even["disk"]["met"] is True


def test_volume_page_history_is_newest_first_and_includes_the_failure() -> None:
    lv = volume("b-0", 0, state="Offline", used=0.2)
    lv["status"]["failure"] = {
        "source": "IOError",
        "message": "EIO",
        "time": "2026-01-02T00:00:00Z",
    }
    lv["status"]["lastTransitionTime"] = "2026-01-02T00:00:01Z"
    events = [
        {
            "lastTimestamp": "2026-01-01T00:00:00Z",
            "type": "Normal",
            "reason": "Created",
            "message": "m",
        }
    ]
    reassignment = {
        "metadata": {"name": "r"},
        "spec": {
            "partitions": [
                {
                    "topic": "t",
                    "partition": 0,
                    "replicas": [1, 0],
                    "logDirs": ["any", "/var/lib/spindle/data-0"],
                }
            ]
        },
    }
    page = views.volume_page(lv, events, [reassignment])
    assert [h["reason"] for h in page["history"]] == ["LastTransition", "FailureIOError", "Created"]
    assert page["partitions"] is None
    assert page["incomingMoves"] == [
        {"reassignment": "r", "topic": "t", "partition": 0, "phase": "Pending"}
    ]


# ``Moving`` is the reconciler's phase name now; ``InProgress`` the older one the CRD accepts.
@pytest.mark.parametrize("phase", ["Moving", "InProgress"])
def test_a_moving_reassignment_shows_a_rate_of_bytes_over_time_since_start_and_can_be_cancelled(
    phase: str,
) -> None:
    now = dt.datetime(2026, 1, 1, 0, 1, 40, tzinfo=dt.UTC)
    item = {
        "metadata": {"namespace": "ns", "name": "r"},
        "spec": {"cluster": "c", "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]},
        "status": {
            "phase": phase,
            "bytesDone": 1000,
            "bytesTotal": 4000,
            "startTime": "2026-01-01T00:00:00Z",
            "eta": "2026-01-01T00:06:40Z",
        },
    }
    view = proposals.reassignment_view(item, now=now)
    assert view["bytesPerSecond"] == pytest.approx(10.0)
    assert view["fraction"] == pytest.approx(0.25)
    assert view["etaText"] == "5m 0s"
    assert view["canCancel"] is True
    assert ACTIONS["reassignments", "cancel"].allowed(item) is None
    assert view["partitions"][0]["phase"] == "Pending"


@pytest.mark.parametrize(
    ("throttle", "shown"),
    [
        ({}, "inter-broker unthrottled, intra-broker unthrottled"),
        ({"intraBrokerBytesPerSecond": 51200}, "inter-broker unthrottled, intra-broker 50.0 KiB/s"),
        (
            {"interBrokerBytesPerSecond": 2 * 2**20, "intraBrokerBytesPerSecond": 1024},
            "inter-broker 2.0 MiB/s, intra-broker 1.0 KiB/s",
        ),
    ],
)
def test_the_reassignment_page_renders_with_either_throttle_absent(
    throttle: dict[str, int], shown: str
) -> None:
    """A Rebalance's batches set only the intra-broker throttle: the page once failed (500) on
    the absent one, seen only with a real Reassignment in the browser test."""
    item = {
        "metadata": {"namespace": "ns", "name": "r"},
        "spec": {
            "cluster": "c",
            "partitions": [{"topic": "t", "partition": 0, "replicas": [1], "logDirs": ["/d"]}],
            "throttle": throttle,
        },
        "status": {"phase": "Moving"},
    }
    view = proposals.reassignment_view(item, now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    assert view["throttleText"] == shown
    template = template_environment().get_template("reassignment.html")
    context = template.new_context({"r": view, "flash": [], "csrf": "x", "path": "/"})
    html = "".join(template.blocks["main"](context))
    assert f"<dd>{shown}</dd>" in html


@pytest.mark.parametrize("phase", ["Pending", "Cancelling", "Completed", "Cancelled", "Failed"])
def test_a_reassignment_not_moving_shows_no_rate(phase: str) -> None:
    now = dt.datetime(2026, 1, 1, 0, 1, 40, tzinfo=dt.UTC)
    item = {
        "metadata": {"namespace": "ns", "name": "r"},
        "spec": {"cluster": "c", "partitions": []},
        "status": {"phase": phase, "bytesDone": 1000, "startTime": "2026-01-01T00:00:00Z"},
    }
    view = proposals.reassignment_view(item, now=now)
    assert view["bytesPerSecond"] is None
    assert view["rateText"] == "—"
    assert view["canCancel"] is (phase == "Pending")


def test_rebalance_without_proposal_shows_none_and_cannot_be_approved() -> None:
    item = {
        "metadata": {"namespace": "ns", "name": "rb"},
        "spec": {"cluster": "c"},
        "status": {"phase": "Planning"},
    }
    view = proposals.rebalance_view(item)
    assert view["proposal"] is None
    assert view["canApprove"] is False
    assert view["canStop"] is True
    assert (
        ACTIONS["rebalances", "approve"].allowed(item)
        == "there is no proposal waiting for approval (phase Planning)"
    )


def test_moves_say_whether_they_cross_brokers() -> None:
    item = {
        "metadata": {"namespace": "ns", "name": "rb"},
        "spec": {"cluster": "c", "approve": True},
        "status": {
            "phase": "ProposalReady",
            "proposal": {
                "replicaMoves": [
                    {
                        "topic": "t",
                        "partition": 0,
                        "sourceBroker": 1,
                        "sourceDir": "/a",
                        "destinationBroker": 2,
                        "destinationDir": "/b",
                        "bytes": 2048,
                    },
                    {
                        "topic": "t",
                        "partition": 1,
                        "sourceBroker": 1,
                        "sourceDir": "/a",
                        "destinationBroker": 1,
                        "destinationDir": "/b",
                    },
                ]
            },
        },
    }
    view = proposals.rebalance_view(item)
    assert [m["kind"] for m in view["proposal"]["replicaMoves"]] == ["cross-broker", "intra-broker"]
    assert view["proposal"]["replicaMoves"][1]["bytesText"] == "—"
    assert view["proposal"]["moves"] == 2
    assert ACTIONS["rebalances", "approve"].allowed(item) == "the proposal is already approved"


def test_each_action_is_the_merge_patch_kubectl_would_send() -> None:
    patches = {key: dict(action.patch) for key, action in ACTIONS.items()}
    assert patches == {
        ("rebalances", "approve"): {"spec": {"approve": True}},
        ("rebalances", "stop"): {"spec": {"stop": True}},
        ("reassignments", "cancel"): {"spec": {"cancel": True}},
        ("logvolumes", "cordon"): {"spec": {"desiredState": "Cordoned"}},
        ("logvolumes", "drain"): {"spec": {"desiredState": "Drained"}},
        ("logvolumes", "activate"): {"spec": {"desiredState": "Active"}},
    }


def test_sessions_expire_and_csrf_tokens_must_match_exactly() -> None:
    now = [0.0]
    sessions = Sessions(ttl=60, limit=2, clock=lambda: now[0])
    first = sessions.create("token-a", User("alice"))
    assert sessions.get(first.id) is first
    assert csrf_matches(first.csrf, first.csrf)
    assert not csrf_matches(first.csrf, first.csrf[:-1])
    assert not csrf_matches(first.csrf, None)
    second = sessions.create("token-b", User("bob"))
    sessions.create("token-c", User("carol"))  # over the limit: the oldest goes
    assert sessions.get(first.id) is None
    assert sessions.get(second.id) is second
    now[0] = 61
    assert sessions.get(second.id) is None


def test_listen_address_parsing_refuses_nonsense_clearly() -> None:
    assert parse_listen("0.0.0.0:8081") == ("0.0.0.0", 8081)
    assert parse_listen(":9000") == ("0.0.0.0", 9000)
    assert parse_listen("[::1]:8081") == ("::1", 8081)
    for bad in ("8081", "host:", "host:99999", "host:http"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_listen(bad)


def test_namespace_patterns_follow_kopfs_syntax_and_decide_the_kind_of_watch() -> None:
    assert literal(("a", "b,c"))
    assert not literal(("dash-*",))
    assert not literal(("!kube-system",))
    assert not literal(())
    assert serves((), "anything")
    assert serves(("dash-*",), "dash-1")
    assert not serves(("dash-*",), "op-1")
    assert serves(("!kube-*",), "team-a")
    assert not serves(("*,!kube-system",), "kube-system")


def test_human_bytes_and_durations() -> None:
    assert fmt.human_bytes(None) == "—"
    assert fmt.human_bytes(512) == "512 B"
    assert fmt.human_bytes(1536 * 1024) == "1.5 MiB"
    assert fmt.duration(3725) == "1h 2m"
    assert fmt.fraction(5, 0) is None
    assert fmt.fraction(15, 10) == 1.0


def test_after_an_action_the_browser_returns_only_to_a_page_of_this_site() -> None:
    from spindle.operator.dashboard.pages import _back

    request: Any = None
    assert _back(request, {"next": "/rebalances/ns/r?x=1"}) == "/rebalances/ns/r?x=1"
    for elsewhere in (
        "//evil.example",
        "/\\evil.example",
        "https://evil.example/",
        "javascript:x",
        "",
    ):
        assert _back(request, {"next": elsewhere}) == "/"
