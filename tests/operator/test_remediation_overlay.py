"""The remediation's view laid over a LogVolume's status: a pass that decided shows its step;
a pass that did not (a full reconcile, run on events) keeps what the last decision showed, so
the state does not flap between Offline and Replacing and the Remediating condition stays."""

from __future__ import annotations

from typing import Any

from spindle.operator import metrics
from spindle.operator.decisions.remediation import Step
from spindle.operator.reconcile.context import Context
from spindle.operator.reconcile.remediation import _count, broker_condition, overlay
from spindle.operator.specs import BrokerSpec
from spindle.operator.specs.status import Condition

from .specs.bodies import broker_body

NOW = "2026-11-24T12:00:10Z"
CURRENT: dict[str, Any] = {
    "state": "Replacing",
    "lastTransitionTime": "2026-11-24T12:00:00Z",
    "remediation": {"phase": "Replacing", "message": "restarting the broker Pod"},
    "conditions": [
        {
            "type": "Remediating",
            "status": "True",
            "reason": "Replacing",
            "message": "restarting the broker Pod",
            "lastTransitionTime": "2026-11-24T12:00:00Z",
        }
    ],
}


def context() -> Context:
    body = broker_body()
    return Context(api=None, body=body, broker=BrokerSpec.from_body(body), now=NOW, emit=print)  # type: ignore[arg-type]


def evidence_status() -> dict[str, Any]:
    """What the evidence alone says mid-replacement: Offline (the broker is restarting)."""
    return {
        "state": "Offline",
        "lastTransitionTime": NOW,
        "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "False", "reason": "IOError", "message": "x"}],
    }


def test_a_pass_without_a_decision_keeps_the_shown_state_and_condition() -> None:
    wanted = evidence_status()
    overlay(context(), 0, CURRENT, wanted)
    assert wanted["state"] == "Replacing"
    assert wanted["lastTransitionTime"] == "2026-11-24T12:00:00Z"
    kinds = {c["type"]: c for c in wanted["conditions"]}
    assert set(kinds) == {"Ready", "Remediating"}
    assert kinds["Remediating"]["lastTransitionTime"] == "2026-11-24T12:00:00Z"
    assert "remediation" not in wanted  # the record is only written by a decision


def test_a_decided_step_is_shown_with_its_record() -> None:
    ctx = context()
    record = {"phase": "Rebuilding", "message": "1 partition(s) catching up"}
    ctx.remediation[0] = Step(
        "none", record, "Rebuilding", Condition("Remediating", "True", "Rebuilding", "catching up")
    )
    wanted = evidence_status()
    overlay(ctx, 0, CURRENT, wanted)
    assert wanted["state"] == "Rebuilding"
    assert wanted["lastTransitionTime"] == NOW  # a new state
    assert wanted["remediation"] == record
    [remediating] = [c for c in wanted["conditions"] if c["type"] == "Remediating"]
    assert remediating["reason"] == "Rebuilding"


def test_a_volume_never_remediated_is_left_alone() -> None:
    wanted = evidence_status()
    overlay(context(), 0, {"state": "Active"}, wanted)
    assert wanted == evidence_status()


def test_the_brokers_condition_names_the_volumes_being_remediated() -> None:
    running = broker_condition(
        {"b7-data-0": {"remediation": {"phase": "Rebuilding"}}, "b7-data-1": {}}
    )
    assert (running.status, running.message) == ("True", "remediating: b7-data-0 (Rebuilding)")
    idle = broker_condition({"b7-data-0": {"remediation": {"phase": "Succeeded"}}})
    assert (idle.status, idle.reason) == ("False", "Idle")


def test_remediation_events_count_in_the_operators_metrics() -> None:
    def value(name: str) -> float:
        sample = metrics.REGISTRY.get_sample_value(
            f"spindle_operator_remediations_{name}_total", {"action": "ReplaceVolume"}
        )
        return float(sample or 0.0)

    before = {n: value(n) for n in ("started", "succeeded", "failed")}
    _count("RemediationStarted", {"policy": "ReplaceVolume"})
    _count("RemediationSucceeded", {"policy": "ReplaceVolume"})
    _count("RemediationCoolDown", {"policy": "ReplaceVolume"})  # not a counter
    _count("RemediationFailed", {})  # no policy: not counted
    assert value("started") == before["started"] + 1
    assert value("succeeded") == before["succeeded"] + 1
    assert value("failed") == before["failed"]
