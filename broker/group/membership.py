"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the timers.

Follows Kafka's ``GroupCoordinator``/``ClassicGroup``: a join moves a group to
PreparingRebalance; the join phase ends when every known member has rejoined (and no member id
handed out with MEMBER_ID_REQUIRED is still pending), or at the rebalance timeout, or — for an
empty group's first rebalance — after ``group.initial.rebalance.delay.ms`` (KIP-134). Then the
generation is bumped, a protocol chosen, the leader gets every member's metadata, and the group
waits in CompletingRebalance for the leader's SyncGroup, whose assignment is written to
``__consumer_offsets`` before anyone gets theirs (Stable). Members that stop heartbeating are
removed after their session timeout; members that never send SyncGroup after a rebalance timeout
(Kafka's pending-sync expiry), so no member can wedge a group. Static members (KIP-345,
``group.instance.id``) keep their place across restarts: rejoining replaces the member id
without a rebalance while the group is Stable and their protocols are unchanged.

Waiting requests (JoinGroup, SyncGroup) await futures resolved by the state machine; deadlines
are monotonic seconds from the injected clock and are checked by :meth:`Membership.tick`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field

from spindle.broker.common.clock import Clock
from spindle.broker.common.errors import ErrorCode, KafkaError

from .model import Group, GroupState, Member
from .settings import GroupSettings

log = logging.getLogger(__name__)

UNKNOWN_MEMBER = ""


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool
    """JoinGroup v4+: an unknown dynamic member first gets MEMBER_ID_REQUIRED (KIP-394)."""


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol: str | None = None


@dataclass(slots=True)
class _Waiters:
    joins: dict[str, asyncio.Future[JoinResult]] = field(default_factory=dict)
    syncs: dict[str, asyncio.Future[SyncResult]] = field(default_factory=dict)
    pending_sync: set[str] = field(default_factory=set)
    sync_deadline: float | None = None


class Membership:
    """Groups and their members (see module docstring). Event loop only."""

    def __init__(self, *, settings: GroupSettings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock
        self.groups: dict[str, Group] = {}
        self._waiters: dict[str, _Waiters] = {}

    # --- hooks the coordinator provides -----------------------------------------------------

    def check_coordinator(self, group_id: str) -> None:
        """Raise KafkaError(NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS) if not ours."""

    def store_group(self, group: Group) -> ErrorCode:
        """Persist the group's metadata; the error to answer with if that failed."""
        return ErrorCode.NONE

    # --- helpers ----------------------------------------------------------------------------

    def _now(self) -> float:
        return self.clock.monotonic()

    def _w(self, group: Group) -> _Waiters:
        return self._waiters.setdefault(group.group_id, _Waiters())

    def _touch(self, member: Member) -> None:
        member.session_deadline = self._now() + member.session_timeout_ms / 1000

    def _validate_join(self, req: JoinRequest) -> ErrorCode | None:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        s = self.settings
        if not (
            s.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= s.group_max_session_timeout_ms
        ):
            return ErrorCode.INVALID_SESSION_TIMEOUT
        if not req.protocol_type or not req.protocols:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    # --- JoinGroup --------------------------------------------------------------------------

    async def join_group(self, req: JoinRequest) -> JoinResult:
        try:
            self.check_coordinator(req.group_id)
        except KafkaError as exc:
            return JoinResult(exc.code, req.member_id)
        bad = self._validate_join(req)
        if bad is not None:
            return JoinResult(bad, req.member_id)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id != UNKNOWN_MEMBER:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)
            group = self.groups[req.group_id] = Group(req.group_id)
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
        if not group.supports(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        if req.member_id == UNKNOWN_MEMBER:
            outcome = self._join_unknown(group, req)
        else:
            outcome = self._join_known(group, req)
        if isinstance(outcome, JoinResult):
            return outcome
        self._maybe_complete_join(group)
        return await outcome

    def _join_unknown(
        self, group: Group, req: JoinRequest
    ) -> JoinResult | asyncio.Future[JoinResult]:
        instance = req.group_instance_id
        if instance is not None and instance in group.static_members:
            return self._rejoin_static(group, req)
        if len(group.members) + len(group.pending_members) >= self.settings.group_max_size:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
        member_id = f"{instance or req.client_id}-{uuid.uuid4()}"
        if instance is None and req.require_known_member_id:
            group.pending_members[member_id] = self._now() + req.session_timeout_ms / 1000
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        return self._add_member_and_rebalance(group, req, member_id)

    def _join_known(
        self, group: Group, req: JoinRequest
    ) -> JoinResult | asyncio.Future[JoinResult]:
        member_id = req.member_id
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(group, req, member_id)
        instance = req.group_instance_id
        if instance is not None and group.static_members.get(instance) != member_id:
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id)
        member = group.members.get(member_id)
        if member is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return self._update_member_and_wait(group, member, req)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # The member lost its JoinGroup answer: send the current generation again.
                return self._join_result(group, member)
            return self._update_member_and_rebalance(group, member, req, "metadata changed")
        if group.is_(GroupState.STABLE):
            if member.member_id == group.leader_id or not member.matches(req.protocols):
                return self._update_member_and_rebalance(group, member, req, "leader rejoined")
            return self._join_result(group, member)
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    def _join_result(self, group: Group, member: Member, *, skip: bool = False) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        members = (
            [
                (m.member_id, m.group_instance_id, m.metadata_for(group.protocol))
                for m in group.members.values()
            ]
            if is_leader
            else []
        )
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol,
            group.leader_id or "",
            members,
            skip and is_leader,
        )

    def _rejoin_static(
        self, group: Group, req: JoinRequest
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """KIP-345: a known group.instance.id with a new member id takes the old one's place."""
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        old = group.members.pop(old_id)
        new_id = f"{req.group_instance_id}-{uuid.uuid4()}"
        waiters = self._w(group)
        fenced_join = waiters.joins.pop(old_id, None)
        if fenced_join is not None and not fenced_join.done():
            fenced_join.set_result(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        fenced_sync = waiters.syncs.pop(old_id, None)
        if fenced_sync is not None and not fenced_sync.done():
            fenced_sync.set_result(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        if old_id in waiters.pending_sync:
            waiters.pending_sync.discard(old_id)
            waiters.pending_sync.add(new_id)
        old.member_id = new_id
        old.client_id, old.client_host = req.client_id, req.client_host
        old.session_timeout_ms = req.session_timeout_ms
        old.rebalance_timeout_ms = req.rebalance_timeout_ms
        group.members[new_id] = old
        group.static_members[req.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        self._touch(old)
        if group.is_(GroupState.STABLE):
            if old.matches(req.protocols) and group.protocol in group.candidate_protocols():
                error = self.store_group(group)
                if error is not ErrorCode.NONE:
                    return JoinResult(error, new_id)
                log.info("static member %s of %s rejoined", req.group_instance_id, group.group_id)
                return self._join_result(group, old, skip=True)
            return self._update_member_and_rebalance(group, old, req, "static member changed")
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return self._update_member_and_rebalance(group, old, req, "static member rejoined")
        return self._update_member_and_wait(group, old, req)

    def _add_member_and_rebalance(
        self, group: Group, req: JoinRequest, member_id: str
    ) -> asyncio.Future[JoinResult]:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            list(req.protocols),
            is_new=True,
        )
        if not group.members:
            group.protocol_type = req.protocol_type
        group.members[member_id] = member
        if req.group_instance_id is not None:
            group.static_members[req.group_instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        self._touch(member)
        future = self._await_join(group, member)
        if group.initial_delay_until is not None:
            # KIP-134: another member arrived during the initial delay: wait a while longer.
            cap = group.rebalance_deadline or self._now()
            delay = self.settings.group_initial_rebalance_delay_ms / 1000
            group.initial_delay_until = min(self._now() + delay, cap)
        self._prepare_rebalance(group, f"{member_id} joined")
        return future

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinRequest, reason: str
    ) -> asyncio.Future[JoinResult]:
        future = self._update_member_and_wait(group, member, req)
        self._prepare_rebalance(group, reason)
        return future

    def _update_member_and_wait(
        self, group: Group, member: Member, req: JoinRequest
    ) -> asyncio.Future[JoinResult]:
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        self._touch(member)
        return self._await_join(group, member)

    def _await_join(self, group: Group, member: Member) -> asyncio.Future[JoinResult]:
        waiters = self._w(group)
        old = waiters.joins.pop(member.member_id, None)
        if old is not None and not old.done():
            # A duplicate JoinGroup replaces the first one, which is answered as superseded.
            old.set_result(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        waiters.joins[member.member_id] = future
        member.awaiting_join = True
        return future

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._fail_syncs(group, ErrorCode.REBALANCE_IN_PROGRESS)
        now = self._now()
        group.rebalance_deadline = now + group.max_rebalance_timeout_ms() / 1000
        if group.is_(GroupState.EMPTY) and self.settings.group_initial_rebalance_delay_ms > 0:
            delay = self.settings.group_initial_rebalance_delay_ms / 1000
            group.initial_delay_until = min(now + delay, group.rebalance_deadline)
        waiters = self._w(group)
        waiters.pending_sync.clear()
        waiters.sync_deadline = None
        log.info(
            "group %s: preparing rebalance of generation %d (%s)",
            group.group_id,
            group.generation,
            reason,
        )
        group.transition(GroupState.PREPARING_REBALANCE, self.clock.wall_ms())

    def _fail_syncs(self, group: Group, error: ErrorCode) -> None:
        waiters = self._w(group)
        for future in waiters.syncs.values():
            if not future.done():
                future.set_result(SyncResult(error))
        waiters.syncs.clear()
        for m in group.members.values():
            m.awaiting_sync = False
            m.assignment = b""

    def _maybe_complete_join(self, group: Group) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        now = self._now()
        if group.initial_delay_until is not None:
            if now < group.initial_delay_until:
                return
            group.initial_delay_until = None
        elif not group.all_rejoined() and now < (group.rebalance_deadline or now):
            return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the join phase: drop who did not rejoin, start the next generation."""
        for m in [m for m in group.members.values() if not m.awaiting_join]:
            if m.group_instance_id is None or not any(
                x.awaiting_join for x in group.members.values()
            ):
                self._remove(group, m)
        group.pending_members.clear()
        group.rebalance_deadline = None
        waiters = self._w(group)
        if not group.members:
            group.generation += 1
            group.protocol = group.leader_id = None
            group.transition(GroupState.EMPTY, self.clock.wall_ms())
            self.store_group(group)
            log.info("group %s is empty (generation %d)", group.group_id, group.generation)
            return
        leader = group.members.get(group.leader_id or "")
        if leader is None or not leader.awaiting_join:
            group.leader_id = next(m.member_id for m in group.members.values() if m.awaiting_join)
        group.generation += 1
        group.protocol = group.select_protocol()
        group.transition(GroupState.COMPLETING_REBALANCE, self.clock.wall_ms())
        timeout = group.max_rebalance_timeout_ms() / 1000
        waiters.sync_deadline = self._now() + timeout
        waiters.pending_sync = set(group.members)
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol,
            group.leader_id,
        )
        for m in group.members.values():
            m.awaiting_join = False
            m.is_new = False
            self._touch(m)
            future = waiters.joins.pop(m.member_id, None)
            if future is not None and not future.done():
                future.set_result(self._join_result(group, m))

    def _remove(self, group: Group, member: Member) -> None:
        group.members.pop(member.member_id, None)
        instance = member.group_instance_id
        if instance is not None and group.static_members.get(instance) == member.member_id:
            del group.static_members[instance]
        waiters = self._w(group)
        waiters.pending_sync.discard(member.member_id)
        join = waiters.joins.pop(member.member_id, None)
        if join is not None and not join.done():
            join.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        sync = waiters.syncs.pop(member.member_id, None)
        if sync is not None and not sync.done():
            sync.set_result(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _remove_and_update(self, group: Group, member: Member, reason: str) -> None:
        """Kafka's ``removeMemberAndUpdateGroup``."""
        self._remove(group, member)
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        self._maybe_complete_join(group)

    # --- SyncGroup --------------------------------------------------------------------------

    def _member_error(
        self, group: Group | None, member_id: str, instance: str | None, generation: int
    ) -> ErrorCode | None:
        if group is None or group.is_(GroupState.DEAD):
            return (
                ErrorCode.UNKNOWN_MEMBER_ID
                if group is None
                else ErrorCode.COORDINATOR_NOT_AVAILABLE
            )
        if instance is not None and group.static_members.get(instance) != member_id:
            if instance in group.static_members:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    async def sync_group(
        self,
        group_id: str,
        member_id: str,
        instance: str | None,
        generation: int,
        protocol_type: str | None,
        protocol: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        try:
            self.check_coordinator(group_id)
        except KafkaError as exc:
            return SyncResult(exc.code)
        group = self.groups.get(group_id)
        bad = self._member_error(group, member_id, instance, generation)
        if bad is not None:
            return SyncResult(bad)
        assert group is not None
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol is not None and protocol != group.protocol
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        waiters = self._w(group)
        waiters.pending_sync.discard(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.is_(GroupState.EMPTY):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.STABLE):
            self._touch(member)
            return SyncResult(
                ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol
            )
        # CompletingRebalance
        self._touch(member)
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        old = waiters.syncs.pop(member_id, None)
        if old is not None and not old.done():
            old.set_result(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        waiters.syncs[member_id] = future
        member.awaiting_sync = True
        if member_id == group.leader_id:
            self._complete_sync(group, assignments)
        return await future

    def _complete_sync(self, group: Group, assignments: dict[str, bytes]) -> None:
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        error = self.store_group(group)
        waiters = self._w(group)
        if error is not ErrorCode.NONE:
            log.warning("group %s: storing the assignment failed: %s", group.group_id, error.name)
            self._fail_syncs(group, error)
            self._prepare_rebalance(group, "storing the assignment failed")
            return
        group.transition(GroupState.STABLE, self.clock.wall_ms())
        for m in group.members.values():
            m.awaiting_sync = False
        for member_id, future in waiters.syncs.items():
            m2 = group.members.get(member_id)
            if m2 is not None and not future.done():
                future.set_result(
                    SyncResult(ErrorCode.NONE, m2.assignment, group.protocol_type, group.protocol)
                )
        waiters.syncs.clear()

    # --- Heartbeat, LeaveGroup --------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, instance: str | None, generation: int
    ) -> ErrorCode:
        try:
            self.check_coordinator(group_id)
        except KafkaError as exc:
            return exc.code
        group = self.groups.get(group_id)
        if group is not None and group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        bad = self._member_error(group, member_id, instance, generation)
        if bad is not None:
            return bad
        assert group is not None
        self._touch(group.members[member_id])
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members (member id, group.instance.id); top-level and per-member errors."""
        try:
            self.check_coordinator(group_id)
        except KafkaError as exc:
            return exc.code, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in leaving]
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        out = []
        for member_id, instance in leaving:
            if instance is not None:
                known = group.static_members.get(instance)
                if known is None:
                    out.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id not in (UNKNOWN_MEMBER, known):
                    out.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                self._maybe_complete_join(group)
                out.append(ErrorCode.NONE)
                continue
            member = group.members.get(member_id)
            if member is None:
                out.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            log.info("member %s leaves group %s", member_id, group_id)
            self._remove_and_update(group, member, f"{member_id} left")
            out.append(ErrorCode.NONE)
        return ErrorCode.NONE, out

    # --- timers -----------------------------------------------------------------------------

    def tick_groups(self) -> None:
        """Expire sessions, pending members and pending syncs; end join phases that are due."""
        now = self._now()
        for group in list(self.groups.values()):
            for member_id, deadline in list(group.pending_members.items()):
                if now >= deadline:
                    del group.pending_members[member_id]
            for m in list(group.members.values()):
                if m.awaiting_join or m.awaiting_sync or group.is_(GroupState.EMPTY):
                    continue
                if now >= m.session_deadline:
                    log.info(
                        "member %s of group %s expired (session timeout %d ms)",
                        m.member_id,
                        group.group_id,
                        m.session_timeout_ms,
                    )
                    self._remove_and_update(group, m, f"{m.member_id} expired")
            waiters = self._w(group)
            if (
                group.is_(GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
                and waiters.sync_deadline is not None
                and now >= waiters.sync_deadline
            ):
                late = [group.members[i] for i in waiters.pending_sync if i in group.members]
                waiters.sync_deadline = None
                waiters.pending_sync.clear()
                for m in late:
                    log.info("member %s of %s never synced", m.member_id, group.group_id)
                    self._remove_and_update(group, m, f"{m.member_id} did not sync")
            self._maybe_complete_join(group)

    def drop_group(self, group: Group, error: ErrorCode) -> None:
        """Forget a group (unloaded or deleted): every waiting request gets ``error``."""
        waiters = self._waiters.pop(group.group_id, None)
        if waiters is not None:
            for jf in waiters.joins.values():
                if not jf.done():
                    jf.set_result(JoinResult(error))
            for sf in waiters.syncs.values():
                if not sf.done():
                    sf.set_result(SyncResult(error))
        group.transition(GroupState.DEAD, self.clock.wall_ms())
        self.groups.pop(group.group_id, None)
