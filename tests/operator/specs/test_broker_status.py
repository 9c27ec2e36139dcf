"""specs.broker_status: a Broker's phase and its Ready, Reconciled and Degraded conditions."""

from __future__ import annotations

from typing import Any

from spindle.operator.specs.broker_status import broker_conditions

RUNNING: dict[str, Any] = {
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
}


def test_a_running_broker_with_healthy_volumes_is_ready_and_not_degraded() -> None:
    vols = [("b-data-0", {"state": "Active"}), ("b-data-1", {"state": "Cordoned"})]
    phase, ready, reconciled, degraded = broker_conditions("b", RUNNING, vols, declared=2)
    assert phase == "Running"
    assert (ready.status, ready.reason) == ("True", "BrokerRunning")
    assert ready.message == "pod b is Running; 2/2 log directories online"
    assert (reconciled.status, reconciled.reason) == ("True", "Reconciled")
    assert (degraded.status, degraded.reason) == ("False", "AllVolumesHealthy")


def test_an_offline_volume_is_the_reason_and_every_other_trouble_is_in_the_message() -> None:
    vols = [
        ("b-data-0", {"state": "Offline", "failure": {"source": "IOError"}}),
        ("b-data-1", {"state": "Draining",
                      "drain": {"bytesLeft": 3 * 2**20, "timeRemaining": "1m2s"}}),
        ("b-data-2", {"state": "Rebuilding"}),
    ]  # fmt: skip
    phase, ready, _, degraded = broker_conditions("b", RUNNING, vols, declared=3)
    assert phase == "Degraded"
    assert (ready.status, ready.reason) == ("False", "BrokerDegraded")
    assert (degraded.status, degraded.reason) == ("True", "VolumesOffline")
    assert degraded.message == (
        "offline: b-data-0 (IOError); being rebuilt: b-data-2 (Rebuilding); "
        "draining: b-data-1 (3Mi left, 1m2s to go)"
    )


def test_a_draining_volume_degrades_a_broker_that_is_still_ready() -> None:
    vols = [
        ("b-data-0", {"state": "Active"}),
        ("b-data-1", {"state": "Draining", "usedBytes": 1024,
                      "drain": {"message": "t-0: no broker has room"}}),
    ]  # fmt: skip
    phase, ready, _, degraded = broker_conditions("b", RUNNING, vols, declared=2)
    assert (phase, ready.status) == ("Running", "True")
    assert (degraded.status, degraded.reason) == ("True", "VolumesDraining")
    assert "b-data-1 (1Ki left, t-0: no broker has room)" in degraded.message


def test_a_refused_storage_change_is_not_reconciled_and_degrades_a_running_broker() -> None:
    vols = [("b-data-0", {"state": "Active"})]
    refusal = ("VolumeRemovalRefused", "volume 1: removal is refused because ...")
    phase, ready, reconciled, degraded = broker_conditions(
        "b", RUNNING, vols, declared=1, refusal=refusal
    )
    assert phase == "Degraded"
    assert ready.status == "False"
    assert (reconciled.status, reconciled.reason, reconciled.message) == ("False", *refusal)
    assert (degraded.status, degraded.reason) == ("True", "StorageChangeRefused")
    assert degraded.message == f"spec change refused: {refusal[1]}"


def test_without_a_pod_the_broker_is_pending_and_says_the_pod_is_missing() -> None:
    phase, ready, _, degraded = broker_conditions("b", None, [], declared=2)
    assert phase == "Pending"
    assert (ready.status, ready.reason) == ("False", "BrokerPending")
    assert ready.message == "pod b is missing; 0/2 log directories online"
    assert degraded.status == "False"
