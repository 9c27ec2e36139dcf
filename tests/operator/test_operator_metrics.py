"""The operator's metrics module: what a scrape shows for what the operator recorded.

Unit tests of the bookkeeping against prometheus_client's own text exposition (the same
bytes ``/metrics`` serves); the endpoint of a real operator process is scraped in
``tests/operator/volumes``.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from spindle.operator import metrics


def _samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.REGISTRY).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _lv(state: str, used: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"state": state}
    if used is not None:
        status["usedBytes"] = used
    return {"status": status}


def test_every_volume_state_is_exported_and_a_brokers_volumes_replace_its_previous_count() -> None:
    metrics.record_logvolumes("ns-a", "b1", [_lv("Active"), _lv("Draining", used=300)])
    metrics.record_logvolumes("ns-a", "b2", [_lv("Active")])
    before = _samples()
    for state in metrics.VOLUME_STATES:
        assert ("spindle_operator_logvolumes", (("state", state),)) in before

    active = metrics.VOLUMES.value("Active")
    draining = before[("spindle_operator_logvolumes", (("state", "Draining"),))]
    assert metrics.BYTES_MOVING.value("drain") >= 300
    drain = metrics.BYTES_MOVING.value("drain")
    metrics.record_logvolumes("ns-a", "b1", [_lv("Active"), _lv("Empty", used=0)])
    assert metrics.BYTES_MOVING.value("drain") == drain - 300
    assert metrics.VOLUMES.value("Active") == active
    assert metrics.VOLUMES.value("Draining") == draining - 1
    metrics.forget_broker("ns-a", "b1")
    metrics.forget_broker("ns-a", "b2")
    assert metrics.VOLUMES.value("Active") == active - 2


def test_bytes_moving_sums_objects_and_forgets_a_finished_one() -> None:
    base_r = metrics.BYTES_MOVING.value("reassignment")
    base_d = metrics.BYTES_MOVING.value("drain")
    metrics.record_moving("reassignment", ("ns-m", "r1"), 1000)
    metrics.record_moving("reassignment", ("ns-m", "r2"), 24)
    metrics.record_moving("drain", ("ns-m", "b1"), 7)
    got = _samples()
    assert got[("spindle_operator_bytes_moving", (("kind", "reassignment"),))] == base_r + 1024
    assert got[("spindle_operator_bytes_moving", (("kind", "drain"),))] == base_d + 7
    metrics.record_moving("reassignment", ("ns-m", "r1"), 0)
    assert metrics.BYTES_MOVING.value("reassignment") == base_r + 24
    metrics.record_moving("reassignment", ("ns-m", "r2"), 0)
    metrics.forget_broker("ns-m", "b1")
    assert metrics.BYTES_MOVING.value("reassignment") == base_r
    assert metrics.BYTES_MOVING.value("drain") == base_d


def test_rebalance_counters_follow_the_phases_a_pass_went_through() -> None:
    def value(name: str, **labels: str) -> float:
        return _samples().get((name, tuple(sorted(labels.items()))), 0.0)

    proposals = value("spindle_operator_rebalance_proposals_total")
    approvals = value("spindle_operator_rebalance_approvals_total")
    completed = value("spindle_operator_rebalance_executions_total", result="Completed")

    metrics.rebalance_transition({"phase": "Planning"}, {"phase": "ProposalReady"})
    metrics.rebalance_transition({"phase": "ProposalReady"}, {"phase": "ProposalReady"})
    assert value("spindle_operator_rebalance_proposals_total") == proposals + 1
    # approved with nothing to move: approval and a completed execution in one pass
    metrics.rebalance_transition(
        {"phase": "ProposalReady"}, {"phase": "Completed", "approvalTime": "2026-01-01T00:00:00Z"}
    )
    assert value("spindle_operator_rebalance_approvals_total") == approvals + 1
    assert value("spindle_operator_rebalance_executions_total", result="Completed") == completed + 1
    # stopped before approval is no execution; stopped while executing is one
    stopped = value("spindle_operator_rebalance_executions_total", result="Stopped")
    metrics.rebalance_transition({"phase": "ProposalReady"}, {"phase": "Stopped"})
    assert value("spindle_operator_rebalance_executions_total", result="Stopped") == stopped
    metrics.rebalance_transition(
        {"phase": "Executing", "approvalTime": "2026-01-01T00:00:00Z"},
        {"phase": "Stopped", "approvalTime": "2026-01-01T00:00:00Z"},
    )
    assert value("spindle_operator_rebalance_executions_total", result="Stopped") == stopped + 1
    assert value("spindle_operator_rebalance_approvals_total") == approvals + 1


def test_remediation_counters_exist_at_zero_for_each_action_before_any_remediation() -> None:
    got = _samples()
    for action in metrics.REMEDIATION_ACTIONS:
        for what in ("started", "succeeded", "failed"):
            assert (f"spindle_operator_remediations_{what}_total", (("action", action),)) in got


def test_last_reconcile_duration_is_the_last_one_and_reconciles_are_counted() -> None:
    metrics.observe_reconcile("Broker", 0.5)
    count = _samples()[("spindle_operator_reconciles_total", (("kind", "Broker"),))]
    metrics.observe_reconcile("Broker", 0.25)
    got = _samples()
    assert got[("spindle_operator_last_reconcile_duration_seconds", (("kind", "Broker"),))] == 0.25
    assert got[("spindle_operator_reconciles_total", (("kind", "Broker"),))] == count + 1
