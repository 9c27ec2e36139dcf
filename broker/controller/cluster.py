"""The multi-broker controller: the same :class:`~.controller.Controller` operations, plus an
elected controller that reacts to broker and directory loss.

Every broker runs a :class:`ClusterController`. Two kinds of writes reach etcd:

* **Requested changes** (CreateTopics, CreatePartitions, configs, AlterPartitionReassignments,
  AssignReplicasToDirs) are validated and written by whichever broker received the request,
  each as a compare-on-revision transaction on the keys it changes. etcd serialises them, so
  no broker can overwrite a change it has not seen; this is what Kafka achieves by forwarding
  such requests to the active controller (KIP-590), with etcd as the single writer.
* **Controller decisions** -- leadership and ISR changes when a broker's session ends, it is
  fenced, a directory fails, or a broker comes back -- are made only by the elected controller
  (:mod:`.election`). While it holds office its store carries the term's fence, so every write
  also compares the controller key's create revision: a deposed controller's decisions fail
  in etcd and it steps down. A new controller starts by reconciling the whole cluster, so
  losses that happened while no controller was active are handled too.

The decisions themselves are the pure functions of :mod:`.partition_change` and
:mod:`.placement`; this module only feeds them the current view and writes the result.
Leaders change their own ISR (expand/shrink) with ``alter_partition_isr`` (Kafka's
AlterPartition), validated against the leader epoch; a reassignment completes in the ISR write
that brings its last adding replica in sync. ElectLeaders and the auto leader rebalance
(``rebalance_leaders``) run preferred elections. New replicas go only to brokers with a
directory that is online and not cordoned (KIP-1066: brokers report their cordoned directory
ids on their session); inside the broker, its own placement skips cordoned directories too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.peer import PLAINTEXT, PeerSecurity

from .controller import ConfigChange, SingleBrokerController
from .election import ControllerElection, ControllerTerm
from .etcd import EtcdClient, EtcdError
from .liveness import SessionMonitor
from .model import PartitionState, TopicState, plan_partitions
from .partition_change import (
    NO_LEADER,
    TopicChanges,
    acceptable_for,
    cancel_reassignment,
    change_partition,
    elect_preferred,
    elect_unclean,
    ineligible_joiners,
    lost_dirs,
    on_broker_fenced,
    on_broker_unfenced,
    on_dirs_lost,
    on_dirs_offline,
    preferred_leader_moves,
    start_reassignment,
    unclean_enabled,
)
from .placement import place_striped, usable_brokers
from .store import ControllerFenced, MetadataConflict, MetadataDelta, MetadataStore

log = logging.getLogger(__name__)

RECONCILE_ATTEMPTS = 10


class ClusterController(SingleBrokerController):
    """Controller operations for an N-broker cluster, and the elected role (module docstring).

    ``start()`` begins campaigning (the store must be loaded and following its watch);
    ``stop()`` resigns. Event loop only.
    """

    def __init__(
        self,
        store: MetadataStore,
        client: EtcdClient,
        *,
        node_id: int,
        prefix: str,
        lease_ttl_s: int = 3,
        rng: random.Random | None = None,
        auto_leader_rebalance: bool = True,
        imbalance_threshold: float = 0.10,
        imbalance_check_interval_s: float = 300.0,
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int = 2000,
        peer_security: PeerSecurity = PLAINTEXT,
    ) -> None:
        super().__init__(store, node_id=node_id)
        self._peer_security = peer_security
        self._client = client
        self.session_timeout_ms = session_timeout_ms
        """Set: while active, end silent brokers' sessions on time (:mod:`.liveness`)."""
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.liveness: SessionMonitor | None = None
        self._liveness_task: asyncio.Task[None] | None = None
        self._rng = rng or random.Random()
        self.election = ControllerElection(
            client,
            prefix=prefix,
            node_id=node_id,
            lease_ttl_s=lease_ttl_s,
            on_elected=self._on_elected,
            on_resigned=self._on_resigned,
        )
        self._task: asyncio.Task[None] | None = None
        self._rebalancer: asyncio.Task[None] | None = None
        self.auto_leader_rebalance = auto_leader_rebalance
        self.imbalance_threshold = imbalance_threshold
        self.imbalance_check_interval_s = imbalance_check_interval_s
        self._reconcile_lock = asyncio.Lock()
        self.decisions = 0
        """Partition changes this broker wrote as the active controller (for tests and logs)."""
        store.add_listener(self._on_metadata)

    @property
    def active(self) -> bool:
        return self.election.term is not None

    async def start(self) -> None:
        self._task = asyncio.create_task(self.election.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.election.resign()
        await self._stop_liveness()
        self.store.fence = None

    async def _stop_liveness(self) -> None:
        task, self._liveness_task = self._liveness_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- the elected role ------------------------------------------------------------------

    async def _on_elected(self, term: ControllerTerm) -> None:
        self.store.fence = term.fence()
        self.store.on_fenced = self.election.step_down
        await self.reconcile()
        if self.auto_leader_rebalance:
            self._rebalancer = asyncio.create_task(self._rebalance_loop())
        if self.session_timeout_ms is not None:
            self.liveness = SessionMonitor(
                self.store,
                self._client,
                node_id=self.node_id,
                session_timeout_s=self.session_timeout_ms / 1000,
                interval_s=self.heartbeat_interval_ms / 1000,
                security=self._peer_security,
            )
            self._liveness_task = asyncio.create_task(self.liveness.run())

    async def _on_resigned(self, term: ControllerTerm) -> None:
        self.store.fence = None
        self.store.on_fenced = None
        if self._rebalancer is not None:
            self._rebalancer.cancel()
            self._rebalancer = None
        await self._stop_liveness()
        log.info("node %d is no longer the controller (epoch %d)", self.node_id, term.epoch)

    async def _on_metadata(self, delta: MetadataDelta) -> None:
        if self.active and (delta.full or delta.sessions or delta.brokers or delta.topics):
            await self.reconcile()

    def _eligible(self, broker: int) -> bool:
        session = self.store.sessions.get(broker)
        return session is not None and not session.wants_fence

    def _ineligible_joiners(self, part: PartitionState, isr: list[int]) -> list[int]:
        return ineligible_joiners(
            part, isr, active=self._active_brokers(), offline_dirs=self._offline_dirs()
        )

    def _active_brokers(self) -> set[int]:
        return {b for b, s in self.store.sessions.items() if not s.wants_fence}

    def _offline_dirs(self) -> dict[int, set[str]]:
        return {b: set(s.offline_dirs) for b, s in self.store.sessions.items()}

    def plan_reconcile(self) -> TopicChanges:
        """The leadership/ISR changes the current view calls for (pure, over the store's view):
        brokers without a live unfenced session leave every leadership and ISR; replicas in
        directories a broker's registration no longer lists become LOST (KIP-858, a replaced
        disk); live brokers' offline directories leave those partitions; live brokers lead
        leaderless partitions they cleanly can."""
        active = self._active_brokers()
        offline = self._offline_dirs()
        topics = {
            name: replace(t, partitions=dict(t.partitions)) for name, t in self.store.topics.items()
        }
        changes: TopicChanges = {}

        def merge(step: TopicChanges) -> None:
            for name, parts in step.items():
                topics[name].partitions.update(parts)
                changes.setdefault(name, {}).update(parts)

        hosting = {b for t in topics.values() for p in t.partitions.values() for b in p.replicas}
        for broker in sorted(hosting - active):
            merge(on_broker_fenced(topics.values(), broker, active=active, offline_dirs=offline))
        for broker, reg in sorted(self.store.brokers.items()):
            gone = lost_dirs(topics.values(), broker, reg.directories)
            if gone:
                log.warning("broker %d no longer has directories %s: replicas LOST", broker, gone)
                merge(
                    on_dirs_lost(topics.values(), broker, gone, active=active, offline_dirs=offline)
                )
        for broker in sorted(active):
            if offline.get(broker):
                merge(
                    on_dirs_offline(
                        topics.values(),
                        broker,
                        offline[broker],
                        active=active,
                        offline_dirs=offline,
                    )
                )
        for broker in sorted(active):
            merge(on_broker_unfenced(topics.values(), broker, active=active, offline_dirs=offline))
        return changes

    async def reconcile(self) -> None:
        """Write :meth:`plan_reconcile`'s changes, re-planning if another writer got there
        first; a fenced write ends the attempt (the election steps this node down)."""
        async with self._reconcile_lock:
            for _ in range(RECONCILE_ATTEMPTS):
                if not self.active:
                    return
                bases = dict(self.store.topics)  # what the plan is computed from
                changes = self.plan_reconcile()
                if not changes:
                    return
                try:
                    for name, parts in sorted(changes.items()):
                        topic = bases[name]
                        await self.store.put_topic(
                            replace(topic, partitions={**topic.partitions, **parts}), base=topic
                        )
                        self.decisions += len(parts)
                        for p in parts.values():
                            log.info(
                                "controller: %s-%d leader %d epoch %d isr %s",
                                name,
                                p.partition,
                                p.leader,
                                p.leader_epoch,
                                p.isr,
                            )
                except ControllerFenced:
                    return
                except MetadataConflict:
                    continue  # the store reloaded: plan again on the newer view

    async def _rebalance_loop(self) -> None:
        while True:
            await asyncio.sleep(self.imbalance_check_interval_s)
            try:
                await self.rebalance_leaders()
            except (KafkaError, EtcdError) as exc:
                log.warning("auto leader rebalance failed: %s", exc)

    async def rebalance_leaders(self) -> list[tuple[str, int]]:
        """One auto-leader-rebalance round (active controller only): preferred elections for
        the partitions :func:`~.partition_change.preferred_leader_moves` names; returns them."""
        if not self.active:
            return []
        active, offline = self._active_brokers(), self._offline_dirs()
        moves = preferred_leader_moves(
            self.store.topics.values(),
            threshold=self.imbalance_threshold,
            acceptable=lambda _t, p: acceptable_for(p, active=active, offline_dirs=offline),
        )
        done = []
        for name, partition in moves:
            try:
                await self.elect_leader(TopicPartition(name, partition), unclean=False)
                done.append((name, partition))
            except ControllerFenced:
                raise
            except KafkaError as exc:
                log.info("preferred election of %s-%d skipped: %s", name, partition, exc)
        return done

    # --- requested changes -----------------------------------------------------------------

    def _plan(
        self, first: int, count: int, replication_factor: int, manual: list[list[int]] | None
    ) -> list[PartitionState]:
        """New partitions: manual assignments as given (registered brokers), else Kafka's
        striped rack-aware placement over usable brokers (a directory online and not
        cordoned); leader = first unfenced replica, ISR
        = unfenced replicas (INVALID_REPLICA_ASSIGNMENT if every replica is fenced)."""
        active = self._active_brokers()
        offline = self._offline_dirs()
        if manual is None:
            registered = {b: (r.rack, list(r.directories)) for b, r in self.store.brokers.items()}
            manual = place_striped(
                count,
                replication_factor,
                usable_brokers(
                    registered,
                    fenced=set(registered) - active,
                    offline_dirs=offline,
                    cordoned_dirs={b: set(s.cordoned_dirs) for b, s in self.store.sessions.items()},
                ),
                rng=self._rng,
            )
        planned = plan_partitions(
            first=first,
            count=count,
            replication_factor=replication_factor,
            brokers=sorted(self.store.brokers),
            manual=manual,
        )
        out = []
        for p in planned:
            isr = [b for b in p.replicas if b in active]
            if not isr:
                raise KafkaError(
                    f"every broker of partition {p.partition}'s assignment {p.replicas} is "
                    "fenced or offline",
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                )
            leaderless = replace(p, leader=NO_LEADER, isr=isr)
            elected = change_partition(
                leaderless, acceptable=acceptable_for(p, active=active, offline_dirs={})
            )
            out.append(replace(elected or leaderless, leader_epoch=0, partition_epoch=0))
        return out

    async def _retry(self, op: Callable[[], Awaitable[None]]) -> None:
        """Run a read-modify-write of topic metadata again on the reloaded view when another
        broker wrote the same key first (directory reports, ISR changes and controller
        decisions all write topic keys).

        A request's write (reassignment, election, config, directory report) refused only
        because this broker's controller term ended under it is written again once the step
        down has lifted the term's fence, as every broker writes requests; Kafka forwards such
        a request to the new controller. It failed the request with NOT_CONTROLLER instead,
        which ``kafka-reassign-partitions --execute`` reports as a failed partition."""
        for attempt in range(RECONCILE_ATTEMPTS):
            fence = self.store.fence
            try:
                await op()
                return
            except ControllerFenced:
                if attempt == RECONCILE_ATTEMPTS - 1 or not await self._fence_lifted(fence):
                    raise
            except MetadataConflict:
                if attempt == RECONCILE_ATTEMPTS - 1:
                    raise

    async def _fence_lifted(self, fence: object) -> bool:
        """Wait (at most a lease TTL) until the store no longer carries ``fence``: the ended
        term's step-down cleared it, or a new term replaced it."""
        deadline = asyncio.get_running_loop().time() + self.election.lease_ttl_s
        while self.store.fence is fence and fence is not None:
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None,
        *,
        validate_only: bool = False,
    ) -> None:
        async def op() -> None:
            await SingleBrokerController.create_partitions(
                self, name, count, assignments, validate_only=validate_only
            )

        await self._retry(op)

    async def alter_topic_configs(
        self, name: str, changes: Sequence[ConfigChange], *, validate_only: bool = False
    ) -> None:
        async def op() -> None:
            await SingleBrokerController.alter_topic_configs(
                self, name, changes, validate_only=validate_only
            )

        await self._retry(op)

    async def alter_reassignment(self, tp: TopicPartition, target: list[int] | None) -> None:
        """KIP-455 AlterPartitionReassignments for one partition (KIP-236 cancel with None)."""

        async def op() -> None:
            await self._alter_reassignment(tp, target)

        await self._retry(op)

    async def elect_leader(self, tp: TopicPartition, *, unclean: bool) -> None:
        """ElectLeaders for one partition: the preferred replica, or (unclean) any live
        replica of a leaderless partition; Kafka's errors from :mod:`.partition_change`."""

        async def op() -> None:
            topic = self._topic(tp.topic)
            part = topic.partitions.get(tp.partition)
            if part is None:
                raise KafkaError(
                    f"partition {tp} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
            acceptable = acceptable_for(
                part, active=self._active_brokers(), offline_dirs=self._offline_dirs()
            )
            elect = elect_unclean if unclean else elect_preferred
            await self._put_partition(topic, elect(part, acceptable=acceptable))

        await self._retry(op)

    async def _alter_reassignment(self, tp: TopicPartition, target: list[int] | None) -> None:
        topic = self._topic(tp.topic)
        part = topic.partitions.get(tp.partition)
        if part is None:
            raise KafkaError(f"partition {tp} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        acceptable = acceptable_for(
            part, active=self._active_brokers(), offline_dirs=self._offline_dirs()
        )
        if target is None:
            new = cancel_reassignment(
                part, acceptable=acceptable, unclean_allowed=unclean_enabled(topic)
            )
        else:
            self._validate_target(tp, target)
            new = start_reassignment(part, target, acceptable=acceptable)
        if new is not None:
            await self._put_partition(topic, new)

    def _validate_target(self, tp: TopicPartition, target: list[int]) -> None:
        if not target or len(set(target)) != len(target):
            raise KafkaError(
                f"target replicas {target} of {tp} are empty or repeat a broker",
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            )
        unknown = sorted(set(target) - set(self.store.brokers))
        if unknown:
            raise KafkaError(
                f"target replicas of {tp} name unregistered brokers {unknown}",
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            )

    async def _put_partition(self, topic: TopicState, part: PartitionState) -> None:
        await self.store.put_topic(
            replace(topic, partitions={**topic.partitions, part.partition: part}), base=topic
        )
