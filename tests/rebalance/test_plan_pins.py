"""Plans are pinned: the same snapshot and request give the same bytes, release after release.

A refactoring of the planner must not change a single plan by accident (operators diff plans,
and a plan that changes on a re-run looks like a cluster that changed). These hashes were
recorded before the planner's goals were restructured; a deliberate change to the planner's
choices updates them in the same commit and says why.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from spindle.rebalance.generator import Shape, generate
from spindle.rebalance.model import Goals, PlanError
from spindle.rebalance.pipeline import make_plan
from spindle.rebalance.scope import Request

# 6 brokers x 2 disks on 3 racks, one Offline and one Draining dir, one new broker.
SHAPE = Shape(
    brokers=6,
    disks=2,
    replicas=600,
    racks=3,
    offline_dirs=1,
    draining_dirs=1,
    new_brokers=1,
    seed=3,
)

PINS = {
    "full": "663788ee61d354b33e10004837f74747543eeedf4c496368b0511c4001930788",
    "intra-broker": "46e48903b3c9c647883c4fa38b33462cc6e0a4cd2ae83529ce7b6a70d7ae44c6",
    "add-brokers": "9eac6adb45bba15a699ccd0c1ad6f13dc245053838863f7c0cd89d906c17604a",
    "fix-offline": "0c072b68bde69c9e108227766f08a0472a4fc68a9dd3a4b71620cad6c5543fb7",
    "remove-volumes": "f1fcf002403b802dc55d2d277833b919cf7648ecae2b554dbcf81c46230dfa22",
}


def _written(data: Any) -> str:
    """As ``spindle-rebalance plan`` writes its files."""
    return json.dumps(data, separators=(",", ":")) + "\n"


def _digest(request: Request) -> str:
    try:
        result = make_plan(generate(SHAPE), request, goals=Goals())
        # Timings are wall-clock, the one part of a summary that may differ between runs.
        summary = {k: v for k, v in result.summary.items() if k != "timings"}
        text = _written(result.plan) + _written(summary)
    except PlanError as exc:  # a refusal is pinned too: its message names every replica
        text = f"PlanError: {exc}\n"
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("mode", sorted(PINS))
def test_each_modes_plan_and_summary_are_the_pinned_bytes(mode: str) -> None:
    assert _digest(Request(mode=mode)) == PINS[mode]


def test_a_capped_plan_is_the_pinned_bytes() -> None:
    capped = Request(mode="full", max_moves=40)
    assert _digest(capped) == "7351d14d45be3f47af0de071a718e9ded2acd171a390243fc5cd66e2e7e55f4c"
