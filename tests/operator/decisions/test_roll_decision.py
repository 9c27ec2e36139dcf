"""The roller's rule (``decisions.roll``): create a missing broker Pod, keep an equal one,
replace one whose digest, labels or owner changed, wait while the old one terminates."""

from __future__ import annotations

import copy
from typing import Any

from spindle.operator import specs
from spindle.operator.decisions.roll import RollDecision, decide_roll


def _pod(**spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "spindle.io/v1alpha1",
        "kind": "Broker",
        "metadata": {"name": "one", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": {"brokerId": 1, "cluster": "c", "volumes": [{"id": 0, "size": "1Gi"}], **spec},
    }
    return specs.build_pod(specs.BrokerSpec.from_body(body))


def _running(pod: dict[str, Any]) -> dict[str, Any]:
    live = copy.deepcopy(pod)
    live["metadata"]["uid"] = "pod-1"
    live["metadata"]["resourceVersion"] = "7"  # filled in by the server: never a difference
    live["status"] = {"phase": "Running"}
    return live


def test_a_missing_pod_is_created() -> None:
    assert decide_roll(_pod(), None) == RollDecision("create")


def test_a_pod_with_the_same_digest_is_kept() -> None:
    assert decide_roll(_pod(), _running(_pod())) == RollDecision("keep")


def test_a_pod_whose_digest_changed_is_replaced_with_the_reason() -> None:
    old = _running(_pod())
    new = _pod(volumes=[{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi"}])
    decision = decide_roll(new, old)
    assert decision.action == "replace"
    assert decision.reason.startswith("spec changed: ")
    assert specs.SPEC_HASH_ANNOTATION in decision.reason


def test_a_changed_pod_still_terminating_is_waited_for() -> None:
    old = _running(_pod())
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    new = _pod(volumes=[{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi"}])
    assert decide_roll(new, old) == RollDecision("wait", "old Pod still terminating")
