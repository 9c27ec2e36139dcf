"""Which local replicas lead and which follow, as the metadata says, and what each role does
(Kafka's ``makeLeaders``/``makeFollowers`` and the leader's ISR upkeep).

* **Leader** (metadata ``leader`` is this broker): a :class:`~.isr.LeaderState` per partition,
  started at each new leader epoch. Follower fetches move the high watermark; caught-up
  followers are added to the ISR and lagging ones removed, through :class:`IsrWriter` (the
  controller's AlterPartition, a compare-on-revision write of the partition's metadata).
* **Leader epochs**: a replica becoming leader starts its epoch at its log end in its
  leader-epoch cache (Kafka's ``makeLeader``), and stamps that epoch on everything it appends.
* **Follower** (another broker leads): the partition is fetched from its leader
  (:mod:`.fetcher`). On becoming a follower -- a new leader epoch, or after a restart -- the
  fetcher first truncates the log where it parts from the new leader's (OffsetsForLeaderEpoch,
  KIP-101/279, :mod:`.leader_epochs`), never keeping records the leader does not have.
* **No leader** (-1): neither; fetching stops until one is elected.

Event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Protocol

from spindle.broker.common.clock import Clock
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.storage import Log, LogManager

from .fetcher import FetcherManager
from .isr import LeaderState
from .metadata import PartitionView

log = logging.getLogger(__name__)


class IsrWriter(Protocol):
    """Kafka's AlterPartition: a leader asks for a new ISR of a partition it leads."""

    async def alter_partition_isr(
        self, tp: TopicPartition, leader_id: int, leader_epoch: int, isr: list[int]
    ) -> None: ...


class PartitionRoles:
    """Leader state and follower fetchers of this broker's replicas (see module docstring)."""

    def __init__(
        self,
        *,
        node_id: int,
        logs: LogManager,
        fetchers: FetcherManager,
        isr_writer: IsrWriter | None,
        clock: Clock,
        lag_max_s: float = 30.0,
    ) -> None:
        self.node_id = node_id
        self.logs = logs
        self.fetchers = fetchers
        self.isr_writer = isr_writer
        self.clock = clock
        self.lag_max_s = lag_max_s
        self.leaders: dict[TopicPartition, LeaderState] = {}
        self._follow_epochs: dict[TopicPartition, int] = {}
        self._pending: set[TopicPartition] = set()

    def apply(self, topics: Mapping[str, Mapping[int, PartitionView]]) -> None:
        """Take the roles the metadata gives (``topics``: name -> partition -> state)."""
        now = self.clock.monotonic()
        led: set[TopicPartition] = set()
        followed: dict[TopicPartition, int] = {}
        for name, parts in topics.items():
            for part in parts.values():
                if self.node_id not in part.replicas:
                    continue
                tp = TopicPartition(name, part.partition)
                replica = self.logs.get_log(tp)
                if replica is None or self.logs.is_partition_offline(tp):
                    continue  # an offline replica neither leads nor follows (KIP-112)
                if part.leader == self.node_id:
                    led.add(tp)
                    self._lead(tp, part, replica, now)
                elif part.leader >= 0:
                    followed[tp] = part.leader
                    self._follow(tp, part)
        for tp in set(self.leaders) - led:
            del self.leaders[tp]
        for tp in set(self._follow_epochs) - set(followed):
            del self._follow_epochs[tp]
        self.fetchers.assign(followed, self._follow_epochs)

    def out_of_step(
        self, topics: Mapping[str, Mapping[int, PartitionView]]
    ) -> list[TopicPartition]:
        """The hosted, online replicas whose role is not the one the metadata gives them: led
        here at an epoch this broker has not taken, or followed at one it does not follow; and
        the roles held that the metadata no longer gives (a leadership gone to no leader, a
        replica no longer assigned here), which would go on asking for ISR changes or fetching.
        Empty whenever every metadata change reached :meth:`apply` (the watch's listener);
        :meth:`.lifecycle.ReplicaLifecycle.report_loop` checks it so that a change that did
        not (a listener that failed, a watch that stalled) costs one report interval, not the
        partition."""
        stale: list[TopicPartition] = []
        led: set[TopicPartition] = set()
        followed: set[TopicPartition] = set()
        for name, parts in topics.items():
            for part in parts.values():
                if self.node_id not in part.replicas or part.leader < 0:
                    continue
                tp = TopicPartition(name, part.partition)
                if self.logs.get_log(tp) is None or self.logs.is_partition_offline(tp):
                    continue
                if part.leader == self.node_id:
                    led.add(tp)
                    state = self.leaders.get(tp)
                    taken = state is not None and state.leader_epoch == part.leader_epoch
                else:
                    followed.add(tp)
                    taken = self._follow_epochs.get(tp) == part.leader_epoch
                if not taken:
                    stale.append(tp)
        kept = (self.leaders.keys() - led) | (self._follow_epochs.keys() - followed)
        return stale + sorted(kept - set(stale))

    def _lead(self, tp: TopicPartition, part: PartitionView, replica: Log, now: float) -> None:
        state = self.leaders.get(tp)
        if state is None or state.leader_epoch != part.leader_epoch:
            # Nothing to rebuild: the idempotent producers' state already follows this
            # replica's log, whatever it appended or replicated (see .producer_state).
            try:
                replica.assign_leader_epoch(part.leader_epoch)
            except KafkaError as exc:  # its directory failed: the controller moves leadership
                log.warning("%s: cannot start leader epoch %d: %s", tp, part.leader_epoch, exc)
            self.leaders[tp] = LeaderState.become_leader(
                node_id=self.node_id,
                replicas=list(part.replicas),
                isr=list(part.isr),
                leader_epoch=part.leader_epoch,
                log_end_offset=replica.log_end_offset,
                high_watermark=replica.high_watermark,
                now=now,
            )
            log.info("%s: leader at epoch %d, isr %s", tp, part.leader_epoch, list(part.isr))
        else:
            state.update_metadata(list(part.replicas), list(part.isr), now)
        self._advance(tp, replica)

    def _follow(self, tp: TopicPartition, part: PartitionView) -> None:
        if self._follow_epochs.get(tp) != part.leader_epoch:
            # A new leader (or the first look after start-up): the fetcher truncates first.
            log.info("%s: following %d at epoch %d", tp, part.leader, part.leader_epoch)
        self._follow_epochs[tp] = part.leader_epoch

    def _advance(self, tp: TopicPartition, replica: Log) -> bool:
        state = self.leaders[tp]
        before = replica.high_watermark
        replica.high_watermark = state.advance_high_watermark(replica.log_end_offset)
        return replica.high_watermark > before

    def after_append(self, tp: TopicPartition, replica: Log) -> None:
        """The leader appended: the high watermark may move (alone in the ISR, to the end)."""
        if tp in self.leaders:
            self._advance(tp, replica)
        else:
            replica.high_watermark = replica.log_end_offset

    def on_follower_fetch(self, tp: TopicPartition, replica_id: int, fetch_offset: int) -> bool:
        """A follower fetched from ``fetch_offset``; True if the high watermark moved."""
        state = self.leaders.get(tp)
        if state is None:
            raise KafkaError(
                f"broker {self.node_id} does not lead {tp}", ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        if replica_id not in state.replicas:
            raise KafkaError(
                f"broker {replica_id} is not a replica of {tp}", ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        replica = self.logs.get_log(tp)
        if replica is None:
            raise KafkaError(f"{tp} is not hosted here", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        state.on_fetch(replica_id, fetch_offset, replica.log_end_offset, self.clock.monotonic())
        moved = self._advance(tp, replica)
        if replica_id in state.to_expand():  # as Kafka: a follower's own fetch lets it in
            self._schedule_isr_check(tp)
        return moved

    def _schedule_isr_check(self, tp: TopicPartition) -> None:
        if tp not in self._pending and self.isr_writer is not None:
            self._pending.add(tp)
            asyncio.get_running_loop().create_task(self._check_one(tp))

    async def check_isr(self) -> None:
        """Shrink lagging followers out of, and expand caught-up ones into, every led ISR."""
        for tp in list(self.leaders):
            await self._check_one(tp)

    async def _check_one(self, tp: TopicPartition) -> None:
        try:
            state = self.leaders.get(tp)
            replica = self.logs.get_log(tp)
            if state is None or replica is None or self.isr_writer is None:
                return
            now = self.clock.monotonic()
            shrink = state.to_shrink(replica.log_end_offset, now, self.lag_max_s)
            expand = state.to_expand()
            if not shrink and not expand:
                return
            isr = [b for b in state.isr if b not in shrink] + expand
            log.info("%s: asking for isr %s (was %s)", tp, isr, state.isr)
            try:
                await self.isr_writer.alter_partition_isr(tp, self.node_id, state.leader_epoch, isr)
            except KafkaError as exc:
                log.warning("%s: isr change to %s refused: %s", tp, isr, exc)
                if exc.code is ErrorCode.INVALID_REPLICA_ASSIGNMENT:
                    # Some joiner may not join (its directory failed; a fetch it sent before
                    # that arrived late and looked caught up). Forget the joiners' positions:
                    # each comes back with its next own fetch, and one that no longer fetches
                    # stops blocking the others (a reassignment's new replica waited forever).
                    for b in expand:
                        if (follower := state.followers.get(b)) is not None:
                            follower.log_end_offset = -1
        finally:
            self._pending.discard(tp)
