"""decisions.release: the status of a released LogVolume, and of one declared again."""

from __future__ import annotations

from spindle.operator.decisions.release import reattached_status, released_status

NOW = "2026-01-01T00:00:00Z"
EMPTY = {
    "state": "Empty",
    "usedBytes": 0,
    "replicaCount": 0,
    "cordoned": True,
    "usableBytes": 5,
    "lastTransitionTime": "2025-12-31T00:00:00Z",
    "conditions": [{"type": "Ready", "status": "True", "reason": "Empty", "message": "m"}],
}


def test_a_released_volume_says_its_claim_was_deleted_and_drops_live_figures() -> None:
    status = released_status(EMPTY, claim_name="data-1-b", claim_kept=False, generation=3, now=NOW)
    assert status["state"] == "Released"
    assert status["claimKept"] is False
    assert status["releasedTime"] == NOW
    assert status["lastTransitionTime"] == NOW
    # merge-patch nulls: the directory is gone from the broker, its figures with it
    assert {k: status[k] for k in ("usedBytes", "replicaCount", "cordoned", "usableBytes")} == {
        "usedBytes": None,
        "replicaCount": None,
        "cordoned": None,
        "usableBytes": None,
    }
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "Released")
    assert "data-1-b deleted" in ready["message"]


def test_a_kept_claim_is_named_and_released_twice_keeps_the_first_time() -> None:
    first = released_status(EMPTY, claim_name="data-1-b", claim_kept=True, generation=3, now=NOW)
    assert first["claimKept"] is True
    ready = {c["type"]: c for c in first["conditions"]}["Ready"]
    assert "data-1-b kept" in ready["message"]
    again = released_status(
        {**EMPTY, **{k: v for k, v in first.items() if v is not None}},
        claim_name="data-1-b",
        claim_kept=True,
        generation=3,
        now="2026-01-02T00:00:00Z",
    )
    assert again["releasedTime"] == NOW
    assert again["lastTransitionTime"] == NOW


def test_declared_again_it_is_pending_and_no_longer_says_released() -> None:
    released = {"state": "Released", "claimKept": True, "releasedTime": NOW}
    status = reattached_status(released, now="2026-01-02T00:00:00Z")
    assert status == {
        "state": "Pending",
        "claimKept": None,
        "releasedTime": None,
        "lastTransitionTime": "2026-01-02T00:00:00Z",
    }
