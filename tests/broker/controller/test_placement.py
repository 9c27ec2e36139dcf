"""Placement of new replicas: Kafka's striped rack-aware placer, directory choice, and the
KIP-1066 cordoned directories. Pure; randomness seeded."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.controller.placement import (
    UsableBroker,
    check_move_target,
    choose_log_dir,
    place_striped,
    usable_brokers,
)


def brokers(
    racks: dict[str, list[int]], fenced: frozenset[int] = frozenset()
) -> list[UsableBroker]:
    return [UsableBroker(b, r, b in fenced) for r, ids in racks.items() for b in ids]


@pytest.mark.parametrize("seed", range(20))
def test_every_partition_has_one_replica_per_rack(seed: int) -> None:
    cluster = brokers({"a": [1, 2], "b": [3, 4], "c": [5, 6]})
    rack_of = {b.node_id: b.rack for b in cluster}
    placed = place_striped(12, 3, cluster, rng=random.Random(seed))
    for replicas in placed:
        assert len(set(replicas)) == 3
        assert sorted(rack_of[b] for b in replicas) == ["a", "b", "c"]  # type: ignore[type-var]
    # Leaders and replicas spread evenly: 12 partitions x 3 replicas over 6 brokers.
    assert set(Counter(r[0] for r in placed).values()) == {2}
    assert set(Counter(b for r in placed for b in r).values()) == {6}


def test_placement_is_deterministic_for_a_seed_and_striped() -> None:
    cluster = brokers({"a": [1], "b": [2], "c": [3]})
    first = place_striped(3, 3, cluster, rng=random.Random(7))
    assert first == place_striped(3, 3, cluster, rng=random.Random(7))
    # One broker per rack: each partition walks the racks in order, starting one rack later
    # than the partition before (the stripes).
    assert sorted(first[0]) == [1, 2, 3]
    for i, replicas in enumerate(first):
        assert replicas == first[0][i:] + first[0][:i]


def test_fenced_brokers_never_lead_and_are_used_last() -> None:
    cluster = brokers({"a": [1, 2, 3]}, fenced=frozenset({3}))
    placed = place_striped(10, 2, cluster, rng=random.Random(1))
    assert all(r[0] != 3 for r in placed)
    assert all(3 not in r for r in placed)  # two unfenced brokers suffice for RF 2
    placed3 = place_striped(4, 3, cluster, rng=random.Random(1))
    assert all(r[0] != 3 and 3 in r for r in placed3)


def test_small_rack_gets_a_replica_of_every_partition() -> None:
    cluster = brokers({"a": [1, 2, 3], "b": [4]})
    placed = place_striped(8, 2, cluster, rng=random.Random(3))
    assert all(4 in r for r in placed)


@pytest.mark.parametrize(
    ("rf", "cluster", "message"),
    [
        (0, brokers({"a": [1]}), "must be positive"),
        (3, brokers({"a": [1, 2]}), "only 2 broker"),
        (1, brokers({"a": [1, 2]}, fenced=frozenset({1, 2})), "fenced"),
    ],
)
def test_impossible_placements_are_invalid_replication_factor(
    rf: int, cluster: list[UsableBroker], message: str
) -> None:
    with pytest.raises(KafkaError, match=message) as info:
        place_striped(1, rf, cluster, rng=random.Random(0))
    assert info.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_broker_with_every_dir_cordoned_or_offline_gets_no_new_replicas() -> None:
    registered = {1: ("a", ["x", "y"]), 2: ("b", ["z"]), 3: (None, ["w", "v"])}
    usable = usable_brokers(
        registered,
        fenced={3},
        offline_dirs={1: ["x"]},
        cordoned_dirs={1: ["y"], 3: ["w"]},
    )
    assert usable == [UsableBroker(2, "b", False), UsableBroker(3, None, True)]


def test_new_replica_goes_to_least_loaded_online_uncordoned_dir() -> None:
    counts = {"/d1": 1, "/d2": 5, "/d3": 0}
    assert choose_log_dir(counts) == "/d3"
    assert choose_log_dir(counts, cordoned={"/d3"}) == "/d1"
    assert choose_log_dir(counts, cordoned={"/d3"}, offline={"/d1"}) == "/d2"
    with pytest.raises(KafkaError) as info:
        choose_log_dir(counts, cordoned={"/d1", "/d2"}, offline={"/d3"})
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR


def test_moving_a_replica_into_a_cordoned_dir_is_invalid_replica_assignment() -> None:
    check_move_target("/d1", cordoned={"/d2"})
    with pytest.raises(KafkaError) as info:
        check_move_target("/d2", cordoned={"/d2"})
    assert info.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
