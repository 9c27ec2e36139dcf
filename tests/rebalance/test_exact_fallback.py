"""The exact planner (HiGHS MIP) behind the greedy on small clusters: it rescues plans the
greedy refuses, a refusal says whether impossibility was proved, and its plans are as
deterministic as the greedy's. Real HiGHS solves, no mocks; the clusters were found by
comparing greedy refusals with the MIP on generated snapshots."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from spindle.rebalance.analysis.report import hard_violations
from spindle.rebalance.cli import main
from spindle.rebalance.exact import mip as exact
from spindle.rebalance.generator import Shape, generate, small_shape
from spindle.rebalance.input.model import Goals, PlanError, cluster_to_json
from spindle.rebalance.input.scope import Request, build_scope
from spindle.rebalance.pipeline import make_plan

from .test_hard_rules import check_hard_rules

# The greedy finds no home under the capacity threshold for a dir's replicas; the MIP does.
RESCUED = Shape(
    brokers=6,
    disks=3,
    replicas=71,
    replication=2,
    racks=1,
    new_brokers=1,
    offline_dirs=2,
    draining_dirs=1,
    target_utilisation=0.65,
    seed=1452,
)
# An Offline dir's replica has nowhere to go under the hard rules, whatever else moves.
IMPOSSIBLE = Shape(
    brokers=3,
    disks=2,
    replicas=79,
    replication=2,
    racks=2,
    offline_dirs=1,
    target_utilisation=0.65,
    seed=4988,
)


def test_exact_planner_rescues_a_plan_the_greedy_refuses_and_it_keeps_the_hard_rules() -> None:
    cluster = generate(RESCUED)
    request = Request(mode="full")
    with pytest.raises(PlanError, match="not proven impossible"):
        make_plan(cluster, request, goals=Goals(), detail=False, exact_limit=0)
    result = make_plan(cluster, request, goals=Goals(), detail=False)
    assert result.summary["planner"] == "exact"
    assert result.summary["exact"]["used"] is True
    assert result.summary["exact"]["why"] == "the greedy refused the plan"
    cur_b, cur_d = result.placement
    scope = build_scope(cluster, request)
    assert hard_violations(cluster, scope, Goals(), cur_b, cur_d) == []
    assert result.summary["after"]["dirsOverCapacityThreshold"] == 0
    check_hard_rules(cluster, request, result, Goals())


def test_a_small_impossible_plan_is_refused_as_proved_naming_the_rule_the_greedy_hit() -> None:
    cluster = generate(IMPOSSIBLE)
    with pytest.raises(PlanError) as caught:
        make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
    msg = str(caught.value)
    assert msg.startswith("plan refused (full): ")
    assert "must move (dir Offline, to be emptied) but no directory can take it" in msg
    assert "the exact solver (HiGHS MIP) proved that no placement meets the hard rules" in msg
    found = exact.solve(cluster, build_scope(cluster, Request(mode="full")), Goals())
    assert found.status == "infeasible"


def test_a_refusal_beyond_the_exact_limit_does_not_claim_impossibility() -> None:
    cluster = generate(IMPOSSIBLE)
    with pytest.raises(PlanError) as caught:
        make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False, exact_limit=10)
    msg = str(caught.value)
    assert "no directory can take it" in msg
    assert "not proven impossible" in msg
    assert f"{cluster.n_replicas} replicas, above the exact solver's limit of 10" in msg
    assert "proved" not in msg.replace("not proven", "")


def test_every_summary_names_its_planner() -> None:
    cluster = generate(Shape(brokers=4, disks=2, replicas=60, target_utilisation=0.3, seed=3))
    result = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False, exact_limit=0)
    assert result.summary["planner"] == "greedy"
    assert result.summary["exact"] == {"ran": False}


def test_exact_plans_are_byte_identical_for_the_same_snapshot() -> None:
    cluster = generate(RESCUED)
    first = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
    second = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
    assert first.summary["planner"] == second.summary["planner"] == "exact"
    assert json.dumps(first.plan, sort_keys=True) == json.dumps(second.plan, sort_keys=True)
    assert (first.placement[1] == second.placement[1]).all()


def test_soft_bands_are_elastic_so_an_unreachable_band_is_not_infeasible() -> None:
    # The test MIP's shape with an Offline dir: its broker may not receive, so no plan meets
    # every band (the strict model finds none), but the elastic model still places every
    # replica under the hard rules. (Without the Offline dir, the band its rack can reach
    # is met: rack.rack_share.)
    cluster = generate(replace(small_shape(0), offline_dirs=1))
    scope = build_scope(cluster, Request(mode="full"))
    strict = exact.solve(cluster, scope, Goals(), elastic=False)
    elastic = exact.solve(cluster, scope, Goals())
    assert strict.status == "infeasible"
    assert elastic.status in ("optimal", "feasible")
    assert elastic.violation > 0
    assert elastic.cur_broker is not None
    assert elastic.cur_dir is not None
    assert hard_violations(cluster, scope, Goals(), elastic.cur_broker, elastic.cur_dir) == []


def test_cli_says_when_the_exact_planner_made_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = tmp_path / "snapshot.json"
    snap.write_text(json.dumps(cluster_to_json(generate(RESCUED))))
    out, summary = tmp_path / "plan.json", tmp_path / "summary.json"
    argv = ["plan", "--snapshot", str(snap), "--mode", "full", "--output", str(out)]
    assert main([*argv, "--summary", str(summary), "--no-spark"]) == 0
    assert "planner: exact (exact solver ran because the greedy refused the plan" in (
        capsys.readouterr().out
    )
    doc = json.loads(summary.read_text())
    assert doc["planner"] == "exact"
    assert json.loads(out.read_text())["partitions"]
