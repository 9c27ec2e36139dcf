"""The planner on every generated shape family (issue 15): aged brokers, unequal disks and
racks, hot topics, new brokers, mixed replication, rule violations and all at once. Each
family keeps the hard rules, balances leadership without moving bytes where reordering
suffices, and plans deterministically."""

from __future__ import annotations

import numpy as np
import pytest
from spindle.rebalance.generator import FAMILIES, family_shape, generate
from spindle.rebalance.input.model import Goals, executed
from spindle.rebalance.input.scope import Request
from spindle.rebalance.pipeline import make_plan

from .test_hard_rules import check_hard_rules

#: Small enough for the suite, large enough that the exact fallback (500) stays out.
REPLICAS = 900


def test_each_family_has_the_shape_it_claims() -> None:
    """Guards the families against quietly generating the default shape."""
    racks = np.bincount(generate(family_shape("unequal-racks", 0, REPLICAS)).broker_rack)
    assert racks.max() >= 2 * racks.min()
    mixed = generate(family_shape("mixed-rf", 0, REPLICAS))
    assert set(np.diff(mixed.part_start).tolist()) == {1, 2, 3}
    aged = generate(family_shape("aged", 0, REPLICAS))
    per_b = np.bincount(aged.rep_broker, weights=aged.rep_size, minlength=aged.n_brokers)
    half = aged.n_brokers // 2
    assert per_b[:half].mean() > 3 * per_b[half:].mean()
    viol = generate(family_shape("violations", 0, REPLICAS))
    two = np.diff(viol.part_start) >= 2
    lo = viol.part_start[:-1][two]
    assert (
        viol.broker_rack[viol.rep_broker[lo]] == viol.broker_rack[viol.rep_broker[lo + 1]]
    ).any()
    new = generate(family_shape("new-brokers", 0, REPLICAS))
    assert (np.bincount(new.rep_broker, minlength=new.n_brokers) == 0).sum() >= 2


@pytest.mark.parametrize("family", FAMILIES)
def test_each_familys_full_plan_keeps_the_hard_rules(family: str) -> None:
    cluster = generate(family_shape(family, 1, REPLICAS))
    request = Request(mode="full")
    result = make_plan(cluster, request, goals=Goals(), detail=False)
    check_hard_rules(cluster, request, result, Goals())
    again = make_plan(cluster, request, goals=Goals(), detail=False)
    assert again.plan == result.plan


@pytest.mark.parametrize("family", FAMILIES)
def test_each_familys_lower_bound_is_at_most_the_bytes_its_plan_moves(family: str) -> None:
    # A bound above a plan that meets the same goals would be no bound (issue 15: the bound
    # must measure the plan, and must stay a true lower bound). Three seeds per family.
    for seed in range(3):
        cluster = generate(family_shape(family, seed, REPLICAS))
        s = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False).summary
        assert s["lowerBounds"]["bytes"] <= s["bytesMoved"]["total"] + 1, (family, seed)


@pytest.mark.parametrize("family", ["uniform", "hot-topics", "new-brokers"])
def test_leader_balance_is_reached_with_zero_bytes_where_reordering_suffices(family: str) -> None:
    # A balanced cluster (a plan's result), then leadership piled onto the lowest broker of
    # each partition: bytes and replica counts are in band, only leaders are not, and each
    # partition's replicas span brokers enough for reordering alone to even them out.
    cluster = generate(family_shape(family, 2, REPLICAS))
    first = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
    balanced = executed(cluster, first.placement, first.leader)
    lead = np.zeros(balanced.n_replicas, bool)
    for p in range(balanced.n_partitions):
        lo, hi = int(balanced.part_start[p]), int(balanced.part_start[p + 1])
        lead[lo + int(np.argmin(balanced.rep_broker[lo:hi]))] = True
    skewed = executed(balanced, (balanced.rep_broker, balanced.rep_dir), lead)
    before = make_plan(skewed, Request(mode="full"), goals=Goals(leader_reorder=False))
    assert not before.summary["before"]["leaders"]["met"]

    result = make_plan(skewed, Request(mode="full"), goals=Goals(), detail=False)
    s = result.summary
    assert s["after"]["leaders"]["met"]
    assert s["bytesMoved"]["total"] == 0
    assert s["preferredLeaderChanges"] > 0
    # The plan is a list of new preferred leaders: same brokers, no directory named; the
    # preferred election names exactly those partitions.
    for entry in result.plan["partitions"]:
        assert set(entry["log_dirs"]) == {"any"}
    named = [(e["topic"], e["partition"]) for e in result.election["partitions"]]
    assert named == [(e["topic"], e["partition"]) for e in result.plan["partitions"]]
    assert len(named) == s["preferredLeaderChanges"]


@pytest.mark.parametrize("family", FAMILIES)
def test_planning_a_plans_result_again_moves_at_most_one_percent(family: str) -> None:
    # Issue 15's stability target: the cluster a plan produces, planned again, moves at most
    # 1 % of the partitions and 1 % of the bytes the first plan moved.
    cluster = generate(family_shape(family, 3, 1500))
    first = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
    after = executed(cluster, first.placement, first.leader)
    again = make_plan(after, Request(mode="full"), goals=Goals(), detail=False).summary
    assert again["partitionsChanged"] <= 0.01 * cluster.n_partitions
    assert again["bytesMoved"]["total"] <= 0.01 * first.summary["bytesMoved"]["total"]


def test_an_unmet_goal_says_what_the_planner_tried_and_why_it_fell_short() -> None:
    # Seed 7 of "combined" at this size leaves a replica-count band unmet that the hard
    # rules allow (issue 15, open): the summary must say what was tried for it. (When the
    # planner meets it one day, pick another case the sweep still counts. Seed 3, the case
    # before, was out of reach: rack awareness left its two smaller racks more replicas
    # than their bands hold together, see ``achievable._RackLimits.together``.)
    cluster = generate(family_shape("combined", 7, REPLICAS))
    s = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False).summary
    unmet = [u for u in s["unmet"] if u["status"] == "unmet"]
    assert [u["goal"] for u in unmet] == ["replicas"]
    for item in unmet:
        tried = item["tried"]
        assert tried[0].startswith("greedy: ")
        assert any("more greedy pass(es)" in t for t in tried)
        assert any(
            t.startswith(f"exact MIP: not run ({cluster.n_replicas} replicas") for t in tried
        )
        assert any(t.startswith("exact repair (HiGHS MIP) over the brokers out of") for t in tried)
        assert any(o["achievable"] for o in item["offenders"])
    assert s["secondPass"]["ran"]
    assert s["secondPass"]["passes"]
    assert s["secondPass"]["repair"]["tries"]
    assert not s["secondPass"]["repair"]["used"]


@pytest.mark.parametrize(
    ("family", "seed"),
    [("new-brokers", 3), ("violations", 2)],
)
def test_cases_the_greedy_left_unmet_are_met_in_one_plan(family: str, seed: int) -> None:
    # new-brokers seed 3: a rack of RF-3 replicas held its brokers at the very floor of the
    # cluster's byte band, so no count move between them kept bytes in band (replicas were
    # left unmet); its band is now read around the rack's own mean (rack.rack_share).
    # violations seed 2: the rack repair took its replica from an Offline-dir broker at its
    # byte floor, which no move can refill (broker bytes left unmet); it now takes the other
    # replica on that rack (byte_phases.fix_racks).
    cluster = generate(family_shape(family, seed, REPLICAS))
    s = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False).summary
    assert [u["goal"] for u in s["unmet"] if u["status"] == "unmet"] == []
    assert all(v["status"] != "unmet" for v in s["goalStatus"].values())
    assert not s["secondPass"]["ran"]


def test_a_count_band_no_single_move_reaches_is_met_in_one_deterministic_plan() -> None:
    # combined seed 29 at this size: five greedy passes leave one broker above the replica
    # band (each single move and two-broker exchange breaks another band); the MIP over that
    # broker's neighbourhood of the greedy's placement meets it, every other band kept.
    cluster = generate(family_shape("combined", 29, REPLICAS))
    request = Request(mode="full")
    result = make_plan(cluster, request, goals=Goals(), detail=False)
    s = result.summary
    assert all(v["status"] != "unmet" for v in s["goalStatus"].values())
    assert s["secondPass"]["repair"]["used"]
    assert s["secondPass"]["repair"]["tries"][0]["status"] == "optimal"
    check_hard_rules(cluster, request, result, Goals())
    # Deterministic: the solver's node limit, not the clock, ends the search.
    twin = make_plan(cluster, request, goals=Goals(), detail=False)
    assert twin.plan == result.plan
    after = executed(cluster, result.placement, result.leader)
    again = make_plan(after, request, goals=Goals(), detail=False).summary
    assert again["partitionsChanged"] <= 0.01 * cluster.n_partitions


def test_a_middle_racks_brokers_reach_the_count_band_between_racks_held_above_and_below() -> None:
    # combined seed 42 at 8000 replicas: racks of 4, 8 and 12 brokers; rack awareness holds
    # the small rack above the replica band and the large one below it, and the middle
    # rack can be in band only if it passes replicas on. The old planner left three of its
    # brokers out of band (437, 414 and 370 replicas, band 285-349), "unmet" after five
    # greedy passes: brokers at their byte floor could give none of their many small
    # replicas (the refill looked for donors only among the fullest brokers, all on the
    # small rack, whose replicas cannot join the middle one), the held small rack gave
    # first and took up the middle rack's room, and no exchange would hand a replica to a
    # held broker (its growth cancelled the offender's fall). Now: refills from rack-mates
    # (``chains``), brokers within reach of their band first (``balance_counts``), and
    # exchanges with held brokers.
    cluster = generate(family_shape("combined", 42, 8000))
    result = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
    s = result.summary
    assert all(v["status"] != "unmet" for v in s["goalStatus"].values())
    replicas = s["goalStatus"]["replicas"]
    assert replicas["status"] == "unachievable"
    racks = {
        int(cluster.broker_rack[list(cluster.broker_ids).index(o["broker"])])
        for o in replicas["offenders"]
    }
    assert racks == {0, 2}  # the held racks only
    assert not any(o["achievable"] for o in replicas["offenders"])
    again = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
    assert again.plan == result.plan


def test_a_disk_band_out_of_reach_beside_its_brokers_byte_band_is_unachievable_with_why() -> None:
    # violations seed 2 at 6000 replicas: broker 8 has an Offline dir, so it receives nothing
    # and moves nothing between its disks. Its byte band's floor keeps its Active dirs' mean
    # at 0.467 or more; data-3 holds 0.393 of its capacity, below 0.9 x 0.467 at every mean
    # that band allows (it can only lose bytes), and shedding data-1 (1.38x) into its band
    # would take the broker below that floor. The plan keeps the byte band, so both dirs are
    # out of reach, each with its reason -- not "unmet".
    cluster = generate(family_shape("violations", 2, 6000))
    s = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False).summary
    assert s["goalStatus"]["brokerUtilisation"]["status"] == "met"
    disk = s["goalStatus"]["diskUtilisationOverBrokerMean"]
    assert disk["status"] == "unachievable"
    why = {o["path"]: o["why"] for o in disk["offenders"] if o["broker"] == 8}
    assert set(why) == {"/var/lib/spindle/data-1", "/var/lib/spindle/data-3"}
    assert "below its own byte band" in why["/var/lib/spindle/data-1"]
    assert "the two bands cannot both hold" in why["/var/lib/spindle/data-3"]
    assert "Offline dir" in why["/var/lib/spindle/data-3"]
    assert [u for u in s["unmet"] if u["status"] == "unmet"] == []


def test_a_later_pass_putting_a_replica_where_its_partition_was_is_kept() -> None:
    # combined seed 5 at 2000 replicas: the first greedy pass left the replica band and one
    # broker's byte band unmet; the second pass met both, but put two replicas on brokers
    # their partitions had left in the first pass. Sent back to where the first pass had
    # put them, one shared a rack with its partition's other replica, so the whole pass
    # was dropped and re-planning the result moved 30 % of the partitions. Now the two
    # replicas of the partition trade places (``passes._hand_back``): the pass is kept,
    # every achievable goal is met in one plan, and a re-plan moves nothing.
    cluster = generate(family_shape("combined", 5, 2000))
    request = Request(mode="full")
    result = make_plan(cluster, request, goals=Goals(), detail=False)
    s = result.summary
    check_hard_rules(cluster, request, result, Goals())
    assert all(v["status"] != "unmet" for v in s["goalStatus"].values())
    assert s["secondPass"]["used"]
    assert all("hard rule" not in p.get("why", "") for p in s["secondPass"]["passes"])
    after = executed(cluster, result.placement, result.leader)
    again = make_plan(after, request, goals=Goals(), detail=False).summary
    assert again["partitionsChanged"] == 0


@pytest.mark.parametrize("seed", [1, 2])
def test_a_rack_repair_leaves_a_broker_that_cannot_receive_its_room_to_even_its_disks(
    seed: int,
) -> None:
    # violations at 8000 replicas: broker 3 (seed 1; an Offline dir, so it can only lose
    # replicas) gave 14.6 GB from data-2, a dir below the disk band, to repair two rack
    # violations while the crowded racks had other replicas to move; shedding its data-1
    # then stopped at its byte floor with data-1 at 1.12 of its Active mean (band 1.10),
    # "unmet" (seed 2 likewise). Now the repair takes such a broker's replica only where it
    # must shed those bytes anyway (``byte_phases.fix_racks``): both bands are met.
    cluster = generate(family_shape("violations", seed, 8000))
    request = Request(mode="full")
    result = make_plan(cluster, request, goals=Goals(), detail=False)
    check_hard_rules(cluster, request, result, Goals())
    status = result.summary["goalStatus"]
    assert all(v["status"] != "unmet" for v in status.values())
    assert status["diskUtilisationOverBrokerMean"]["status"] == "met"
