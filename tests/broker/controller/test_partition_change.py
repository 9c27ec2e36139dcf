"""The controller's pure decisions on leaders, ISR and reassignments (Kafka's
PartitionChangeBuilder / ReplicationControlManager rules), without etcd or time."""

from __future__ import annotations

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.kafka_uuid import LOST_DIR, UNASSIGNED_DIR
from spindle.broker.controller.model import PartitionState, TopicState
from spindle.broker.controller.partition_change import (
    NO_LEADER,
    acceptable_for,
    cancel_reassignment,
    change_partition,
    elect_preferred,
    elect_unclean,
    ineligible_joiners,
    leader_imbalance,
    on_broker_fenced,
    on_broker_unfenced,
    on_dirs_offline,
    preferred_leader_moves,
    start_reassignment,
)

ALL = {1, 2, 3, 4, 5, 6}


def part(
    p: int, replicas: list[int], leader: int, isr: list[int], dirs: list[str] | None = None
) -> PartitionState:
    return PartitionState(
        partition=p,
        replicas=replicas,
        directories=dirs or [f"d{b}a" for b in replicas],
        leader=leader,
        leader_epoch=5,
        partition_epoch=9,
        isr=isr,
    )


def topic(name: str, *parts: PartitionState, unclean: bool = False) -> TopicState:
    configs = {"unclean.leader.election.enable": "true"} if unclean else {}
    return TopicState(name, f"id-{name}", {p.partition: p for p in parts}, configs)


def test_lost_leader_moves_to_first_in_sync_replica_and_bumps_epochs() -> None:
    t = topic("t", part(0, [1, 2, 3], 1, [1, 2, 3]), part(1, [2, 1, 3], 2, [2, 1, 3]))
    changes = on_broker_fenced([t], 1, active={2, 3}, offline_dirs={})
    p0 = changes["t"][0]
    assert (p0.leader, p0.isr) == (2, [2, 3])
    assert (p0.leader_epoch, p0.partition_epoch) == (6, 10)
    # Where broker 1 only followed, the ISR shrinks; the leader and its epoch stay.
    p1 = changes["t"][1]
    assert (p1.leader, p1.isr, p1.leader_epoch, p1.partition_epoch) == (2, [2, 3], 5, 10)


def test_new_leader_is_never_a_replica_outside_the_isr_by_default() -> None:
    t = topic("t", part(0, [1, 2, 3], 1, [1, 3]))
    p0 = on_broker_fenced([t], 1, active={2, 3}, offline_dirs={})["t"][0]
    assert (p0.leader, p0.isr) == (3, [3])  # 2 is alive and preferred over 3, but out of sync


def test_last_isr_member_lost_leaves_partition_leaderless_but_keeps_it_in_isr() -> None:
    t = topic("t", part(0, [1, 2], 1, [1]))
    p0 = on_broker_fenced([t], 1, active={2}, offline_dirs={})["t"][0]
    assert (p0.leader, p0.isr) == (NO_LEADER, [1])
    # When broker 1 returns, it leads again: a clean election, nothing lost.
    back = topic("t", p0)
    p0b = on_broker_unfenced([back], 1, active={1, 2}, offline_dirs={})["t"][0]
    assert (p0b.leader, p0b.isr) == (1, [1])
    assert p0b.leader_epoch == p0.leader_epoch + 1


def test_unclean_topic_elects_an_out_of_sync_replica_and_resets_the_isr() -> None:
    t = topic("t", part(0, [1, 2], 1, [1]), unclean=True)
    p0 = on_broker_fenced([t], 1, active={2}, offline_dirs={})["t"][0]
    assert (p0.leader, p0.isr) == (2, [2])


def test_dir_failure_moves_only_partitions_in_that_dir() -> None:
    # Broker 1 has dirs d1a and d1b; partition 0 lives in d1a, 1 in d1b, 2 is LOST already.
    t = topic(
        "t",
        part(0, [1, 2], 1, [1, 2], ["d1a", "d2a"]),
        part(1, [1, 2], 1, [1, 2], ["d1b", "d2a"]),
        part(2, [2, 1], 2, [2, 1], ["d2a", LOST_DIR]),
    )
    changes = on_dirs_offline([t], 1, ["d1b"], active={1, 2}, offline_dirs={1: {"d1b"}})
    assert set(changes["t"]) == {1, 2}
    assert (changes["t"][1].leader, changes["t"][1].isr) == (2, [2])
    assert changes["t"][2].isr == [2]
    assert 0 not in changes["t"]


def test_leader_is_never_elected_onto_a_replica_whose_dir_is_offline() -> None:
    # Broker 2 is alive, but its replica of this partition is in its failed dir.
    t = topic("t", part(0, [1, 2, 3], 1, [1, 2, 3], ["d1a", "d2b", "d3a"]))
    p0 = on_broker_fenced([t], 1, active={2, 3}, offline_dirs={2: {"d2b"}})["t"][0]
    assert p0.leader == 3


def test_reassignment_adds_then_completes_once_adding_replicas_are_in_sync() -> None:
    p0 = part(0, [1, 2, 3], 1, [1, 2, 3])
    acceptable = acceptable_for(p0, active=ALL, offline_dirs={})
    started = start_reassignment(p0, [4, 5, 6], acceptable=acceptable)
    assert started is not None
    assert started.replicas == [4, 5, 6, 1, 2, 3]
    assert (started.adding, started.removing) == ([4, 5, 6], [1, 2, 3])
    assert started.leader == 1  # leadership stays until the new replicas are in sync
    assert started.directories[:3] == [UNASSIGNED_DIR] * 3
    assert started.directories[3:] == ["d1a", "d2a", "d3a"]
    # Two of three new replicas in sync: not complete yet.
    partial = change_partition(
        started,
        acceptable=acceptable_for(started, active=ALL, offline_dirs={}),
        isr=[1, 2, 3, 4, 5],
    )
    assert partial is not None
    assert partial.adding == [4, 5, 6]
    done = change_partition(
        partial,
        acceptable=acceptable_for(partial, active=ALL, offline_dirs={}),
        isr=[1, 2, 3, 4, 5, 6],
    )
    assert done is not None
    assert (done.replicas, done.isr, done.adding, done.removing) == ([4, 5, 6], [4, 5, 6], [], [])
    assert done.leader == 4
    assert done.leader_epoch > partial.leader_epoch


def test_reordering_replicas_completes_at_once_without_moving_the_leader() -> None:
    p0 = part(0, [1, 2, 3], 1, [1, 2, 3])
    done = start_reassignment(p0, [3, 2, 1], acceptable=lambda b: True)
    assert done is not None
    assert (done.replicas, done.adding, done.removing, done.leader) == ([3, 2, 1], [], [], 1)


def test_cancel_restores_original_replicas_and_drops_adding_from_isr() -> None:
    p0 = part(0, [1, 2, 3], 1, [1, 2, 3])
    started = start_reassignment(p0, [1, 4, 5], acceptable=lambda b: True)
    assert started is not None
    assert (started.replicas, started.adding, started.removing) == ([1, 4, 5, 2, 3], [4, 5], [2, 3])
    syncing = change_partition(started, acceptable=lambda b: True, isr=[1, 2, 3, 4])
    assert syncing is not None
    reverted = cancel_reassignment(syncing, acceptable=lambda b: True, unclean_allowed=False)
    assert reverted is not None
    assert (reverted.replicas, reverted.isr, reverted.adding, reverted.removing) == (
        [1, 2, 3],
        [1, 2, 3],
        [],
        [],
    )
    assert reverted.directories == ["d1a", "d2a", "d3a"]
    with pytest.raises(KafkaError) as info:
        cancel_reassignment(reverted, acceptable=lambda b: True, unclean_allowed=False)
    assert info.value.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_cancel_needing_an_unclean_election_is_refused_unless_enabled() -> None:
    # Original replicas 1,2 fell out of the ISR; only the adding replica 3 is in sync.
    p0 = PartitionState(0, [3, 1, 2], ["d3a", "d1a", "d2a"], 3, 7, 9, [3], [3], [1, 2])
    with pytest.raises(KafkaError) as info:
        cancel_reassignment(p0, acceptable=lambda b: True, unclean_allowed=False)
    assert info.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    reverted = cancel_reassignment(p0, acceptable=lambda b: True, unclean_allowed=True)
    assert reverted is not None
    assert (reverted.replicas, reverted.leader, reverted.isr) == ([1, 2], 1, [1])


def test_new_target_during_a_reassignment_replaces_it() -> None:
    p0 = part(0, [1, 2, 3], 1, [1, 2, 3])
    first = start_reassignment(p0, [1, 2, 4], acceptable=lambda b: True)
    assert first is not None
    second = start_reassignment(first, [1, 2, 5], acceptable=lambda b: True)
    assert second is not None
    assert (second.replicas, second.adding, second.removing) == ([1, 2, 5, 4, 3], [5], [4, 3])


def test_preferred_election_moves_leadership_back_to_the_first_replica() -> None:
    p0 = part(0, [1, 2, 3], 2, [2, 3, 1])
    moved = elect_preferred(p0, acceptable=lambda b: True)
    assert (moved.leader, moved.leader_epoch) == (1, 6)
    with pytest.raises(KafkaError) as info:
        elect_preferred(moved, acceptable=lambda b: True)
    assert info.value.code == ErrorCode.ELECTION_NOT_NEEDED
    with pytest.raises(KafkaError) as info:
        elect_preferred(part(0, [1, 2], 2, [2]), acceptable=lambda b: True)
    assert info.value.code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_unclean_election_only_for_leaderless_partitions() -> None:
    with pytest.raises(KafkaError) as info:
        elect_unclean(part(0, [1, 2], 1, [1, 2]), acceptable=lambda b: True)
    assert info.value.code == ErrorCode.ELECTION_NOT_NEEDED
    leaderless = part(0, [1, 2], NO_LEADER, [1])
    chosen = elect_unclean(leaderless, acceptable=lambda b: b == 2)
    assert (chosen.leader, chosen.isr) == (2, [2])
    with pytest.raises(KafkaError) as info:
        elect_unclean(leaderless, acceptable=lambda b: False)
    assert info.value.code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_leader_imbalance_is_the_share_of_preferred_partitions_not_led() -> None:
    t = topic(
        "t",
        part(0, [1, 2], 1, [1, 2]),
        part(1, [1, 2], 2, [1, 2]),
        part(2, [2, 1], 2, [1, 2]),
        part(3, [1, 2], 2, [1, 2]),
    )
    assert leader_imbalance([t]) == {1: 2 / 3, 2: 0.0}


def test_auto_rebalance_moves_only_clean_preferred_leaders_of_imbalanced_brokers() -> None:
    t = topic(
        "t",
        part(0, [1, 2], 2, [1, 2]),  # 1 preferred, in sync: moves back
        part(1, [1, 2], 2, [2]),  # 1 preferred but out of sync: stays
        part(2, [2, 1], 2, [1, 2]),  # already on its preferred leader
        part(3, [1, 2], 1, [1, 2]),
    )
    every = lambda _t, _p: lambda b: True  # noqa: E731
    # Broker 1 leads 1 of its 3 preferred partitions: imbalance 2/3.
    assert preferred_leader_moves([t], threshold=0.1, acceptable=every) == [("t", 0)]
    assert preferred_leader_moves([t], threshold=0.7, acceptable=every) == []
    down = lambda _t, _p: lambda b: b != 1  # noqa: E731
    assert preferred_leader_moves([t], threshold=0.1, acceptable=down) == []


def test_replicas_in_a_directory_the_registration_no_longer_lists_are_lost() -> None:
    from spindle.broker.controller.partition_change import lost_dirs, on_dirs_lost

    t = topic(
        "t",
        part(0, [1, 2, 3], 1, [1, 2, 3], dirs=["old1", "d2a", "d3a"]),
        part(1, [2, 1, 3], 2, [2, 1, 3], dirs=["d2a", "keep1", "d3a"]),
        part(2, [3, 1], 3, [3], dirs=["d3a", "old1"]),
        part(3, [1, 2], 1, [1], dirs=["old1", "d2a"]),
    )
    # Broker 1 came back with "old1" replaced by "new1": only replicas placed in "old1" count.
    assert lost_dirs([t], 1, ["keep1", "new1"]) == {"old1"}
    assert lost_dirs([t], 1, []) == set()  # nothing to compare with: nothing lost
    assert lost_dirs([t], 2, ["d2a"]) == set()
    changes = on_dirs_lost([t], 1, {"old1"}, active=ALL, offline_dirs={})["t"]
    assert set(changes) == {0, 2, 3}
    p0 = changes[0]
    assert p0.directories == [LOST_DIR, "d2a", "d3a"]
    assert (p0.leader, p0.isr, p0.leader_epoch) == (2, [2, 3], 6)
    # Out of the ISR already: only the directory changes, leader and epoch stay.
    p2 = changes[2]
    assert (p2.directories, p2.leader, p2.isr, p2.leader_epoch) == (
        [
            "d3a",
            LOST_DIR,
        ],
        3,
        [3],
        5,
    )
    # The last ISR member stays in the ISR (no ELR) but may not lead from a LOST replica.
    p3 = changes[3]
    assert (p3.directories, p3.leader, p3.isr) == ([LOST_DIR, "d2a"], NO_LEADER, [1])
    assert not acceptable_for(p3, active=ALL, offline_dirs={})(1)


def test_a_replica_in_an_offline_or_lost_directory_may_not_join_the_isr() -> None:
    p = part(0, [1, 2, 3], 1, [1, 2], dirs=["d1a", "d2a", "d3a"])
    # Broker 3 is live and unfenced, but its replica's directory has failed.
    assert ineligible_joiners(p, [1, 2, 3], active=ALL, offline_dirs={3: {"d3a"}}) == [3]
    assert ineligible_joiners(p, [1, 2, 3], active=ALL, offline_dirs={3: {"d3b"}}) == []
    lost = part(0, [1, 2, 3], 1, [1, 2], dirs=["d1a", "d2a", LOST_DIR])
    assert ineligible_joiners(lost, [1, 2, 3], active=ALL, offline_dirs={}) == [3]
    assert ineligible_joiners(p, [1, 2, 3], active={1, 2}, offline_dirs={}) == [3]
    # Members already in the ISR are not joining: the leader may keep them while shrinking.
    assert ineligible_joiners(p, [1, 2], active={1}, offline_dirs={2: {"d2a"}}) == []
