"""The replica manager: this broker's replicas, from metadata to log and back (Kafka's
``ReplicaManager``).

It owns the replica lifecycle that sits between the cluster metadata and storage: creating the
local replicas of partitions assigned here (placement by the metadata's directory, else
storage's rule), deleting those of deleted topics, the append path (idempotent-producer checks,
append, high watermark, waking long-polling fetches), rebuilding producer state at start-up,
applying dynamic broker configs to storage, and reporting each replica's directory back to
the controller (AssignReplicasToDirs; ``LOST`` for a replica in an offline directory).

It reads the metadata through :class:`MetadataView` and reports through
:class:`DirectoryAssigner`, so it does not depend on the controller package (the two are
sibling layers); the controller's ``MetadataStore`` and ``Controller`` fit these protocols.
The multi-broker issue adds followers, ISR and the high watermark from follower fetches here.

Task safety: every method runs on the broker's event loop (not thread-safe); the storage calls
it makes are synchronous and thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Mapping

from spindle.broker.common.clock import Clock, SystemClock
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.common.kafka_uuid import LOST_DIR, to_kafka_str
from spindle.broker.records.batch import parse_header
from spindle.broker.storage import Log, LogManager

from .fetcher import FetcherManager
from .leader_epochs import NO_EPOCH, EpochEnd, check_current_epoch, diverging_epoch
from .metadata import DirectoryAssigner, MetadataView, PartitionView, TopicView
from .producer_state import ProducerStateTable
from .quota import ReplicationThrottles
from .roles import IsrWriter, PartitionRoles

log = logging.getLogger(__name__)

THROTTLE_KEY = "replica.alter.log.dirs.io.max.bytes.per.second"
CORDONED_KEY = "cordoned.log.dirs"  # KIP-1066: directories that take no new replicas
UNLIMITED = (1 << 63) - 1


class AppendNotifier:
    """Wakes long-polling fetches when any partition gets new data (one event per append)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout_s: float) -> None:
        event = self._event
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=max(timeout_s, 0.0))


class ReplicaManager:
    """This broker's replicas (see module docstring). Event loop only."""

    def __init__(
        self,
        *,
        node_id: int,
        logs: LogManager,
        metadata: MetadataView,
        assigner: DirectoryAssigner,
        static_configs: Mapping[str, str],
        clock: Clock | None = None,
        isr_writer: IsrWriter | None = None,
        endpoints: Callable[[int], tuple[str, int] | None] | None = None,
        replica_lag_time_max_ms: int = 30_000,
    ) -> None:
        self.node_id = node_id
        self.logs = logs
        self.metadata = metadata
        self.assigner = assigner
        self.static_configs = dict(static_configs)
        self.producers = ProducerStateTable()
        self.appends = AppendNotifier()
        clock = clock or SystemClock()
        self.throttles = ReplicationThrottles(node_id=node_id, clock=clock)
        self.fetchers = FetcherManager(
            node_id=node_id,
            endpoint=endpoints or (lambda _b: None),
            logs=logs,
            pacer=FollowerPacer(self),
            listener=ProducerStateFollower(self.producers),
        )
        self.roles = PartitionRoles(
            node_id=node_id,
            logs=logs,
            fetchers=self.fetchers,
            isr_writer=isr_writer,
            clock=clock,
            lag_max_s=replica_lag_time_max_ms / 1000,
        )

    # --- start-up --------------------------------------------------------------------------

    async def start(self) -> None:
        """Bring up the replicas the metadata assigns here, after storage has loaded.

        Where this broker is a partition's only replica every appended offset is committed, so
        the high watermark is the log end (the checkpoint may lag after a crash); with other
        replicas the checkpointed high watermark stands (a follower truncates to it). Then each
        replica takes its role (:class:`~.roles.PartitionRoles`).

        The idempotent producers' state is read from every log first, before anything waits:
        the broker already serves requests, and while the directory report waits on etcd a
        produce to a partition the loaded metadata says it leads takes the leader role itself
        (:meth:`append`). On empty state a producer's retry of a batch the log holds was
        accepted as new and written twice; Kafka loads producer state with the log.
        """
        for tp, partition_log in self.logs.logs().items():
            try:
                self.load_producer_state(tp, partition_log)
            except KafkaError as exc:
                log.warning("cannot rebuild producer state of %s: %s", tp, exc)
        placed: dict[TopicPartition, str] = {}
        for topic in list(self.metadata.topics.values()):
            placed |= self._create_replicas(topic, is_new=False)
        await self._report_placed(placed)
        for tp, partition_log in self.logs.logs().items():
            if self._sole_replica(tp):
                partition_log.high_watermark = partition_log.log_end_offset
        self.apply_dynamic_broker_configs()
        self.roles.apply(self._partitions())

    def _sole_replica(self, tp: TopicPartition) -> bool:
        topic = self.metadata.topics.get(tp.topic)
        part = topic.partitions.get(tp.partition) if topic else None
        return part is None or list(part.replicas) == [self.node_id]

    def _partitions(self) -> dict[str, Mapping[int, PartitionView]]:
        return {name: t.partitions for name, t in self.metadata.topics.items()}

    async def close(self) -> None:
        """Stop fetching from leaders."""
        await self.fetchers.close()

    def load_producer_state(self, tp: TopicPartition, partition_log: Log) -> int:
        """Read idempotent-producer state from the tail of a log (Kafka rebuilds it from
        snapshots and the log at start-up), so a producer retrying across a broker restart
        still gets its duplicates dropped and its gaps refused. Returns batches seen."""
        return self.producers.rebuild(tp, partition_log)

    # --- replicas from metadata ------------------------------------------------------------

    def dir_ids(self) -> dict[str, str]:
        """Online log directory path -> directory id (Kafka Uuid text)."""
        return {
            d.path: to_kafka_str(d.directory_id)
            for d in self.logs.describe_dirs(topics=[])
            if d.directory_id and not int(d.error)
        }

    async def create_local_logs(self, topic: TopicView, *, is_new: bool = True) -> None:
        """Create this broker's replicas of ``topic``, give them their roles, then report
        their directories.

        The roles come first, before anything awaits: the report waits on etcd, and a produce
        answered meanwhile found the new replica hosted but led by nobody -- appended as if
        alone in the ISR (high watermark at its end whatever the replication factor), then
        its acks=all wait answered NOT_LEADER_OR_FOLLOWER for a record it had written. Kafka's
        broker applies a metadata delta's partitions and their leadership in one step.
        """
        placed = self._create_replicas(topic, is_new=is_new)
        self.roles.apply(self._partitions())
        await self._report_placed(placed)

    async def _report_placed(self, placed: Mapping[TopicPartition, str]) -> None:
        """Tell the controller which directory each new replica is in (AssignReplicasToDirs)."""
        if placed:
            await self.assigner.assign_replica_dirs(self.node_id, dict(placed))

    def _create_replicas(self, topic: TopicView, *, is_new: bool) -> dict[TopicPartition, str]:
        """Create the missing local replicas of ``topic``: partition -> directory id placed in.

        Placement follows Kafka: a directory preset by AlterReplicaLogDirs wins (storage keeps
        it), else the directory the metadata assigns if it is known and online, else storage's
        least-loaded rule. ``is_new=False`` at start-up: a missing replica may sit on an offline
        directory, and storage then refuses to create an empty one elsewhere.
        """
        ids = self.dir_ids()
        paths = {dir_id: path for path, dir_id in ids.items()}
        placed: dict[TopicPartition, str] = {}
        for p in topic.partitions.values():
            if self.node_id not in p.replicas:
                continue
            tp = TopicPartition(topic.name, p.partition)
            assigned = p.directories[list(p.replicas).index(self.node_id)]
            if self.logs.get_log(tp) is None and assigned in paths:
                # Remembered by storage for a replica it does not host yet.
                self.logs.change_replica_dir(tp, paths[assigned])
            try:
                created = self.logs.get_or_create_log(tp, is_new=is_new)
            except KafkaError as exc:
                log.warning("cannot create %s: %s", tp, exc)
                continue
            dir_id = ids.get(created.logdir_path)
            if dir_id:
                placed[tp] = dir_id
        return placed

    def delete_local_replica(self, tp: TopicPartition) -> None:
        """Forget ``tp``'s producers and delete its local replica (KafkaError from storage)."""
        self.producers.forget_partition(tp)
        self.logs.delete_log(tp)

    def hosted_log(self, tp: TopicPartition) -> Log:
        """The local replica of ``tp``; KafkaError if the topic/partition is unknown here."""
        topic = self.metadata.topics.get(tp.topic)
        if topic is None or tp.partition not in topic.partitions:
            raise KafkaError(f"unknown partition {tp}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        part = topic.partitions[tp.partition]
        if part.leader != self.node_id:
            raise KafkaError(
                f"broker {self.node_id} does not lead {tp}", ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        found = self.logs.get_log(tp)
        if found is None:
            # Assigned here but not created yet. It may have lived in a directory that is now
            # offline, so storage refuses (KAFKA_STORAGE_ERROR) while any directory is offline.
            found = self.logs.get_or_create_log(tp, is_new=False)
        return found

    # --- the append path -------------------------------------------------------------------

    def append(self, tp: TopicPartition, records: bytes | None) -> tuple[int, int]:
        """Append one producer batch to the leader replica of ``tp``: (base offset, log start).

        Raises ``DuplicateBatch`` for a retried idempotent batch (answered with its original
        offsets) and KafkaError for everything refused. Call :meth:`appended` once per request
        that appended anything, to wake long-polling fetches.
        """
        if not records:
            raise KafkaError(f"produce to {tp} carries no records", ErrorCode.CORRUPT_MESSAGE)
        partition_log = self.hosted_log(tp)
        if tp not in self.roles.leaders and not self.logs.is_partition_offline(tp):
            # The metadata names this broker leader but the role is not taken: take it now, so
            # the high watermark waits for the ISR (without a role an append counted as
            # committed at once). Roles are applied with the metadata, so this should not
            # happen; it did on the node (a new broker leading a reassigned partition), hence
            # the warning, to find where.
            log.warning("%s: led here per the metadata without its leader role; taking it", tp)
            self.roles.apply(self._partitions())
        header = parse_header(records, 0)
        if header.size != len(records):
            raise KafkaError(
                f"produce to {tp} must carry exactly one record batch (v2), got more bytes "
                f"({len(records)}) than its first batch ({header.size})",
                ErrorCode.CORRUPT_MESSAGE,
            )
        pid = header.producer_id
        if pid >= 0:
            self.producers.check(
                tp, pid, header.producer_epoch, header.base_sequence, header.record_count
            )
        result = partition_log.append(records, leader_epoch=self.leader_epoch_of(tp))
        # Alone in the ISR the high watermark is the log end at once; else followers move it.
        self.roles.after_append(tp, partition_log)
        if pid >= 0:
            self.producers.record(
                tp,
                pid,
                header.producer_epoch,
                header.base_sequence,
                header.record_count,
                result.base_offset,
                result.last_offset,
            )
        return int(result.base_offset), int(getattr(result, "log_start_offset", 0))

    def _isr_shortfall(self, tp: TopicPartition) -> str | None:
        """Why the ISR of ``tp`` is smaller than ``min.insync.replicas`` (topic config, else
        the broker's static one, else 1), or None if it is not."""
        topic = self.metadata.topics.get(tp.topic)
        part = topic.partitions.get(tp.partition) if topic else None
        if topic is None or part is None:
            return None
        raw = topic.configs.get("min.insync.replicas") or self.static_configs.get(
            "min.insync.replicas", "1"
        )
        if len(part.isr) < int(raw):
            return (
                f"{tp} has {len(part.isr)} in-sync replicas {list(part.isr)}, fewer than "
                f"min.insync.replicas={raw}"
            )
        return None

    def check_min_isr(self, tp: TopicPartition) -> None:
        """acks=all refuses to append while the ISR is smaller than ``min.insync.replicas``:
        NOT_ENOUGH_REPLICAS."""
        shortfall = self._isr_shortfall(tp)
        if shortfall is not None:
            raise KafkaError(shortfall, ErrorCode.NOT_ENOUGH_REPLICAS)

    async def wait_committed(
        self, ends: Mapping[TopicPartition, int], timeout_s: float
    ) -> dict[TopicPartition, KafkaError]:
        """acks=all: wait until each partition's high watermark reaches its end offset in
        ``ends`` (call it right after the appends: their leader epochs are read at once).
        Returns the failures: REQUEST_TIMED_OUT for those still short after ``timeout_s``;
        NOT_ENOUGH_REPLICAS_AFTER_APPEND for those committed by an ISR that had shrunk below
        ``min.insync.replicas`` meanwhile; NOT_LEADER_OR_FOLLOWER as soon as this broker no
        longer leads a partition at the epoch it appended in -- Kafka's DelayedProduce
        check, which a broker that becomes follower completes at once. Without it a demoted
        leader would answer success once its follower high watermark passed the end, for
        records its truncation may have removed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        failed: dict[TopicPartition, KafkaError] = {}
        pending = dict(ends)
        epochs = {tp: self._led_epoch(tp) for tp in ends}
        while True:
            for tp, end in list(pending.items()):
                found = self.logs.get_log(tp)
                if epochs[tp] is None or self._led_epoch(tp) != epochs[tp]:
                    del pending[tp]
                    failed[tp] = KafkaError(
                        f"broker {self.node_id} no longer leads {tp} at leader epoch {epochs[tp]}",
                        ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    )
                elif found is not None and found.high_watermark >= end:
                    del pending[tp]
                    shortfall = self._isr_shortfall(tp)
                    if shortfall is not None:
                        failed[tp] = KafkaError(
                            shortfall, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                        )
            remaining = deadline - loop.time()
            if not pending or remaining <= 0:
                break
            await self.appends.wait(remaining)
        for tp in pending:
            failed[tp] = KafkaError(
                f"{tp} was not replicated to the in-sync replicas in time",
                ErrorCode.REQUEST_TIMED_OUT,
            )
        return failed

    def _led_epoch(self, tp: TopicPartition) -> int | None:
        """The leader epoch this broker leads ``tp`` at, or None if it does not lead it."""
        state = self.roles.leaders.get(tp)
        return None if state is None else state.leader_epoch

    def fetch_log(
        self,
        tp: TopicPartition,
        replica_id: int,
        fetch_offset: int,
        *,
        current_leader_epoch: int = NO_EPOCH,
        last_fetched_epoch: int = NO_EPOCH,
    ) -> tuple[Log, EpochEnd | None]:
        """The leader's log to serve a fetch of ``tp`` from, or with it the ``divergingEpoch``
        to answer instead of records when the fetcher's log parts from this one
        (:func:`~.leader_epochs.diverging_epoch`; Kafka checks it for any fetch that sends
        ``lastFetchedEpoch``). FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a fetch on
        another epoch. A follower's fetch (``replica_id`` >= 0) that does not diverge records
        its position, which may move the high watermark and wake consumers."""
        self.check_leader_epoch(tp, current_leader_epoch)
        found = self.hosted_log(tp)
        if last_fetched_epoch != NO_EPOCH:
            leader_end = found.end_offset_for_epoch(last_fetched_epoch)
            diverging = diverging_epoch(leader_end, last_fetched_epoch, fetch_offset)
            if diverging is not None:
                return found, diverging
        if replica_id >= 0 and self.roles.on_follower_fetch(tp, replica_id, fetch_offset):
            self.appended()
        return found, None

    def leader_epoch_of(self, tp: TopicPartition) -> int:
        """This broker's current leader epoch of ``tp`` (from the metadata)."""
        topic = self.metadata.topics.get(tp.topic)
        part = topic.partitions.get(tp.partition) if topic else None
        if part is None:
            raise KafkaError(f"unknown partition {tp}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return part.leader_epoch

    def check_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int) -> None:
        """Fence a request sent with another ``currentLeaderEpoch`` than this broker's (Kafka
        checks it before anything else: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH)."""
        if current_leader_epoch != NO_EPOCH:
            check_current_epoch(tp, self.leader_epoch_of(tp), current_leader_epoch)

    def end_offset_for_leader_epoch(
        self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEnd:
        """OffsetsForLeaderEpoch for one partition led here (Kafka's
        ``Partition.lastOffsetForLeaderEpoch`` with ``fetchOnlyFromLeader``): the epoch check,
        then the leader's (epoch, end offset) for ``leader_epoch``; (-1, -1) if unknown."""
        self.check_leader_epoch(tp, current_leader_epoch)
        return self.hosted_log(tp).end_offset_for_epoch(leader_epoch)

    # --- replication throttles (leader side; the follower's is FollowerPacer) --------------

    def _part(self, tp: TopicPartition) -> tuple[TopicView, PartitionView] | None:
        topic = self.metadata.topics.get(tp.topic)
        part = topic.partitions.get(tp.partition) if topic is not None else None
        return None if topic is None or part is None else (topic, part)

    def leader_quota_exceeded(self) -> bool:
        """Is the leader quota exceeded now? (Asked once per follower fetch.)"""
        return self.throttles.leader.is_exceeded()

    def leader_throttles(self, tp: TopicPartition, replica_id: int) -> bool:
        """Kafka's ``shouldLeaderThrottle`` once the quota is exceeded: ``tp`` is throttled
        here and the follower is not in its ISR (an in-sync follower is never held back)."""
        found = self._part(tp)
        if found is None:
            return False
        topic, part = found
        return replica_id not in part.isr and self.throttles.leader_throttled(
            topic.configs, tp.partition
        )

    def leader_read_cap(self, tp: TopicPartition, replica_id: int) -> int | None:
        """Most bytes a follower's fetch may read of ``tp`` while it is throttled for that
        follower (:meth:`.quota.ReplicationQuota.read_slice`); None when not throttled."""
        quota = self.throttles.leader
        if quota.unlimited or not self.leader_throttles(tp, replica_id):
            return None
        return quota.read_slice()

    def leader_sent(self, tp: TopicPartition, nbytes: int, *, at: float | None = None) -> None:
        """Count bytes returned to a follower for ``tp`` if ``tp`` is throttled here, from
        ``at`` (when a held-back fetch was due to be read again) or now."""
        found = self._part(tp)
        if (
            found is not None
            and nbytes > 0
            and self.throttles.leader_throttled(found[0].configs, tp.partition)
        ):
            self.throttles.leader.record(nbytes, at=at)

    def leader_throttle_delay(self) -> float:
        """Seconds until the leader quota lets held-back data out again."""
        return self.throttles.leader.delay()

    def appended(self) -> None:
        """Wake fetches waiting for data (after a request appended to any partition)."""
        self.appends.notify()

    # --- dynamic configs -------------------------------------------------------------------

    def effective_broker_configs(self) -> dict[str, str]:
        """Static configs overlaid by the cluster-wide dynamic default, then this broker's own
        dynamic configs (Kafka's precedence)."""
        store = self.metadata.broker_configs
        return {**self.static_configs, **store.get("", {}), **store.get(str(self.node_id), {})}

    def apply_dynamic_broker_configs(self) -> None:
        """Push the effective dynamic configs into storage (the mover's throttle, cordoned
        directories) and into the replication throttles' rates. Called at start-up and on
        every config change in the metadata, so a change made through any broker applies
        here at once."""
        effective = self.effective_broker_configs()
        self.logs.set_alter_log_dirs_throttle(int(effective.get(THROTTLE_KEY, str(UNLIMITED))))
        # KIP-1066: cordoned.log.dirs is per broker (directory paths), never cluster-wide.
        store = self.metadata.broker_configs
        cordoned = store.get(str(self.node_id), {}).get(CORDONED_KEY)
        if cordoned is None:
            cordoned = self.static_configs.get(CORDONED_KEY, "")
        self.logs.set_cordoned([p for p in cordoned.split(",") if p.strip()])
        self.throttles.set_rates(effective)

    # --- following the metadata ------------------------------------------------------------

    async def report_loop(self, interval_s: float) -> None:
        """Every ``interval_s``: keep the metadata's replica directories in step with storage
        (:meth:`report_directories`). Runs until cancelled; a failed round is logged. Metadata
        changes arrive through :meth:`apply_metadata` (the store's watch), not by polling."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.check_roles()
                await self.report_directories()
                await self.roles.check_isr()
            except Exception:
                log.exception("reporting replica directories to the controller failed")

    def check_roles(self) -> list[TopicPartition]:
        """Take the roles the metadata gives, if some replica's role is not that one (see
        :meth:`PartitionRoles.out_of_step`); the partitions that were out of step. Each
        metadata change applies the roles at once, so any found here is a change that did not
        reach :meth:`apply_metadata`: logged as a warning, with the partitions."""
        partitions = self._partitions()
        if self.metadata.cluster_id != self.logs.cluster_id:
            return []
        stale = self.roles.out_of_step(partitions)
        if stale:
            log.warning(
                "roles out of step with the metadata for %s: taking them",
                ", ".join(str(tp) for tp in stale[:10]) + (" ..." if len(stale) > 10 else ""),
            )
            self.roles.apply(partitions)
            self.appended()
        return stale

    async def sync_metadata(self) -> None:
        """Reload the metadata from etcd and act on it (:meth:`apply_metadata`)."""
        before = set(self.metadata.topics)
        await self.metadata.load()
        await self.apply_metadata(before)

    async def apply_metadata(self, changed_topics: Collection[str] | None = None) -> None:
        """Act on the metadata as it is now: create local replicas of partitions assigned
        here, delete those of deleted topics (``changed_topics`` that are gone; None = any
        local topic the metadata no longer has, after a full reload) and those no longer
        assigned here (a finished reassignment removed this broker).

        Replicas are created with ``is_new=False``: while any directory is offline storage
        refuses, because the replica might be on it.
        """
        if self.metadata.cluster_id != self.logs.cluster_id:
            # The metadata was wiped or replaced: deleting replicas on its word would lose data.
            log.error(
                "cluster id in etcd is %s, this broker's is %s: ignoring the metadata",
                self.metadata.cluster_id,
                self.logs.cluster_id,
            )
            return
        after = self.metadata.topics
        local = self.logs.logs()
        candidates = {tp.topic for tp in local} if changed_topics is None else set(changed_topics)
        for tp in [tp for tp in local if tp.topic in candidates and tp.topic not in after]:
            log.info("topic %s was deleted: deleting local replica %s", tp.topic, tp)
            self.delete_local_replica(tp)
        node = self.node_id
        for tp in [tp for tp in local if tp.topic in candidates and tp.topic in after]:
            part = after[tp.topic].partitions.get(tp.partition)
            if part is not None and node not in part.replicas:
                # Kafka's StopReplica(delete): a reassignment moved this replica elsewhere.
                log.info("%s is no longer assigned here: deleting the local replica", tp)
                self.delete_local_replica(tp)
        placed: dict[TopicPartition, str] = {}
        for topic in list(after.values()):
            missing = any(
                node in p.replicas
                and self.logs.get_log(TopicPartition(topic.name, p.partition)) is None
                and not self.logs.is_partition_offline(TopicPartition(topic.name, p.partition))
                for p in topic.partitions.values()
            )
            if missing:
                placed |= self._create_replicas(topic, is_new=False)
        # Roles before the first await (see create_local_logs).
        self.roles.apply(self._partitions())
        # A new ISR may have moved high watermarks: acks=all waits and long polls re-check.
        self.appended()
        await self._report_placed(placed)

    async def report_directories(self) -> None:
        """Report each local replica's directory (AssignReplicasToDirs): a finished move
        records its new directory; a replica in an offline directory becomes ``LOST``."""
        placement: dict[TopicPartition, str] = {}
        lost: list[TopicPartition] = []
        for d in self.logs.describe_dirs():
            dir_id = to_kafka_str(d.directory_id) if d.directory_id else None
            for p in d.partitions:
                if not p.is_future and dir_id:
                    placement[p.tp] = LOST_DIR if int(d.error) else dir_id
            if int(d.error) and dir_id:
                lost += self._assigned_to(dir_id)
        for tp in lost:  # unless re-homed in a live directory since (the metadata may lag)
            placement.setdefault(tp, LOST_DIR)
        if placement:
            await self.assigner.assign_replica_dirs(self.node_id, placement)

    def _assigned_to(self, dir_id: str) -> list[TopicPartition]:
        """The partitions whose replica on this broker the metadata places in ``dir_id``."""
        out = []
        for topic in self.metadata.topics.values():
            for part in topic.partitions.values():
                replicas = list(part.replicas)
                if self.node_id in replicas and part.directories[replicas.index(self.node_id)] == (
                    dir_id
                ):
                    out.append(TopicPartition(topic.name, part.partition))
        return out


class ProducerStateFollower:
    """A follower's idempotent-producer state follows what its fetcher does to the log (the
    fetcher's :class:`~.fetcher.ReplicaListener`): replicated batches are recorded, a cut log
    is read again -- Kafka's follower appends with origin REPLICATION, and its producer-state
    rebuild after ``truncateTo``."""

    def __init__(self, producers: ProducerStateTable) -> None:
        self._producers = producers

    def replicated(self, tp: TopicPartition, records: bytes) -> None:
        self._producers.record_batches(tp, records)

    def truncated(self, tp: TopicPartition, replica: Log) -> None:
        try:
            self._producers.rebuild(tp, replica)
        except KafkaError as exc:  # its directory failed: the replica goes offline
            self._producers.forget_partition(tp)
            log.warning("cannot rebuild producer state of %s: %s", tp, exc)


class FollowerPacer:
    """The follower side of the replication throttles (Kafka's ``shouldFollowerThrottle``):
    which followed partitions sit out a fetch round, and counting what was fetched."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas

    def _throttled(self, tp: TopicPartition) -> tuple[bool, bool]:
        """(throttled here, this broker in the ISR) for a followed partition."""
        found = self._replicas._part(tp)
        if found is None:
            return False, True
        topic, part = found
        throttles = self._replicas.throttles
        return (
            throttles.follower_throttled(topic.configs, tp.partition),
            throttles.node_id in part.isr,
        )

    def hold(self, tp: TopicPartition) -> bool:
        """Leave ``tp`` out of the next fetch: quota exceeded, throttled, not in the ISR."""
        quota = self._replicas.throttles.follower
        if quota.unlimited or not quota.is_exceeded():
            return False
        throttled, in_sync = self._throttled(tp)
        return throttled and not in_sync

    def fetched(self, tp: TopicPartition, nbytes: int, sent_at: float) -> None:
        """Count fetched bytes of a throttled partition, admitted when the fetch was sent."""
        if nbytes > 0 and self._throttled(tp)[0]:
            self._replicas.throttles.follower.record(nbytes, at=sent_at)

    def delay(self) -> float:
        return self._replicas.throttles.follower.delay()

    def now(self) -> float:
        return self._replicas.throttles.follower.now()
