"""Remediation decided from the LogVolume's record, the facts of one pass and a fake clock:
every guard rail, and a remediation resumed from its record alone (an operator restarted in
the middle of it knows nothing else)."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

import pytest
from spindle.operator.decisions.remediation import Facts, PartitionState, Step, decide
from spindle.operator.decisions.remediation_settings import RemediationError, RemediationSettings
from spindle.operator.specs import BrokerSpec, SpecError

from ..specs.bodies import broker_body

T0 = datetime.datetime(2026, 11, 24, 12, 0, 0, tzinfo=datetime.UTC)
SETTINGS = RemediationSettings(max_failures=2, window_seconds=3600)


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


#: Broker 1's directory failed: orders-0 and orders-1 lived there (offline replicas); both
#: have in-sync replicas on brokers 0 and 2. logs-0 is elsewhere on broker 1, in sync.
SAFE = {
    ("orders", 0): PartitionState((1, 0, 2), (0, 2), offline=(1,)),
    ("orders", 1): PartitionState((0, 1, 2), (0, 2), offline=(1,)),
    ("logs", 0): PartitionState((1, 2), (1, 2)),
}
OFFLINE = Facts(
    broker_id=1,
    volume="b1-data-0",
    policy="Auto",
    observed="Offline",
    failure_source="IOError",
    failure_message="the broker reports log directory /d0 offline",
    failure_since=stamp(0),
    claim_uid="claim-old",
    claim_bound=True,
    pv_name="pv-old",
    pod_uid="pod-old",
    partitions=SAFE,
    brokers={0: 3, 1: 3, 2: 3, 3: 0},
)


def step_at(record: Any, facts: Facts, seconds: float) -> Step:
    return decide(record, facts, at(seconds), SETTINGS)


def test_an_offline_volume_whose_partitions_are_in_sync_elsewhere_gets_replaced() -> None:
    step = step_at(None, OFFLINE, 1)
    assert step.action == "replace-claim"
    assert step.state == "Replacing"
    assert step.record is not None
    assert step.record["phase"] == "Replacing"
    assert step.record["oldClaimUid"] == "claim-old"
    assert step.record["oldPodUid"] == "pod-old"
    assert step.record["partitions"] == 2
    assert step.record["failures"] == [stamp(0)]
    assert step.condition is not None
    assert step.condition.status == "True"
    assert [e[1] for e in step.events] == ["RemediationStarted"]


def test_a_claim_holding_the_only_in_sync_copy_is_never_deleted() -> None:
    only_here = {**SAFE, ("orders", 1): PartitionState((0, 1), (1,), offline=(1,))}
    for policy in ("Auto", "ReplaceVolume", "MoveReplicas"):
        step = step_at(None, replace(OFFLINE, policy=policy, partitions=only_here), 1)
        assert step.action == "none", policy
        assert step.record is not None
        assert step.record["phase"] == "Unsafe"
        assert "orders-1" in step.record["message"]
        assert step.condition is not None
        assert step.condition.reason == "Unsafe"
        assert [e[1] for e in step.events] == ["RemediationRefused"]


def test_auto_does_not_replace_volumes_for_a_node_problem() -> None:
    node = replace(OFFLINE, failure_source="NodeLost")
    step = step_at(None, node, 1)
    assert step.action == "none"
    assert step.record is not None
    assert step.record["phase"] == "Waiting"
    assert "node" in step.record["message"]
    assert step_at(None, replace(node, policy="ReplaceVolume"), 1).action == "replace-claim"


def test_manual_policy_only_reports() -> None:
    step = step_at(None, replace(OFFLINE, policy="Manual"), 1)
    assert step.action == "none"
    assert step.state is None
    assert step.condition is not None
    assert (step.condition.status, step.condition.reason) == ("False", "Manual")
    # Seen again: the same words, no second Event.
    again = step_at(step.record, replace(OFFLINE, policy="Manual"), 3)
    assert again.action == "none"
    assert again.events == ()


def test_never_two_remediations_on_one_broker() -> None:
    step = step_at(None, replace(OFFLINE, busy_with="b1-data-2"), 1)
    assert step.action == "none"
    assert step.record is not None
    assert step.record["phase"] == "Busy"
    assert "b1-data-2" in step.record["message"]
    # Once the other one is done, this one starts.
    assert step_at(step.record, OFFLINE, 5).action == "replace-claim"


def test_no_decision_without_the_clusters_metadata() -> None:
    step = step_at(None, replace(OFFLINE, partitions=None), 1)
    assert step.action == "none"
    assert step.record is not None
    assert step.record["phase"] == "Waiting"


def replacing_record() -> dict[str, Any]:
    record = step_at(None, OFFLINE, 1).record
    assert record is not None
    return record


def test_replacing_resumes_from_the_record_alone() -> None:
    record = replacing_record()
    during = replace(OFFLINE, observed="Offline")
    # Restarted before the claim was deleted: delete it now.
    assert step_at(record, during, 2).action == "replace-claim"
    # Claim terminating (waits for the Pod), Pod still the old one: restart the Pod.
    step = step_at(record, replace(during, claim_terminating=True), 3)
    assert (step.action, step.state) == ("restart-pod", "Replacing")
    # Both on their way out: wait; the Broker's reconcile makes the new claim and Pod.
    gone = replace(during, claim_terminating=True, pod_terminating=True)
    assert step_at(record, gone, 4).action == "none"
    assert step_at(record, replace(during, claim_uid=None, pod_uid=None), 5).action == "none"
    new = replace(
        during, claim_uid="claim-new", claim_bound=True, pv_name="pv-new", pod_uid="pod-new"
    )
    waiting = step_at(record, new, 6)
    assert (waiting.action, waiting.state) == ("none", "Replacing")
    assert waiting.record is not None
    assert waiting.record["phase"] == "Replacing"
    assert "serve the new" in waiting.record["message"]
    online = step_at(record, replace(new, dir_online=True, observed="Active"), 20)
    assert online.state == "Rebuilding"
    assert online.record is not None
    assert online.record["phase"] == "Rebuilding"
    assert online.record["newPvName"] == "pv-new"
    assert [e[1] for e in online.events] == ["VolumeReplaced"]


def test_a_replacement_stuck_past_its_deadline_fails_and_is_not_retried_in_a_loop() -> None:
    record = replacing_record()
    stuck = replace(OFFLINE, claim_uid="claim-new", claim_bound=False, pod_uid="pod-new")
    assert step_at(record, stuck, 600).action == "none"
    failed = step_at(record, stuck, 1000)
    assert failed.record is not None
    assert failed.record["phase"] == "Failed"
    assert "gave up after 900 s in Replacing" in failed.record["message"]
    assert [e[1] for e in failed.events] == ["RemediationFailed"]
    # The same failure is not remediated again.
    assert step_at(failed.record, stuck, 1002).action == "none"


def rebuilding(
    partitions: dict[tuple[str, int], PartitionState],
) -> tuple[dict[str, Any], Facts]:
    record = replacing_record()
    facts = replace(
        OFFLINE,
        observed="Active",
        failure_source=None,
        failure_since=None,
        claim_uid="claim-new",
        pv_name="pv-new",
        pod_uid="pod-new",
        dir_online=True,
        partitions=partitions,
        broker_hosted=frozenset(partitions),
    )
    step = step_at(record, facts, 20)
    assert step.record is not None
    assert step.record["phase"] == "Rebuilding"
    return step.record, facts


def test_rebuilding_ends_when_the_broker_is_back_in_every_isr() -> None:
    catching_up = {
        ("orders", 0): PartitionState((1, 0, 2), (0, 2)),
        ("orders", 1): PartitionState((0, 1, 2), (0, 2)),
        ("logs", 0): PartitionState((1, 2), (1, 2)),
    }
    record, facts = rebuilding(catching_up)
    step = step_at(record, facts, 30)
    assert (step.action, step.state) == ("none", "Rebuilding")
    assert step.record is not None
    assert "2 partition(s) catching up" in step.record["message"]
    in_sync = {tp: PartitionState(p.replicas, p.replicas) for tp, p in catching_up.items()}
    # An ISR naming the broker while it does not host the replica yet is not believed.
    not_there = replace(facts, partitions=in_sync, broker_hosted=frozenset({("logs", 0)}))
    early = step_at(step.record, not_there, 40)
    assert early.record is not None
    assert "2 partition(s) catching up" in early.record["message"]
    done = step_at(step.record, replace(facts, partitions=in_sync), 95)
    assert done.state is None  # the observed state (Active) stands
    assert done.record is not None
    assert done.record["phase"] == "Succeeded"
    assert "after 94 s" in done.record["message"]
    assert done.condition is not None
    assert (done.condition.status, done.condition.reason) == ("False", "Succeeded")
    assert [e[1] for e in done.events] == ["RemediationSucceeded"]


def succeeded_record() -> dict[str, Any]:
    record, facts = rebuilding(SAFE)
    in_sync = {tp: PartitionState(p.replicas, p.replicas) for tp, p in SAFE.items()}
    step = step_at(record, replace(facts, partitions=in_sync), 60)
    assert step.record is not None
    assert step.record["phase"] == "Succeeded"
    return step.record


def test_a_volume_failing_again_within_the_window_cools_down_and_stays_offline() -> None:
    record = succeeded_record()
    again = replace(OFFLINE, failure_since=stamp(120), claim_uid="claim-new", pod_uid="pod-new")
    step = step_at(record, again, 121)
    assert step.action == "none"
    assert step.state is None
    assert step.record is not None
    assert step.record["phase"] == "CoolDown"
    assert step.record["failures"] == [stamp(0), stamp(120)]
    assert step.condition is not None
    assert step.condition.reason == "CoolDown"
    assert "failed 2 times within 3600 s" in step.condition.message
    assert [e[1] for e in step.events] == ["RemediationCoolDown"]
    # It does not loop: later passes hold, silently.
    later = step_at(step.record, again, 600)
    assert (later.action, later.events) == ("none", ())


def test_a_failure_after_the_window_is_remediated_again() -> None:
    record = succeeded_record()
    much_later = replace(
        OFFLINE, failure_since=stamp(4000), claim_uid="claim-new", pod_uid="pod-new"
    )
    step = step_at(record, much_later, 4001)
    assert step.action == "replace-claim"
    assert step.record is not None
    assert step.record["failures"] == [stamp(4000)]


def test_a_new_failure_while_rebuilding_fails_the_remediation_then_cools_down() -> None:
    record, facts = rebuilding(SAFE)
    broken = replace(facts, observed="Offline", failure_source="IOError", failure_since=stamp(40))
    failed = step_at(record, broken, 40)
    assert failed.record is not None
    assert failed.record["phase"] == "Failed"
    assert [e[1] for e in failed.events] == ["RemediationFailed"]
    assert step_at(failed.record, broken, 42).record == {
        **failed.record,
        "phase": "CoolDown",
        "failures": [stamp(0), stamp(40)],
        "message": step_at(failed.record, broken, 42).record["message"],  # type: ignore[index]
    }


def test_move_replicas_without_a_plan_replaces_the_broker_with_the_least_loaded() -> None:
    step = step_at(None, replace(OFFLINE, policy="MoveReplicas"), 1)
    assert step.action == "move"
    assert step.intra == ()
    assert step.state is None  # the directory stays Offline
    assert step.reassignment is not None
    name, moves = step.reassignment
    assert name.startswith("b1-data-0-move-")
    # Broker 3 holds nothing: it takes orders-0; then it has 1, still the least loaded.
    assert list(moves) == [
        {"topic": "orders", "partition": 0, "replicas": [3, 0, 2]},
        {"topic": "orders", "partition": 1, "replicas": [0, 3, 2]},
    ]
    record = step.record
    assert record is not None
    assert record["phase"] == "Moving"
    # Restarted before the Reassignment existed: it is created (same name, same moves).
    resumed = step_at(record, replace(OFFLINE, policy="MoveReplicas"), 3)
    assert resumed.action == "move"
    assert resumed.reassignment == (name, moves)
    moving = step_at(record, replace(OFFLINE, reassignment_phase="Moving"), 5)
    assert moving.action == "none"
    assert moving.record is not None
    done = step_at(moving.record, replace(OFFLINE, reassignment_phase="Completed"), 50)
    assert done.record is not None
    assert done.record["phase"] == "Succeeded"
    # The same failure is not remediated twice (the directory is still Offline).
    assert step_at(done.record, OFFLINE, 60).action == "none"


#: The planner's fix-offline plan for SAFE: orders-0 stays on broker 1 in /d1 (room there);
#: orders-1 goes to broker 3 (it did not fit).
PLAN = (
    {"topic": "orders", "partition": 0, "replicas": [1, 0, 2], "log_dirs": ["/d1", "any", "any"]},
    {"topic": "orders", "partition": 1, "replicas": [0, 3, 2], "log_dirs": ["any", "/d0", "any"]},
)


def test_move_replicas_rehomes_on_the_broker_what_the_plan_keeps_there_and_moves_the_rest() -> None:
    facts = replace(OFFLINE, policy="MoveReplicas", plan=PLAN)
    step = step_at(None, facts, 1)
    assert step.action == "move"
    assert step.intra == ({"topic": "orders", "partition": 0, "dir": "/d1"},)
    assert step.reassignment is not None
    _name, moves = step.reassignment
    assert list(moves) == [{"topic": "orders", "partition": 1, "replicas": [0, 3, 2]}]
    record = step.record
    assert record is not None
    assert record["phase"] == "Moving"
    assert record["intra"] == [{"topic": "orders", "partition": 0, "dir": "/d1"}]
    assert "re-homing 1 replica(s) in other directories of broker 1" in record["message"]
    # Broker 1 still leads orders-0 or has not caught up: asked again, the Reassignment waits.
    waiting = step_at(record, replace(facts, reassignment_phase="Moving"), 5)
    assert waiting.action == "move"
    assert waiting.intra == step.intra
    assert waiting.reassignment is None
    assert waiting.record is not None
    assert "0 of 1 re-homed replica(s) in sync" in waiting.record["message"]
    # Served from /d1 and back in the ISR, but the Reassignment still runs: not done yet.
    synced = {**SAFE, ("orders", 0): PartitionState((1, 0, 2), (0, 2, 1))}
    back = replace(facts, partitions=synced, broker_hosted=frozenset({("orders", 0), ("logs", 0)}))
    half = step_at(waiting.record, replace(back, reassignment_phase="Moving"), 9)
    assert half.action == "none"
    assert half.record is not None
    assert half.record["phase"] == "Moving"
    done = step_at(half.record, replace(back, reassignment_phase="Completed"), 30)
    assert done.record is not None
    assert done.record["phase"] == "Succeeded"
    assert [e[1] for e in done.events] == ["RemediationSucceeded"]
    assert "1 replica(s) re-homed" in done.record["message"]


def test_move_replicas_that_all_fit_on_the_broker_needs_no_reassignment() -> None:
    plan = (
        PLAN[0],
        {**PLAN[0], "partition": 1, "replicas": [0, 1, 2], "log_dirs": ["any", "/d1", "any"]},
    )
    facts = replace(OFFLINE, policy="MoveReplicas", plan=plan)
    step = step_at(None, facts, 1)
    assert step.reassignment is None
    assert [m["partition"] for m in step.intra] == [0, 1]
    assert step.record is not None
    assert step.record["reassignment"] is None
    synced = {tp: PartitionState(p.replicas, (*p.isr, 1)) for tp, p in SAFE.items()}
    back = replace(facts, partitions=synced, broker_hosted=frozenset(synced))
    done = step_at(step.record, back, 20)
    assert done.record is not None
    assert done.record["phase"] == "Succeeded"


def test_move_replicas_moves_what_the_volume_listed_before_the_metadata_marks_it_offline() -> None:
    """The broker already answers KAFKA_STORAGE_ERROR but the controller has not marked its
    replicas offline yet: the partitions the LogVolume listed while online (and still on this
    broker) are moved all the same; one listed but since moved away is not."""
    not_yet = {tp: replace(p, offline=()) for tp, p in SAFE.items()}
    not_yet[("gone", 0)] = PartitionState((0, 2), (0, 2))
    facts = replace(
        OFFLINE,
        policy="MoveReplicas",
        partitions=not_yet,
        last_listed=frozenset({("orders", 0), ("orders", 1), ("gone", 0)}),
    )
    step = step_at(None, facts, 1)
    assert step.reassignment is not None
    assert [(m["topic"], m["partition"]) for m in step.reassignment[1]] == [
        ("orders", 0),
        ("orders", 1),
    ]
    # Without the list, the same pass would find nothing to move.
    assert step_at(None, replace(facts, last_listed=frozenset()), 1).record["phase"] == "Succeeded"  # type: ignore[index]


def test_move_replicas_without_a_free_broker_is_refused() -> None:
    step = step_at(None, replace(OFFLINE, policy="MoveReplicas", brokers={0: 3, 1: 3, 2: 3}), 1)
    assert step.action == "none"
    assert step.record is not None
    assert step.record["phase"] == "Unsafe"


def test_a_healthy_volume_needs_nothing() -> None:
    healthy = replace(OFFLINE, observed="Active", failure_source=None, failure_since=None)
    assert step_at(None, healthy, 1) == Step("none", None, None, None)


def test_settings_and_policies_are_checked_with_clear_messages() -> None:
    with pytest.raises(RemediationError, match="--remediation-policy must be one of"):
        RemediationSettings(default_policy="Sometimes")
    with pytest.raises(RemediationError, match="at least 1"):
        RemediationSettings(max_failures=0)
    with pytest.raises(SpecError, match=r"spec.remediation.policy must be one of .*'Later'"):
        BrokerSpec.from_body(broker_body(remediation={"policy": "Later"}))
    spec = BrokerSpec.from_body(broker_body(remediation={"policy": "Manual"}))
    assert spec.remediation_policy == "Manual"
    assert BrokerSpec.from_body(broker_body()).remediation_policy is None


def test_move_replicas_asks_the_planner_again_then_places_without_it() -> None:
    facts = replace(OFFLINE, policy="MoveReplicas", plan_error="snapshot again: r-1 lags")
    record = None
    for attempt in (1, 2, 3):
        step = step_at(record, facts, attempt)
        assert step.action == "none"
        assert step.record is not None
        assert (step.record["phase"], step.record["planAttempts"]) == ("Waiting", attempt)
        assert "snapshot again: r-1 lags" in step.record["message"]
        record = step.record
    placed = step_at(record, facts, 4)
    assert placed.action == "move"
    assert placed.reassignment is not None  # the fallback: broker 3 for both partitions
    assert placed.record is not None
    assert placed.record["planAttempts"] is None  # removed from the status (merge patch)
    assert "2 placed without the planner (snapshot again: r-1 lags)" in placed.record["message"]
