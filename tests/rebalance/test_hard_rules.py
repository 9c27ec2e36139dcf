"""Property: on many generated clusters, in every mode, a plan either keeps every hard rule or
is refused with a reason. The checks here are written independently of the planner's own
final check (``report.hard_violations``) so that a shared mistake cannot hide."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spindle.rebalance.generator import Shape, generate
from spindle.rebalance.input.model import (
    ACTIVE,
    DRAINING,
    OFFLINE,
    Cluster,
    Goals,
    PlanError,
    max_per_rack,
)
from spindle.rebalance.input.scope import Request
from spindle.rebalance.pipeline import PlanResult, make_plan

MODES = ("full", "intra-broker", "remove-brokers", "add-brokers", "fix-offline", "remove-volumes")


def _racks_ok(cluster: Cluster, brokers: np.ndarray, p: int, n_racks: int) -> bool:
    lo, hi = int(cluster.part_start[p]), int(cluster.part_start[p + 1])
    racks = cluster.broker_rack[brokers[lo:hi]]
    return int(np.bincount(racks).max()) <= max_per_rack(hi - lo, n_racks)


def _moves_onto_held_brokers(cluster: Cluster, cur_b: np.ndarray) -> list[tuple[int, int]]:
    """(partition, broker) for every replica that changed broker onto a broker that held its
    partition in the snapshot: Kafka names replicas by broker, so it would execute such a plan
    as a reorder plus fewer copies than the planner counted."""
    bad = []
    for r in np.flatnonzero(cur_b != cluster.rep_broker).tolist():
        p = int(cluster.rep_part[r])
        before = cluster.rep_broker[cluster.part_start[p] : cluster.part_start[p + 1]]
        if int(cur_b[r]) in before.tolist():
            bad.append((p, int(cur_b[r])))
    return bad


def check_hard_rules(cluster: Cluster, request: Request, result: PlanResult, goals: Goals) -> None:
    cur_b, cur_d = result.placement
    moved = (cur_b != cluster.rep_broker) | (cur_d != cluster.rep_dir)
    # Each replica moved at most once: the core's move count equals the replicas changed.
    assert result.core_moves == int(moved.sum())
    assert result.summary["moves"]["total"] == int(moved.sum())
    # Directory belongs to the broker; moved replicas land on Active directories only.
    assert (cluster.dir_broker[cur_d] == cur_b).all()
    assert (cluster.dir_state[cur_d[moved]] == ACTIVE).all()
    # One replica per broker per partition.
    key = cluster.rep_part.astype(np.int64) * cluster.n_brokers + cur_b
    assert len(np.unique(key)) == cluster.n_replicas
    # No replica moves onto a broker that held its partition in the snapshot.
    assert not _moves_onto_held_brokers(cluster, cur_b)
    # Rack awareness where racks allow: nothing the plan touches gets worse than allowed.
    removed = (
        {cluster.broker_index(b) for b in request.brokers}
        if request.mode == "remove-brokers"
        else set()
    )
    # "Where racks allow": racks of brokers that keep a directory able to hold data.
    drains = request.mode in ("full", "intra-broker", "remove-volumes")
    keeps = (cluster.dir_state != OFFLINE) & ~((cluster.dir_state == DRAINING) & drains)
    live = {int(b) for b in cluster.dir_broker[keeps]} - removed
    n_racks = len({int(cluster.broker_rack[b]) for b in live})
    for p in np.unique(cluster.rep_part[moved]).tolist():
        before_ok = _racks_ok(cluster, cluster.rep_broker, p, n_racks)
        if before_ok or request.mode == "full":
            assert _racks_ok(cluster, cur_b, p, n_racks), f"rack rule broken for partition {p}"
    # No directory that receives replicas ends above the capacity threshold.
    ext = cluster.dir_external()
    load = np.bincount(cur_d, weights=cluster.rep_size, minlength=cluster.n_dirs) + ext
    received = np.unique(cur_d[moved])
    limit = goals.capacity_threshold * cluster.dir_total
    assert (load[received] <= limit[received] + 1).all()
    # Nothing placed on Offline, Cordoned or Draining directories (checked above: Active only),
    # and Offline directories never receive.
    assert not (cluster.dir_state[cur_d[moved]] == OFFLINE).any()
    # Replica order kept but for a new preferred leader: the plan lists each changed
    # partition with its replicas in the original positions, except that a replica made
    # leader (zero-byte leader balance) comes first; unchanged positions keep their broker.
    ids = cluster.broker_ids
    leader = result.leader
    relead = leader != cluster.rep_leader
    for entry in result.plan["partitions"]:
        matches = [
            p
            for p in range(cluster.n_partitions)
            if cluster.part_topic[p] == entry["topic"]
            and int(cluster.part_num[p]) == entry["partition"]
        ]
        (p,) = matches
        lo, hi = int(cluster.part_start[p]), int(cluster.part_start[p + 1])
        assert len(entry["replicas"]) == hi - lo == len(entry["log_dirs"])
        order = list(range(lo, hi))
        # The new leader first, and so is a leading replica moving to another broker (Kafka
        # elects the first live replica of the new list when the old leader leaves).
        moves_lead = leader[lo:hi] & (cur_b[lo:hi] != cluster.rep_broker[lo:hi])
        if relead[lo:hi].any() or moves_lead.any():
            first = lo + int(np.flatnonzero(leader[lo:hi])[0])
            order = [first] + [r for r in order if r != first]
        for i, r in enumerate(order):
            assert entry["replicas"][i] == int(ids[cur_b[r]])
            if not moved[r]:
                assert entry["log_dirs"][i] == "any"
    # At most one leader per partition (a reorder hands leadership over, never duplicates it).
    assert (np.bincount(cluster.rep_part[leader], minlength=cluster.n_partitions) <= 1).all()
    changed = np.unique(cluster.rep_part[moved | relead])
    assert len(result.plan["partitions"]) == len(changed)
    # Mode promises.
    state = cluster.dir_state
    if request.mode == "intra-broker":
        assert (cur_b == cluster.rep_broker).all()
    if request.mode == "fix-offline":
        assert (state[cluster.rep_dir[moved]] == OFFLINE).all()
        # A replica staying on its broker (re-homed live) is in a live dir of that broker.
        stays = moved & (cur_b == cluster.rep_broker)
        assert (state[cur_d[stays]] == ACTIVE).all()
    if request.mode in ("full", "fix-offline") and not result.summary["capped"]:
        assert not (state[cur_d] == OFFLINE).any()
    if request.mode in ("full", "intra-broker", "remove-volumes") and not result.summary["capped"]:
        assert not (state[cur_d] == DRAINING).any()
    if request.mode == "remove-brokers":
        assert all(cluster.rep_broker[r] in removed for r in np.flatnonzero(moved))
        if not result.summary["capped"]:
            assert not np.isin(cur_b, list(removed)).any()


shapes = st.builds(
    Shape,
    brokers=st.integers(3, 9),
    disks=st.integers(1, 4),
    replicas=st.integers(10, 240),
    replication=st.integers(1, 3),
    racks=st.integers(1, 4),
    new_brokers=st.integers(0, 2),
    offline_dirs=st.integers(0, 2),
    draining_dirs=st.integers(0, 2),
    disk_sizes=st.sampled_from([(1.0,), (1.0, 1.5, 2.0), (1.0, 4.0)]),
    target_utilisation=st.sampled_from([0.3, 0.5, 0.65]),
    seed=st.integers(0, 10_000),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes, mode=st.sampled_from(MODES), cap=st.sampled_from([None, None, 3]))
def test_every_plan_keeps_the_hard_rules_or_is_refused_with_a_reason(
    shape: Shape, mode: str, cap: int | None
) -> None:
    cluster = generate(shape)
    brokers: tuple[int, ...] = ()
    if mode in ("remove-brokers", "add-brokers"):
        brokers = (int(cluster.broker_ids[-1]),)
    if mode == "remove-volumes" and not (cluster.dir_state == DRAINING).any():
        mode = "full"
    request = Request(mode=mode, brokers=brokers, max_moves=cap)
    goals = Goals()
    refused = ""
    try:
        result = make_plan(cluster, request, goals=goals, detail=False)
    except PlanError as exc:
        refused = str(exc)
    if refused:
        # A refusal names the replica or directory and the rule that stops it.
        assert refused.startswith(f"plan refused ({mode}): ")
        assert (
            "no directory can take it" in refused
            or "above the capacity" in refused
            or ("share rack" in refused)
        )
        return
    check_hard_rules(cluster, request, result, goals)
    if cap is not None:
        assert result.summary["moves"]["total"] <= cap
    if not result.summary["unmet"]:
        # A plan meeting every goal of its mode can never beat the lower bound.
        moved = result.summary["bytesMoved"]["total"]
        assert moved >= result.summary["lowerBounds"]["bytes"] - 1


def test_a_roomy_cluster_always_gets_a_plan_in_every_mode() -> None:
    """Guard against the property above passing by refusing everything."""
    for seed in range(4):
        shape = Shape(
            brokers=8,
            disks=3,
            replicas=240,
            racks=2,
            offline_dirs=1,
            draining_dirs=1,
            new_brokers=1,
            target_utilisation=0.35,
            seed=seed,
        )
        cluster = generate(shape)
        for mode in MODES:
            brokers = (int(cluster.broker_ids[0]),) if mode == "remove-brokers" else ()
            request = Request(mode=mode, brokers=brokers)
            result = make_plan(cluster, request, goals=Goals(), detail=False)
            check_hard_rules(cluster, request, result, Goals())


def test_full_mode_swaps_two_replicas_when_nothing_can_simply_leave_an_over_full_dir() -> None:
    # A small packed cluster (found by comparing refusals with a HiGHS feasibility model):
    # a dir above the capacity threshold whose replicas fit nowhere as they are, but do
    # once a smaller replica from the receiving dir comes back in exchange.
    shape = Shape(
        brokers=7,
        disks=2,
        replicas=84,
        replication=2,
        racks=2,
        new_brokers=2,
        draining_dirs=2,
        disk_sizes=(1.0, 1.5, 2.0),
        target_utilisation=0.65,
        seed=2961,
    )
    cluster = generate(shape)
    request = Request(mode="full")
    result = make_plan(cluster, request, goals=Goals(), detail=False)
    check_hard_rules(cluster, request, result, Goals())
    assert result.summary["after"]["dirsOverCapacityThreshold"] == 0


def _crowded(seed: int) -> Shape:
    """Few brokers, replication 3, new brokers, lost dirs: partitions often move two of their
    replicas, the case where a later move could land where an earlier one left."""
    return Shape(
        brokers=4 + seed % 4,
        disks=2,
        replicas=120 + 20 * (seed % 5),
        replication=3,
        racks=1 + seed % 3,
        new_brokers=1 + seed % 2,
        offline_dirs=seed % 2,
        draining_dirs=(seed // 2) % 2,
        target_utilisation=0.5,
        seed=seed,
    )


def test_no_replica_moves_onto_a_broker_that_held_its_partition() -> None:
    # The greedy and its exchanges (exact fallback off: it keeps the rule in its model, and
    # the property above covers plans it makes); before the rule, 9 of these 40 plans broke it.
    twice = 0
    for seed in range(40):
        cluster = generate(_crowded(seed))
        mode = ("full", "add-brokers", "fix-offline")[seed % 3]
        brokers = (int(cluster.broker_ids[-1]),) if mode == "add-brokers" else ()
        try:
            result = make_plan(
                cluster, Request(mode=mode, brokers=brokers), goals=Goals(), exact_limit=0
            )
        except PlanError:
            continue
        cur_b = result.placement[0]
        assert not _moves_onto_held_brokers(cluster, cur_b), f"seed {seed} ({mode})"
        # Kafka's view: per changed partition, each broker new to the replica list is a new
        # copy (a new preferred leader only reorders the list), as many as slots moved.
        ids = cluster.broker_ids.tolist()
        index = {
            (cluster.part_topic[p], int(cluster.part_num[p])): p
            for p in range(cluster.n_partitions)
        }
        for entry in result.plan["partitions"]:
            p = index[entry["topic"], entry["partition"]]
            lo, hi = int(cluster.part_start[p]), int(cluster.part_start[p + 1])
            before = [ids[b] for b in cluster.rep_broker[lo:hi]]
            slots = int((cur_b[lo:hi] != cluster.rep_broker[lo:hi]).sum())
            assert len(set(entry["replicas"]) - set(before)) == slots
            twice += slots >= 2
    assert twice >= 10  # the case the rule is about did come up
