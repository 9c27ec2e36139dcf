"""A classic consumer group in memory: its state, generation, members and committed offsets.

Pure data and the small rules that only look at one group (protocol selection, who has
rejoined); no I/O, no timers here. The state machine's transitions (Kafka's ``ClassicGroup``)::

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                 ▲   │ (no member left)                                  │ leader's sync
      │                 │   ▼                                                   ▼
      └──── last member leaves / expires ◀──────────── Stable ◀─────────────────┘
    any ──delete / unload──▶ Dead
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .subscription import subscription_topics


class GroupState(enum.Enum):
    """Kafka's names, as DescribeGroups and ListGroups show them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass(eq=False, slots=True)
class Member:
    """One member. ``protocols`` is the ordered (name, metadata) list of its last JoinGroup."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    session_deadline: float = 0.0
    """Monotonic seconds after which the member is expired unless it heartbeats."""
    awaiting_join: bool = False
    awaiting_sync: bool = False
    is_new: bool = False

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(eq=False)
class Group:
    """One group. Owned by the coordinator; mutated only on the event loop."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    """group.instance.id → member id (KIP-345)."""
    pending_members: dict[str, float] = field(default_factory=dict)
    """Member ids handed out with MEMBER_ID_REQUIRED → deadline to rejoin (KIP-394)."""
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    state_timestamp: int = -1
    rebalance_deadline: float | None = None
    """When the current join phase ends whether or not every member has rejoined."""
    initial_delay_until: float | None = None
    """KIP-134: an empty group's first rebalance waits this long for more members."""

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Could a member with these protocols join (Kafka's ``supportsProtocols``)?"""
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its first candidate protocol; most votes wins (ties: the
        order of the first member's list, as Kafka breaks them deterministically)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        order: list[str] = []
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    if name not in order:
                        order.append(name)
                    break
        return max(order, key=lambda n: (votes[n], -order.index(n)))

    def all_rejoined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None if unknown."""
        if self.protocol_type != "consumer" or self.protocol is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            found = subscription_topics(m.metadata_for(self.protocol))
            if found is None:
                return None
            topics |= found
        return topics
