"""The roller's rule: keep a broker's Pod, create it, replace it, or wait.

A Pod's spec is immutable, so the only way to change a running broker's volumes or settings is
to delete its Pod and create the new one: a broker restart. Every restart of a broker Pod is
decided here and carried out by one reconcile step, ``spindle.operator.reconcile.roller``
(house style 16: one decision point per hazard).

Today's rule is per broker: replace the Pod when it differs from the builder's in its labels,
owner or digest annotation (``specs.SPEC_HASH_ANNOTATION``: everything else of the spec is
folded into it), wait while the old one terminates, create a missing one. The cluster-wide
rule (issue #39) goes here too, fed by ``RollFacts``' cluster fields once the roller reads
them: restart one broker of a cluster at a time, and only when every partition it hosts keeps
``min.insync.replicas`` in sync without it (Strimzi's ``KafkaRoller`` with
``KafkaAvailability``); until then a replacement is never held back (``wait`` is only "the old
Pod is still terminating").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from spindle.operator.decisions.compare import differences
from spindle.operator.specs.names import SPEC_HASH_ANNOTATION

Action = Literal["create", "keep", "replace", "wait"]


@dataclass(frozen=True)
class RollDecision:
    """What to do with a broker's Pod and why (the why goes into the Event)."""

    action: Action
    reason: str = ""


def compared_pod(desired: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a desired Pod the live one must carry: labels, owner and the digest."""
    meta = desired["metadata"]
    return {
        "metadata": {
            "labels": meta.get("labels", {}),
            "ownerReferences": meta.get("ownerReferences", []),
            "annotations": {SPEC_HASH_ANNOTATION: meta["annotations"][SPEC_HASH_ANNOTATION]},
        }
    }


def decide_roll(desired: Mapping[str, Any], running: Mapping[str, Any] | None) -> RollDecision:
    """The Pod ``desired`` (the builder's) against the one ``running`` (None: none exists)."""
    if running is None:
        return RollDecision("create")
    diff = differences(compared_pod(desired), running)
    if not diff:
        return RollDecision("keep")
    if (running.get("metadata") or {}).get("deletionTimestamp") is not None:
        # Its volumes cannot change in place; the next reconcile (woken by the deletion)
        # creates the new one once the old one is gone.
        return RollDecision("wait", "old Pod still terminating")
    return RollDecision("replace", "spec changed: " + ", ".join(diff))
