"""How a Rebalance reads its planner's outcome, against a real API server and its Job
controller: a planner Job that finished without writing a plan fails the Rebalance with a
message naming its Pods, also when the job got as far as writing its snapshot's time.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from spindle.operator.kube import KubeApi
from spindle.operator.reconcile.rebalance import reconcile_rebalance

from .conftest import temporary_namespace, wait_for

pytestmark = pytest.mark.slow


def test_a_planner_job_that_succeeded_with_only_its_snapshot_written_fails_the_rebalance(
    spindle_crds: Any,
) -> None:
    """spark-submit exits 0 when its driver fails; here the driver wrote the snapshot's time and
    nothing more. (A Job of zero completions is one the Job controller marks Complete at once:
    this control plane has no node to run a Pod.)"""
    with temporary_namespace(spindle_crds, "outcome") as ns:
        ns.apply(json.dumps({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gone-plan"},
            "data": {"snapshotTime": "2026-01-01T00:00:00Z"},
        }))  # fmt: skip
        ns.apply(json.dumps({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "gone-plan"},
            "spec": {"completions": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "planner", "image": "unused"}],
            }}},
        }))  # fmt: skip
        wait_for(
            lambda: any(
                c["type"] == "Complete" and c["status"] == "True"
                for c in (ns.get("job", "gone-plan").get("status") or {}).get("conditions") or []
            ),
            what="the Job Complete",
        )
        ns.apply(json.dumps({
            "apiVersion": "spindle.io/v1alpha1", "kind": "Rebalance", "metadata": {"name": "gone"},
            "spec": {"cluster": "c", "mode": "full"},
        }))  # fmt: skip
        ns.patch_status("rebalance", "gone", {"phase": "Snapshotting"})
        api = KubeApi.from_kubeconfig(str(spindle_crds.kubeconfig))
        events: list[tuple[str, str, str]] = []
        status = reconcile_rebalance(
            api,
            ns.get("rebalance", "gone"),
            now=datetime.datetime.now(datetime.UTC),
            emit=lambda kind, reason, message: events.append((kind, reason, message)),
            image="unused",
            bootstrap=["127.0.0.1:9"],
        )
        assert status["phase"] == "Failed", status
        [cond] = [c for c in status["conditions"] if c["type"] == "Progressing"]
        assert cond["reason"] == "PlannerFailed"
        assert "finished without writing gone-plan" in cond["message"]
        assert [r for _, r, _ in events] == ["SnapshotTaken", "PlannerFailed"]
