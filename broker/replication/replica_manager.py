"""The replica manager: this broker's replicas, from metadata to log and back (Kafka's
``ReplicaManager``), as one object the rest of the broker holds.

It wires the parts, each owning one job, and offers their entry points:

* :class:`~.lifecycle.ReplicaLifecycle` -- replicas created, deleted and given their roles as
  the metadata watch says; the directory reports; dynamic broker configs; which local replica
  a request to a partition led here is served from; the revision the watch has applied.
* :class:`~.appends.Appender` -- :meth:`ReplicaManager.append_records`: a produce's batches
  into the leader replicas with the idempotent-producer checks, and the acks=all wait.
* :class:`~.reads.LeaderReads` -- :meth:`ReplicaManager.fetch_records`: a fetch's reads with
  the leader's replication throttles, the follower positions, and the long poll.
* :mod:`~.offsets` -- :meth:`ReplicaManager.list_offsets` and
  :meth:`ReplicaManager.delete_records`: ListOffsets' and DeleteRecords' work on the leaders.
* :class:`~.purgatory.Purgatory` -- where those requests wait, woken by appends, high
  watermark moves and metadata changes.
* :class:`~.roles.PartitionRoles` and :class:`~.fetcher.FetcherManager` -- leader state and
  follower fetching; the fetcher follows the follower throttle (:class:`~.quota.FollowerPacer`)
  and tells the follower's producer state what it replicated
  (:class:`~.producer_state.ProducerStateFollower`).

It reads the metadata through :class:`~.metadata.MetadataView` and reports through
:class:`~.metadata.DirectoryAssigner`, so it does not depend on the controller package (the two
are sibling layers); the controller's ``MetadataStore`` and ``Controller`` fit these protocols.

Task safety: every method runs on the broker's event loop (not thread-safe); the storage calls
the parts make are synchronous and thread-safe.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

from spindle.broker.common.clock import Clock, SystemClock
from spindle.broker.common.errors import KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.peer import PLAINTEXT, PeerSecurity
from spindle.broker.storage import Log, LogManager

from .appends import Appender
from .fetcher import FetcherManager
from .leader_epochs import EpochEnd
from .lifecycle import ReplicaLifecycle
from .metadata import DirectoryAssigner, MetadataView
from .offsets import delete_records, list_offsets
from .producer_state import ProducerStateFollower, ProducerStateTable
from .purgatory import Purgatory
from .quota import FollowerPacer, ReplicationThrottles
from .reads import LeaderReads
from .requests import (
    AppendEntry,
    DeleteRecordsPartition,
    FetchParams,
    ListOffsetsPartition,
    RecordsView,
)
from .roles import IsrWriter, PartitionRoles


class ReplicaManager:
    """This broker's replicas (see module docstring). Event loop only."""

    append_records: Callable[[Sequence[AppendEntry], int, float], Awaitable[None]]
    """Serve one produce (:meth:`.appends.Appender.append_records`): ``(entries, acks,
    timeout_s)``, each entry's answer written into it."""
    fetch_records: Callable[[FetchParams], Awaitable[None]]
    """Serve one fetch (:meth:`.reads.LeaderReads.fetch_records`), each partition's answer
    written into its entry."""

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
        peer_security: PeerSecurity = PLAINTEXT,
    ) -> None:
        self.node_id = node_id
        self.logs = logs
        self.metadata = metadata
        self.assigner = assigner
        self.static_configs = dict(static_configs)
        clock = clock or SystemClock()
        self.producers = ProducerStateTable()
        self.purgatory = Purgatory(clock)
        self.throttles = ReplicationThrottles(node_id=node_id, clock=clock)
        self.fetchers = FetcherManager(
            node_id=node_id,
            endpoint=endpoints or (lambda _b: None),
            logs=logs,
            pacer=FollowerPacer(metadata, self.throttles),
            listener=ProducerStateFollower(self.producers),
            security=peer_security,
        )
        self.roles = PartitionRoles(
            node_id=node_id,
            logs=logs,
            fetchers=self.fetchers,
            isr_writer=isr_writer,
            clock=clock,
            lag_max_s=replica_lag_time_max_ms / 1000,
        )
        self.lifecycle = ReplicaLifecycle(
            node_id=node_id,
            logs=logs,
            metadata=metadata,
            assigner=assigner,
            static_configs=self.static_configs,
            producers=self.producers,
            roles=self.roles,
            throttles=self.throttles,
            purgatory=self.purgatory,
        )
        self.appender = Appender(
            node_id=node_id,
            logs=logs,
            metadata=metadata,
            static_configs=self.static_configs,
            producers=self.producers,
            roles=self.roles,
            lifecycle=self.lifecycle,
            purgatory=self.purgatory,
        )
        self.reads = LeaderReads(
            metadata=metadata,
            roles=self.roles,
            throttles=self.throttles,
            lifecycle=self.lifecycle,
            purgatory=self.purgatory,
            clock=clock,
        )
        # The two request paths, bound: a call costs what calling the part does.
        self.append_records = self.appender.append_records
        self.fetch_records = self.reads.fetch_records

    # --- lifecycle (ReplicaLifecycle) ------------------------------------------------------

    async def start(self) -> None:
        """Bring up the replicas the metadata assigns here (:meth:`ReplicaLifecycle.start`)."""
        await self.lifecycle.start()

    async def close(self) -> None:
        """Stop fetching from leaders."""
        await self.fetchers.close()

    async def apply_metadata(self, changed_topics: Collection[str] | None = None) -> None:
        """Act on the metadata as it is now (:meth:`ReplicaLifecycle.apply_metadata`)."""
        await self.lifecycle.apply_metadata(changed_topics)

    @property
    def applied_revision(self) -> int:
        """The last metadata revision the watch has applied here."""
        return self.lifecycle.applied_revision

    def mark_applied(self, revision: int) -> None:
        """The metadata watch has applied everything up to ``revision`` here."""
        self.lifecycle.mark_applied(revision)

    async def wait_applied(self, revision: int, timeout_s: float) -> bool:
        """Wait until the watch has applied ``revision``; False after ``timeout_s``."""
        return await self.lifecycle.wait_applied(revision, timeout_s)

    def check_roles(self) -> list[TopicPartition]:
        """Take the roles the metadata gives where they are out of step (logged)."""
        return self.lifecycle.check_roles()

    async def report_loop(self, interval_s: float) -> None:
        """Report directories and check roles and ISRs every ``interval_s``, until cancelled."""
        await self.lifecycle.report_loop(interval_s)

    def apply_dynamic_broker_configs(self) -> None:
        """Push the effective dynamic broker configs into storage and the throttles."""
        self.lifecycle.apply_dynamic_broker_configs()

    def dir_ids(self) -> dict[str, str]:
        """Online log directory path -> directory id (Kafka Uuid text)."""
        return self.lifecycle.dir_ids()

    def hosted_log(self, tp: TopicPartition) -> Log:
        """The local replica of ``tp`` led here (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER...)."""
        return self.lifecycle.hosted_log(tp)

    def check_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int) -> None:
        """Fence a request on another ``currentLeaderEpoch`` (FENCED / UNKNOWN_LEADER_EPOCH)."""
        self.lifecycle.check_leader_epoch(tp, current_leader_epoch)

    # --- offsets (offsets) -----------------------------------------------------------------

    def list_offsets(self, entries: Sequence[ListOffsetsPartition]) -> None:
        """Serve one ListOffsets (:func:`.offsets.list_offsets`), each answer in its entry."""
        list_offsets(self.lifecycle, entries)

    def delete_records(self, entries: Sequence[DeleteRecordsPartition]) -> None:
        """Serve one DeleteRecords (:func:`.offsets.delete_records`), each answer in its
        entry."""
        delete_records(self.lifecycle, entries)

    # --- appends (Appender) and reads (LeaderReads) outside the two request paths ----------

    def append(self, tp: TopicPartition, records: RecordsView | None) -> tuple[int, int]:
        """Append one batch to the leader replica of ``tp`` (:meth:`Appender.append`); call
        :meth:`appended` after."""
        return self.appender.append(tp, records)

    def appended(self) -> None:
        """Wake requests waiting for data (after appending to any partition)."""
        self.purgatory.notify()

    async def wait_committed(
        self, ends: Mapping[TopicPartition, int], timeout_s: float
    ) -> dict[TopicPartition, KafkaError]:
        """acks=all: wait until each partition's high watermark reaches its end offset
        (:meth:`.purgatory.Purgatory.wait_committed`); the failures."""
        return await self.appender.wait_committed(ends, timeout_s)

    def end_offset_for_leader_epoch(
        self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEnd:
        """OffsetsForLeaderEpoch for one partition led here."""
        return self.reads.end_offset_for_leader_epoch(tp, current_leader_epoch, leader_epoch)
