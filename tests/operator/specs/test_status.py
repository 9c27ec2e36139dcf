"""A Broker's status: conditions, phase and used percentage."""

from __future__ import annotations

from spindle.operator import specs


def test_conditions_keep_transition_time_until_status_changes() -> None:
    first = specs.merge_conditions(
        [], [specs.Condition("Ready", "False", "Pending", "m")], now="T1", generation=1
    )
    same = specs.merge_conditions(
        first, [specs.Condition("Ready", "False", "Pending", "m2")], now="T2", generation=2
    )
    flipped = specs.merge_conditions(
        same, [specs.Condition("Ready", "True", "Running", "ok")], now="T3", generation=2
    )
    assert first[0]["lastTransitionTime"] == "T1"
    assert same[0]["lastTransitionTime"] == "T1"
    assert same[0]["message"] == "m2"
    assert flipped[0]["lastTransitionTime"] == "T3"
    assert set(flipped[0]) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }


def test_broker_phase_follows_pod_readiness_and_volumes() -> None:
    ready = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    assert specs.broker_phase(None, 0, 3) == "Pending"
    assert specs.broker_phase({"status": {"phase": "Pending"}}, 0, 3) == "Pending"
    assert specs.broker_phase(ready, 3, 3) == "Running"
    assert specs.broker_phase(ready, 2, 3) == "Degraded"
    assert specs.broker_phase({"status": {"phase": "Failed"}}, 3, 3) == "Failed"


def test_used_percent_is_unknown_until_a_volume_reports() -> None:
    assert specs.used_percent([{"totalBytes": 100}]) is None
    assert specs.used_percent([{"totalBytes": 100, "usedBytes": 25}, {"totalBytes": 100}]) == (
        "25.0%"
    )


def test_a_condition_said_twice_in_one_pass_is_written_once_with_its_last_word() -> None:
    """An approved Rebalance with nothing to move goes ProposalReady -> Executing ->
    Completed in one pass; two Progressing entries made the API server refuse the status
    (422 "Duplicate value: {type: Progressing}") and the Rebalance stayed ProposalReady."""
    written = specs.merge_conditions(
        [],
        [
            specs.Condition("Progressing", "True", "Executing", "approved"),
            specs.Condition("PlannerReady", "True", "PlannerStarted", "planner launched"),
            specs.Condition("Progressing", "False", "Completed", "nothing to move"),
        ],
        now="T1",
        generation=3,
    )
    assert [(c["type"], c["status"], c["reason"]) for c in written] == [
        ("Progressing", "False", "Completed"),
        ("PlannerReady", "True", "PlannerStarted"),
    ]
