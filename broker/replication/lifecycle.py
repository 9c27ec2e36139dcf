"""The replica lifecycle: this broker's replicas as the metadata says (Kafka's
``ReplicaManager.applyDelta``, ``makeLeaders``/``makeFollowers``, ``StopReplica``).

It owns which local replicas exist and which role each takes: replicas of partitions assigned
here are created (placement by the metadata's directory, else storage's rule), those of
deleted topics or of partitions no longer assigned here are deleted, and every change gives
the replicas their roles (:class:`~.roles.PartitionRoles`) before anything awaits. The metadata
watch is the one path that does this (:meth:`ReplicaLifecycle.apply_metadata`, called by the
broker's metadata listener); a request handler that wrote to the controller waits until the
watch has applied its write (:meth:`ReplicaLifecycle.wait_applied`) instead of creating logs
itself. It also reports each replica's directory back to the controller
(AssignReplicasToDirs; ``LOST`` for a replica in an offline directory), applies dynamic
broker configs to storage and the replication throttles, and answers which local replica a
request to a partition led here is served from (:meth:`ReplicaLifecycle.hosted_log`).

Task safety: event loop only (not thread-safe); the storage calls it makes are synchronous
and thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection, Mapping

from spindle.broker.common.errors import ErrorCode, KafkaError, KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.common.kafka_uuid import LOST_DIR, to_kafka_str
from spindle.broker.storage import Log, LogManager

from .leader_epochs import NO_EPOCH, check_current_epoch
from .metadata import DirectoryAssigner, MetadataView, PartitionView, TopicView
from .producer_state import ProducerStateTable
from .purgatory import Purgatory
from .quota import ReplicationThrottles
from .roles import PartitionRoles

log = logging.getLogger(__name__)

THROTTLE_KEY = "replica.alter.log.dirs.io.max.bytes.per.second"
CORDONED_KEY = "cordoned.log.dirs"  # KIP-1066: directories that take no new replicas
UNLIMITED = (1 << 63) - 1


class ReplicaLifecycle:
    """This broker's replicas from the metadata (see module docstring). Event loop only."""

    def __init__(
        self,
        *,
        node_id: int,
        logs: LogManager,
        metadata: MetadataView,
        assigner: DirectoryAssigner,
        static_configs: Mapping[str, str],
        producers: ProducerStateTable,
        roles: PartitionRoles,
        throttles: ReplicationThrottles,
        purgatory: Purgatory,
    ) -> None:
        self.node_id = node_id
        self.logs = logs
        self.metadata = metadata
        self.assigner = assigner
        self.static_configs = static_configs
        self.producers = producers
        self.roles = roles
        self.throttles = throttles
        self.purgatory = purgatory
        self.applied_revision = 0
        """The last metadata revision the watch has applied here (:meth:`mark_applied`)."""
        self._applied = asyncio.Event()

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
        (:meth:`.appends.Appender.append`). On empty state a producer's retry of a batch the
        log holds was accepted as new and written twice; Kafka loads producer state with the
        log.
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
        self.roles.apply(self.partitions())

    def _sole_replica(self, tp: TopicPartition) -> bool:
        topic = self.metadata.topics.get(tp.topic)
        part = topic.partitions.get(tp.partition) if topic else None
        return part is None or list(part.replicas) == [self.node_id]

    def partitions(self) -> dict[str, Mapping[int, PartitionView]]:
        """Topic name -> partition -> metadata, as :class:`~.roles.PartitionRoles` takes it."""
        return {name: t.partitions for name, t in self.metadata.topics.items()}

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
        part = topic.partitions.get(tp.partition) if topic is not None else None
        if part is None:
            raise KafkaError(f"unknown partition {tp}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return self.led_log(tp, part)

    def led_log(self, tp: TopicPartition, part: PartitionView) -> Log:
        """The local replica of ``tp`` given its metadata ``part``: NOT_LEADER_OR_FOLLOWER
        unless this broker leads it."""
        if part.leader != self.node_id:
            raise KafkaError(
                f"broker {self.node_id} does not lead {tp}", ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        found = self.logs.get_log(tp)
        if found is not None:
            return found
        # Led here per the metadata but not hosted: only the metadata watch creates replicas
        # (apply_metadata), so it has not applied this partition yet, or could not create it.
        # Kafka's getPartitionOrError: an offline replica (or one that may sit on an offline
        # directory) is KAFKA_STORAGE_ERROR, a partition not hosted yet NOT_LEADER_OR_FOLLOWER
        # -- both retried by clients once the watch has caught up.
        offline = self.logs.offline_dirs
        if self.logs.is_partition_offline(tp):
            raise KafkaStorageError(f"partition {tp} is offline: its log directory failed")
        if offline:
            raise KafkaStorageError(
                f"no replica of {tp} here: log directories {', '.join(offline)} are offline "
                "and may hold it"
            )
        raise KafkaError(
            f"broker {self.node_id} leads {tp} but has not created its replica yet",
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
        )

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
        partitions = self.partitions()
        if self.metadata.cluster_id != self.logs.cluster_id:
            return []
        stale = self.roles.out_of_step(partitions)
        if stale:
            log.warning(
                "roles out of step with the metadata for %s: taking them",
                ", ".join(str(tp) for tp in stale[:10]) + (" ..." if len(stale) > 10 else ""),
            )
            self.roles.apply(partitions)
            self.purgatory.notify()
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

        The roles come first, before anything awaits: the report of new replicas' directories
        waits on etcd, and a produce answered meanwhile found the new replica hosted but led
        by nobody -- appended as if alone in the ISR (high watermark at its end whatever the
        replication factor), then its acks=all wait answered NOT_LEADER_OR_FOLLOWER for a
        record it had written. Kafka's broker applies a metadata delta's partitions and their
        leadership in one step.
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
            try:
                self.delete_local_replica(tp)
            except KafkaError as exc:  # its directory failed; the other replicas still go
                log.warning("deleting %s: %s", tp, exc)
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
        self.roles.apply(self.partitions())
        # A new ISR may have moved high watermarks: acks=all waits and long polls re-check.
        self.purgatory.notify()
        await self._report_placed(placed)

    def mark_applied(self, revision: int) -> None:
        """The metadata watch has applied every change up to ``revision`` here (its listeners
        have run): wake the requests waiting for it (:meth:`wait_applied`)."""
        if revision > self.applied_revision:
            self.applied_revision = revision
            self._applied.set()
            self._applied = asyncio.Event()

    async def wait_applied(self, revision: int, timeout_s: float) -> bool:
        """Wait until the metadata watch has applied ``revision`` (a controller write's), so
        the replicas it creates or deletes here exist or are gone and have their roles; False
        if it has not after ``timeout_s``. Kafka's CreateTopics likewise answers once the
        new topic's metadata reached the brokers, within the request's timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.applied_revision < revision:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            event = self._applied
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=remaining)
        return True

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
