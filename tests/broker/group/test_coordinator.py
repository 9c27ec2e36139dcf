"""The classic group state machine on fake time: joins, syncs, heartbeats, expiry, static
members, leaving, offsets and their reload from ``__consumer_offsets`` records."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from spindle.broker.common.errors import ErrorCode
from spindle.broker.group.coordinator import (
    CommitEntry,
    GroupCoordinator,
    java_string_hash,
    partition_for,
)
from spindle.broker.group.membership import JoinRequest, JoinResult
from spindle.broker.group.model import GroupState
from spindle.broker.group.records import GroupRecord, decode

from .conftest import FakeClock, MemoryLog, make_coordinator

SESSION_MS = 3000
REBALANCE_MS = 5000


def join_req(
    member_id: str = "",
    *,
    group: str = "g",
    instance: str | None = None,
    protocols: list[tuple[str, bytes]] | None = None,
    require_known: bool = False,
    **kw: Any,
) -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=kw.get("protocol_type", "consumer"),
        protocols=protocols or [("range", b"sub")],
        session_timeout_ms=kw.get("session_timeout_ms", SESSION_MS),
        rebalance_timeout_ms=kw.get("rebalance_timeout_ms", REBALANCE_MS),
        client_id="client",
        client_host="/127.0.0.1",
        require_known_member_id=require_known,
    )


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def stable_group_of_two(coord: GroupCoordinator) -> tuple[JoinResult, JoinResult]:
    """Two members join together, the leader assigns, both sync: generation 1, Stable."""
    first = await coord.join_group(join_req())
    assert first.error is ErrorCode.NONE
    assert first.generation == 1
    sync1 = asyncio.create_task(
        coord.sync_group("g", first.member_id, None, 1, None, None, {first.member_id: b"a"})
    )
    await settle()
    assert (await sync1).assignment == b"a"
    # The second member's join starts a rebalance; the first rejoins (its heartbeat says so).
    second = asyncio.create_task(coord.join_group(join_req()))
    await settle()
    assert coord.heartbeat("g", first.member_id, None, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    again = await coord.join_group(join_req(first.member_id))
    other = await second
    assert again.generation == other.generation == 2
    leader, follower = (again, other) if again.members else (other, again)
    assert {m[0] for m in leader.members} == {again.member_id, other.member_id}
    assert follower.members == []
    f_sync = asyncio.create_task(coord.sync_group("g", follower.member_id, None, 2, None, None, {}))
    await settle()
    assignments = {leader.member_id: b"L", follower.member_id: b"F"}
    l_sync = await coord.sync_group("g", leader.member_id, None, 2, None, None, assignments)
    assert l_sync.assignment == b"L"
    assert (await f_sync).assignment == b"F"
    assert coord.groups["g"].state is GroupState.STABLE
    return leader, follower


def test_group_partition_is_javas_string_hash_modulo_partitions() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert partition_for("polygenelubricants", 50) == 0  # Kafka's Utils.abs(MIN_VALUE) = 0
    assert partition_for("hello", 50) == 99162322 % 50


async def test_two_members_rebalance_to_a_stable_generation(coord: GroupCoordinator) -> None:
    leader, follower = await stable_group_of_two(coord)
    assert coord.heartbeat("g", follower.member_id, None, 2) is ErrorCode.NONE
    assert coord.groups["g"].leader_id == leader.member_id


async def test_new_dynamic_member_must_first_get_a_member_id(coord: GroupCoordinator) -> None:
    first = await coord.join_group(join_req(require_known=True))
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id
    joined = await coord.join_group(join_req(first.member_id, require_known=True))
    assert joined.error is ErrorCode.NONE
    assert joined.member_id == first.member_id


async def test_wrong_generation_and_unknown_member_get_kafkas_errors(
    coord: GroupCoordinator,
) -> None:
    leader, _ = await stable_group_of_two(coord)
    assert coord.heartbeat("g", leader.member_id, None, 1) is ErrorCode.ILLEGAL_GENERATION
    assert coord.heartbeat("g", "nobody", None, 2) is ErrorCode.UNKNOWN_MEMBER_ID
    assert coord.heartbeat("nogroup", "nobody", None, 2) is ErrorCode.UNKNOWN_MEMBER_ID
    sync = await coord.sync_group("g", leader.member_id, None, 7, None, None, {})
    assert sync.error is ErrorCode.ILLEGAL_GENERATION
    bad = coord.commit_offsets("g", leader.member_id, None, 1, [CommitEntry("t", 0, 5, -1, "")])
    assert bad == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert (await coord.join_group(join_req("stranger"))).error is ErrorCode.UNKNOWN_MEMBER_ID
    too_short = await coord.join_group(join_req(session_timeout_ms=10))
    assert too_short.error is ErrorCode.INVALID_SESSION_TIMEOUT
    other_type = await coord.join_group(join_req(protocol_type="connect"))
    assert other_type.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert (await coord.join_group(join_req(group=""))).error is ErrorCode.INVALID_GROUP_ID


async def test_silent_member_is_expired_after_its_session_timeout(
    coord: GroupCoordinator, clock: FakeClock
) -> None:
    leader, follower = await stable_group_of_two(coord)
    clock.advance(SESSION_MS / 1000 - 0.5)
    assert coord.heartbeat("g", leader.member_id, None, 2) is ErrorCode.NONE
    clock.advance(1.0)
    coord.tick()
    group = coord.groups["g"]
    assert follower.member_id not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    rejoined = await coord.join_group(join_req(leader.member_id))
    assert rejoined.generation == 3
    assert [m[0] for m in rejoined.members] == [leader.member_id]


async def test_clean_leave_rebalances_the_rest(coord: GroupCoordinator) -> None:
    leader, follower = await stable_group_of_two(coord)
    top, per_member = coord.leave_group("g", [(follower.member_id, None), ("ghost", None)])
    assert top is ErrorCode.NONE
    assert per_member == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert coord.groups["g"].state is GroupState.PREPARING_REBALANCE
    coord.leave_group("g", [(leader.member_id, None)])
    assert coord.groups["g"].state is GroupState.EMPTY


async def test_static_member_rejoining_gets_its_assignment_without_a_rebalance(
    coord: GroupCoordinator,
) -> None:
    a = await coord.join_group(join_req(instance="a"))
    b_task = asyncio.create_task(coord.join_group(join_req(instance="b")))
    await settle()
    a = await coord.join_group(join_req(a.member_id, instance="a"))
    b = await b_task
    leader, follower = (a, b) if a.members else (b, a)
    f_sync = asyncio.create_task(coord.sync_group("g", follower.member_id, None, 2, None, None, {}))
    await settle()
    plan = {leader.member_id: b"L", follower.member_id: b"F"}
    await coord.sync_group("g", leader.member_id, None, 2, None, None, plan)
    await f_sync
    old_b = b.member_id
    # b restarts: a new JoinGroup with no member id but the same group.instance.id.
    back = await coord.join_group(join_req(instance="b"))
    assert back.error is ErrorCode.NONE
    assert back.generation == 2
    assert back.member_id != old_b
    group = coord.groups["g"]
    assert group.state is GroupState.STABLE
    sync = await coord.sync_group("g", back.member_id, "b", 2, None, None, {})
    assert sync.assignment == plan[old_b]
    assert coord.heartbeat("g", old_b, "b", 2) is ErrorCode.FENCED_INSTANCE_ID
    _top, errs = coord.leave_group("g", [(old_b, "b")])
    assert errs == [ErrorCode.FENCED_INSTANCE_ID]


async def test_leader_that_never_syncs_does_not_wedge_the_group(
    coord: GroupCoordinator, clock: FakeClock
) -> None:
    first = await coord.join_group(join_req())
    assert coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
    clock.advance(REBALANCE_MS / 1000 + 0.1)
    coord.tick()
    assert first.member_id not in coord.groups["g"].members
    assert coord.groups["g"].state is GroupState.EMPTY
    again = await coord.join_group(join_req())
    assert again.error is ErrorCode.NONE


async def test_initial_rebalance_delay_waits_for_more_members(
    store: MemoryLog, clock: FakeClock
) -> None:
    coord = make_coordinator(store, clock, **{"group.initial.rebalance.delay.ms": 3000})
    await coord.load(partition_for("g", 4))
    first = asyncio.create_task(coord.join_group(join_req()))
    await settle()
    clock.advance(2.0)
    coord.tick()
    second = asyncio.create_task(coord.join_group(join_req()))
    await settle()
    assert not first.done()
    clock.advance(2.0)  # within the extended delay
    coord.tick()
    await settle()
    assert not first.done()
    clock.advance(1.5)
    coord.tick()
    a, b = await first, await second
    assert a.generation == b.generation == 1
    assert len(a.members or b.members) == 2


async def test_commits_and_group_survive_a_reload_from_the_log(
    coord: GroupCoordinator, store: MemoryLog, clock: FakeClock
) -> None:
    leader, follower = await stable_group_of_two(coord)
    errors = coord.commit_offsets(
        "g",
        leader.member_id,
        None,
        2,
        [CommitEntry("t", 0, 42, 3, "meta"), CommitEntry("t", 1, 7, -1, None)],
    )
    assert set(errors.values()) == {ErrorCode.NONE}
    simple = coord.commit_offsets("admin-only", "", None, -1, [CommitEntry("t", 0, 9, -1, "")])
    assert simple == {("t", 0): ErrorCode.NONE}
    fresh = make_coordinator(store, clock)
    for p in range(4):
        await fresh.load(p)
    err, offsets = fresh.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)])
    assert err is ErrorCode.NONE
    assert offsets[("t", 0)] is not None
    assert offsets[("t", 0)].offset == 42
    assert offsets[("t", 0)].metadata == "meta"
    assert offsets[("t", 0)].leader_epoch == 3
    assert offsets[("t", 1)] is not None
    assert offsets[("t", 1)].offset == 7
    assert offsets[("t", 2)] is None
    group = fresh.groups["g"]
    assert group.state is GroupState.STABLE
    assert group.generation == 2
    assert group.members[follower.member_id].assignment == b"F"
    assert fresh.groups["admin-only"].state is GroupState.EMPTY
    assert fresh.fetch_offsets("admin-only", None)[1][("t", 0)] is not None


async def test_group_metadata_record_is_written_after_the_leaders_sync(
    coord: GroupCoordinator, store: MemoryLog
) -> None:
    await stable_group_of_two(coord)
    records = [decode(k, v) for k, v in store.partitions[partition_for("g", 4)] if k]
    metas = [r for r in records if isinstance(r, GroupRecord)]
    assert metas[-1].generation == 2
    assert len(metas[-1].members) == 2
    assert {m.assignment for m in metas[-1].members} == {b"L", b"F"}


async def test_unowned_and_loading_groups_answer_not_coordinator_and_load_in_progress(
    store: MemoryLog, clock: FakeClock
) -> None:
    coord = make_coordinator(store, clock)
    assert (await coord.join_group(join_req())).error is ErrorCode.NOT_COORDINATOR
    coord.partitions[partition_for("g", 4)] = "loading"
    assert coord.heartbeat("g", "m", None, 1) is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    await coord.load(partition_for("g", 4))
    assert (await coord.join_group(join_req())).error is ErrorCode.NONE
    coord.unload(partition_for("g", 4))
    assert "g" not in coord.groups
    assert coord.fetch_offsets("g", None)[0] is ErrorCode.NOT_COORDINATOR


async def test_failed_write_answers_coordinator_not_available_and_changes_nothing(
    coord: GroupCoordinator, store: MemoryLog
) -> None:
    store.fail_with = ErrorCode.KAFKA_STORAGE_ERROR
    out = coord.commit_offsets("g", "", None, -1, [CommitEntry("t", 0, 1, -1, "")])
    assert out == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)] is None
    store.fail_with = ErrorCode.MESSAGE_TOO_LARGE
    out = coord.commit_offsets("g", "", None, -1, [CommitEntry("t", 0, 1, -1, "")])
    assert out == {("t", 0): ErrorCode.INVALID_COMMIT_OFFSET_SIZE}


async def test_oversized_offset_metadata_is_refused_per_partition(coord: GroupCoordinator) -> None:
    out = coord.commit_offsets(
        "g", "", None, -1, [CommitEntry("t", 0, 1, -1, "x" * 5000), CommitEntry("t", 1, 1, -1, "")]
    )
    assert out == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("t", 1): ErrorCode.NONE}


async def test_delete_groups_only_deletes_empty_groups(
    coord: GroupCoordinator, store: MemoryLog, clock: FakeClock
) -> None:
    _leader, _ = await stable_group_of_two(coord)
    coord.commit_offsets("e", "", None, -1, [CommitEntry("t", 0, 1, -1, "")])
    out = coord.delete_groups(["g", "e", "missing"])
    assert out == {
        "g": ErrorCode.NON_EMPTY_GROUP,
        "e": ErrorCode.NONE,
        "missing": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    fresh = make_coordinator(store, clock)
    for p in range(4):
        await fresh.load(p)
    assert "e" not in fresh.groups


async def test_offset_delete_refuses_topics_the_group_consumes(coord: GroupCoordinator) -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    sub = ConsumerProtocolSubscription(version=0, topics=["t"], user_data=None).encode()
    joined = await coord.join_group(join_req(protocols=[("range", sub)]))
    await coord.sync_group("g", joined.member_id, None, 1, None, None, {})
    coord.commit_offsets(
        "g",
        joined.member_id,
        None,
        1,
        [CommitEntry("t", 0, 1, -1, ""), CommitEntry("u", 0, 1, -1, "")],
    )
    top, out = coord.delete_offsets("g", [("t", 0), ("u", 0)])
    assert top is ErrorCode.NONE
    assert out == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): ErrorCode.NONE}
    assert coord.delete_offsets("none", [("t", 0)])[0] is ErrorCode.GROUP_ID_NOT_FOUND


async def test_offsets_of_an_empty_group_expire_after_retention(
    store: MemoryLog, clock: FakeClock
) -> None:
    coord = make_coordinator(store, clock, **{"offsets.retention.ms": 60_000})
    for p in range(4):
        await coord.load(p)
    coord.commit_offsets("e", "", None, -1, [CommitEntry("t", 0, 1, -1, "")])
    clock.advance(30)
    assert coord.expire_offsets() == 0
    clock.advance(31)
    assert coord.expire_offsets() == 1
    assert "e" not in coord.groups


@pytest.mark.parametrize("states", [{"Stable"}, {"empty"}, None])
async def test_list_groups_filters_by_state(
    coord: GroupCoordinator, states: set[str] | None
) -> None:
    await stable_group_of_two(coord)
    coord.commit_offsets("e", "", None, -1, [CommitEntry("t", 0, 1, -1, "")])
    names = [g.group_id for g in coord.list_groups(states)]
    expected = {"stable": ["g"], "empty": ["e"]}
    assert names == (expected[next(iter(states)).lower()] if states else ["e", "g"])


async def test_group_max_size_refuses_one_member_too_many(
    store: MemoryLog, clock: FakeClock
) -> None:
    coord = make_coordinator(store, clock, **{"group.max.size": 1})
    await coord.load(partition_for("g", 4))
    assert (await coord.join_group(join_req())).error is ErrorCode.NONE
    assert (await coord.join_group(join_req())).error is ErrorCode.GROUP_MAX_SIZE_REACHED


async def test_member_id_handed_out_but_never_used_expires(
    coord: GroupCoordinator, clock: FakeClock
) -> None:
    first = await coord.join_group(join_req(require_known=True))
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id in coord.groups["g"].pending_members
    clock.advance(SESSION_MS / 1000 + 0.1)
    coord.tick()
    assert coord.groups["g"].pending_members == {}
    late = await coord.join_group(join_req(first.member_id, require_known=True))
    assert late.error is ErrorCode.UNKNOWN_MEMBER_ID
