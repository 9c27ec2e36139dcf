"""A LogVolume's state from the evidence: every failure source maps to Offline, named."""

from __future__ import annotations

from typing import Any

import pytest
from spindle.operator.decisions.volume_state import (
    DirReport,
    Evidence,
    find_failure,
    match_report,
)
from spindle.operator.decisions.volume_status import logvolume_status
from spindle.operator.specs import BrokerSpec

ONLINE = DirReport(
    "/var/lib/spindle/data-0",
    None,
    replicas=3,
    used_bytes=5000,
    total_bytes=2**30,
    usable_bytes=2**29,
)
BOUND: dict[str, Any] = {
    "metadata": {"name": "data-0-b7"},
    "spec": {"volumeName": "pv-1"},
    "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}},
}


def status(
    broker: BrokerSpec, evidence: Evidence, current: Any = None, now: str = "2026-01-01T00:00:00Z"
) -> Any:
    return logvolume_status(
        broker.volumes[0],
        broker,
        current=current or {},
        pvc=evidence.pvc,
        generation=1,
        now=now,
        evidence=evidence,
    )


def test_an_online_directory_is_active_with_the_brokers_bytes_and_replica_count(
    broker: BrokerSpec,
) -> None:
    s = status(broker, Evidence(report=ONLINE, pvc=BOUND))
    assert s["state"] == "Active"
    assert (s["usedBytes"], s["usableBytes"], s["totalBytes"], s["replicaCount"]) == (
        5000,
        2**29,
        2**30,
        3,
    )
    assert s["usage"] == "4.9Ki/1Gi"
    ready = {c["type"]: c for c in s["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("True", "Active")
    assert "failure" not in s


@pytest.mark.parametrize(
    ("evidence", "source", "words"),
    [
        (
            Evidence(report=DirReport("/var/lib/spindle/data-0", "KafkaStorageError"), pvc=BOUND),
            "IOError",
            "KafkaStorageError",
        ),
        (
            Evidence(
                report=ONLINE,
                pvc=BOUND,
                pv={
                    "metadata": {"name": "pv-1"},
                    "status": {"phase": "Failed", "message": "disk gone"},
                },
            ),
            "PersistentVolumeFailed",
            "pv-1 is Failed: disk gone",
        ),
        (
            Evidence(report=ONLINE, pvc={**BOUND, "status": {"phase": "Lost"}}),
            "ClaimLost",
            "data-0-b7 is Lost",
        ),
        (
            Evidence(
                report=ONLINE,
                pvc=BOUND,
                health_events=[
                    {"reason": "VolumeConditionNormal", "lastTimestamp": "2026-01-01T00:00:00Z"},
                    {
                        "reason": "VolumeConditionAbnormal",
                        "message": "bad sectors",
                        "lastTimestamp": "2026-01-01T00:00:05Z",
                    },
                ],
            ),
            "VolumeHealth",
            "bad sectors",
        ),
        (
            Evidence(report=ONLINE, pvc=BOUND, node_problem="node n1 of pod b7 is gone"),
            "NodeLost",
            "node n1",
        ),
    ],
)
def test_each_failure_source_makes_the_volume_offline_naming_the_source(
    broker: BrokerSpec, evidence: Evidence, source: str, words: str
) -> None:
    s = status(broker, evidence, current={"state": "Active"})
    assert s["state"] == "Offline"
    assert s["failure"]["source"] == source
    assert words in s["failure"]["message"]
    assert s["failure"]["since"] == "2026-01-01T00:00:00Z"
    assert s["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    ready = {c["type"]: c for c in s["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", source)


def test_a_health_event_superseded_by_a_normal_one_is_no_failure() -> None:
    events = [
        {"reason": "VolumeConditionAbnormal", "lastTimestamp": "2026-01-01T00:00:00Z"},
        {"reason": "VolumeConditionNormal", "lastTimestamp": "2026-01-01T00:01:00Z"},
    ]
    assert find_failure(Evidence(report=ONLINE, health_events=events)) is None


def test_a_failure_keeps_its_since_while_it_lasts_and_clears_on_a_good_report(
    broker: BrokerSpec,
) -> None:
    failed = Evidence(report=DirReport("/var/lib/spindle/data-0", "KafkaStorageError"), pvc=BOUND)
    first = status(broker, failed, current={"state": "Active"}, now="2026-01-01T00:00:00Z")
    later = status(broker, failed, current=first, now="2026-01-01T00:00:09Z")
    assert later["failure"]["since"] == "2026-01-01T00:00:00Z"
    assert later["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    # The broker unreachable: an I/O failure it reported still stands.
    unreachable = Evidence(probe_error="connection refused", pvc=BOUND)
    kept = status(broker, unreachable, current=later, now="2026-01-01T00:00:11Z")
    assert (kept["state"], kept["failure"]["source"]) == ("Offline", "IOError")
    reported = {c["type"]: c for c in kept["conditions"]}["Reported"]
    assert (reported["status"], reported["message"]) == ("False", "connection refused")
    # Restarted with the directory back: Active, failure removed (merge-patch null).
    back = status(
        broker, Evidence(report=ONLINE, pvc=BOUND), current=kept, now="2026-01-01T00:01:00Z"
    )
    assert back["state"] == "Active"
    assert back["failure"] is None
    assert back["lastTransitionTime"] == "2026-01-01T00:01:00Z"


def test_the_probe_stamp_moves_only_every_30_seconds_when_nothing_else_changed(
    broker: BrokerSpec,
) -> None:
    evidence = Evidence(report=ONLINE, pvc=BOUND)
    first = status(broker, evidence, now="2026-01-01T00:00:00Z")
    assert first["lastProbeTime"] == "2026-01-01T00:00:00Z"
    quiet = status(broker, evidence, current=first, now="2026-01-01T00:00:10Z")
    assert quiet["lastProbeTime"] == "2026-01-01T00:00:00Z"
    stale = status(broker, evidence, current=first, now="2026-01-01T00:00:31Z")
    assert stale["lastProbeTime"] == "2026-01-01T00:00:31Z"
    grown = Evidence(report=DirReport(ONLINE.path, None, replicas=4, used_bytes=9000), pvc=BOUND)
    busy = status(broker, grown, current=first, now="2026-01-01T00:00:10Z")
    assert busy["lastProbeTime"] == "2026-01-01T00:00:10Z"


def test_reports_match_by_path_else_by_the_unique_directory_name() -> None:
    a = DirReport("/tmp/x/data-0", None)
    b = DirReport("/tmp/x/data-1", None)
    exact = DirReport("/var/lib/spindle/data-1", None)
    assert match_report([a, b, exact], "/var/lib/spindle/data-1") is exact
    assert match_report([a, b], "/var/lib/spindle/data-0") is a
    assert match_report([a, DirReport("/tmp/y/data-0", None)], "/var/lib/spindle/data-0") is None
    assert match_report([a], "/var/lib/spindle/data-2") is None


def test_a_drained_volume_is_draining_while_replicas_remain_and_empty_after(
    broker: BrokerSpec,
) -> None:
    def drained(replicas: int, cordoned: bool = True) -> Any:
        report = DirReport(ONLINE.path, None, replicas=replicas, cordoned=cordoned)
        return status(broker, Evidence(report=report, pvc=BOUND, desired="Drained"))

    assert drained(3, cordoned=False)["state"] == "Active"  # the cordon comes first
    assert drained(3)["state"] == "Draining"
    assert drained(0)["state"] == "Empty"
    cordoned = DirReport(ONLINE.path, None, replicas=3, cordoned=True)
    s = status(broker, Evidence(report=cordoned, pvc=BOUND, desired="Cordoned"))
    assert (s["state"], s["cordoned"]) == ("Cordoned", True)
