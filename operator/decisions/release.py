"""A LogVolume's status when its volume is released, and when it is declared again. Pure.

A volume removed from a Broker's spec (allowed only once its LogVolume is ``Empty``, see
``storage_diff``) is *released*: its claim is deleted or kept (``deleteClaim``), and its
LogVolume stays, in state ``Released``, saying which -- so that ``kubectl get slv`` keeps the
history of the disk and a kept claim can be found again. Declaring the same volume id again
takes the kept claim back; the LogVolume then leaves ``Released`` (``Pending`` until the broker
reports the directory) and its ``desiredState`` is ``Active`` again: declaring a volume is
asking for it to be used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spindle.operator.specs.meta import Obj
from spindle.operator.specs.names import LABEL_RELEASED
from spindle.operator.specs.status import Condition, merge_conditions

__all__ = ["LABEL_RELEASED", "LIVE_FIELDS", "reattached_status", "released_status"]
#: Status fields that describe the live directory; a released one has none of them.
LIVE_FIELDS = ("usedBytes", "usableBytes", "replicaCount", "cordoned", "failure", "drain")


def released_status(
    current: Mapping[str, Any],
    *,
    claim_name: str,
    claim_kept: bool,
    generation: int,
    now: str,
) -> Obj:
    """The merge patch of ``status`` that makes a LogVolume ``Released``: the claim kept or
    deleted, when, and a ``Ready`` condition saying so; live figures removed (null)."""
    what = (
        f"claim {claim_name} kept with its data (deleteClaim is false); declare volume id "
        "again to take it back"
        if claim_kept
        else f"claim {claim_name} deleted (deleteClaim is true)"
    )
    status: Obj = dict.fromkeys(k for k in LIVE_FIELDS if k in current)
    status.update(
        state="Released",
        claimKept=claim_kept,
        releasedTime=current.get("releasedTime") or now,
        lastTransitionTime=now
        if current.get("state") != "Released"
        else current.get("lastTransitionTime", now),
        conditions=merge_conditions(
            current.get("conditions") or [],
            [
                Condition("Ready", "False", "Released", f"removed from the Broker's spec; {what}"),
                Condition("Reported", "False", "Released", "the broker no longer has it"),
            ],
            now=now,
            generation=generation,
        ),
    )
    return status


def reattached_status(current: Mapping[str, Any], *, now: str) -> Obj:
    """The merge patch of ``status`` for a released LogVolume whose volume id is declared
    again: ``Pending`` until the broker reports the directory (the next probe)."""
    status: Obj = dict.fromkeys(k for k in ("claimKept", "releasedTime") if k in current)
    status.update(state="Pending", lastTransitionTime=now)
    return status
