"""The read path: fetches served by the leader replicas, with the leader's replication
throttles (Kafka's ``ReplicaManager.fetchMessages``, ``Partition.fetchRecords`` and
``ReplicationQuotaManager`` on the leader side).

:meth:`LeaderReads.fetch_records` serves one fetch. Each partition is fenced on its
``currentLeaderEpoch`` (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), must be led here, and is
read from the fetch offset up to the high watermark for a consumer or the log end for a
follower; a follower whose log parts from the leader's (``lastFetchedEpoch``) gets the
``divergingEpoch`` and no records, else its fetch records its position, which may move the
high watermark. Storage returns at least one whole batch for a positive limit (KIP-74), so
the first non-empty partition answers even if its batch exceeds the limits. Once the leader
quota is exceeded as a follower's fetch is read, a throttled partition's data is left out for
a follower outside its ISR (the fetch is not failed); what is sent of throttled partitions
counts against the quota, and each read of one is cut to a slice of the rate
(:meth:`.quota.ReplicationQuota.read_slice`). A fetch that found fewer than ``min_bytes``, no
error and time left waits in the purgatory (:meth:`.purgatory.Purgatory.delayed_fetch`).

Task safety: event loop only (not thread-safe); reads are synchronous page-cache reads (or
file ranges left for ``sendfile``) made on the loop.
"""

from __future__ import annotations

from spindle.broker.common.clock import Clock
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.storage import Log

from .leader_epochs import NO_EPOCH, EpochEnd, check_current_epoch, diverging_epoch
from .lifecycle import ReplicaLifecycle
from .metadata import MetadataView, PartitionView, TopicView
from .purgatory import Purgatory, fetch_satisfied
from .quota import ReplicationThrottles
from .requests import FetchParams, FetchPartition, unexpected_error
from .roles import PartitionRoles


class LeaderReads:
    """Fetches from the replicas led here (see module docstring). Event loop only."""

    def __init__(
        self,
        *,
        metadata: MetadataView,
        roles: PartitionRoles,
        throttles: ReplicationThrottles,
        lifecycle: ReplicaLifecycle,
        purgatory: Purgatory,
        clock: Clock,
    ) -> None:
        self.metadata = metadata
        self.roles = roles
        self.throttles = throttles
        self.lifecycle = lifecycle
        self.purgatory = purgatory
        self._clock = clock

    async def fetch_records(self, params: FetchParams) -> None:
        """Serve one fetch: read every partition into its entry, and if that does not satisfy
        the fetch (fewer than ``min_bytes``, no error, time left) wait in the purgatory for
        more. An error or a ``divergingEpoch`` answers at once, as Kafka's fetch does. The
        caller owns the file ranges of the answer (``FetchPartition.file``)."""
        clock = self._clock
        deadline = clock.monotonic() + params.max_wait_ms / 1000.0
        total, any_error, held = self.read_round(params, None)
        now = clock.monotonic()
        if not fetch_satisfied(total, any_error, deadline - now, params.min_bytes):
            await self.purgatory.delayed_fetch(
                self, params, deadline=deadline, now=now, min_bytes=params.min_bytes, held=held
            )

    def read_round(self, params: FetchParams, due: float | None) -> tuple[int, bool, bool]:
        """Read every partition of ``params`` once: (bytes, whether any partition failed or
        diverged, whether the replication throttle held any partition's data back). ``due``:
        when a follower fetch held back before was due to be read again (the time its bytes
        count from)."""
        replica_id = params.replica_id
        budget = params.max_bytes
        # Kafka decides per response: while the leader quota is not exceeded, every partition
        # of this follower fetch gets its data (and the bytes are counted), so one response is
        # the most the quota can be overrun by.
        quota_exceeded = replica_id >= 0 and self.throttles.leader.is_exceeded()
        file_min = params.file_range_min_bytes
        total = 0
        any_error = False
        any_held = False
        for fp in params.partitions:
            size, held = self._read_partition(fp, budget, replica_id, quota_exceeded, due, file_min)
            total += size
            budget -= size
            any_error = any_error or fp.error != 0 or fp.diverging is not None
            any_held = any_held or held
        return total, any_error, any_held

    def release(self, params: FetchParams) -> None:
        """Close the file ranges of a round that will not be sent (a long poll reads again)."""
        for fp in params.partitions:
            if fp.file is not None:
                fp.file.close()
                fp.file = None

    def throttle_delay(self) -> float:
        """Seconds until the leader quota lets held-back data out again."""
        return self.throttles.leader.delay()

    def _read_partition(
        self,
        fp: FetchPartition,
        budget: int,
        replica_id: int,
        quota_exceeded: bool,
        due: float | None,
        file_min: int | None,
    ) -> tuple[int, bool]:
        """Read one partition into ``fp``: (bytes read, whether the throttle held it back).
        Errors are answered in ``fp.error``; OFFSET_OUT_OF_RANGE carries the leader's log
        start (Kafka answers -1 and its follower asks ListOffsets next; a Spindle follower
        reads the leader's log start from this answer instead, one round trip fewer)."""
        tp = fp.tp
        fp.error, fp.high_watermark, fp.log_start_offset = 0, -1, -1
        fp.records, fp.file, fp.diverging = b"", None, None
        partition_log: Log | None = None
        try:
            topic, part, partition_log, diverging = self._fetch_log(fp, replica_id)
            if diverging is not None:
                fp.high_watermark = partition_log.high_watermark
                fp.log_start_offset = partition_log.log_start_offset
                fp.diverging = diverging
                return 0, False
            held = False
            if replica_id >= 0:
                hw = partition_log.log_end_offset
                if quota_exceeded and self._leader_throttles(topic, part, replica_id):
                    held = True
                    budget = 0
                elif (cap := self._leader_read_cap(topic, part, replica_id)) is not None:
                    budget = min(budget, cap)
            else:
                hw = partition_log.high_watermark
            limit = max(min(fp.max_bytes, budget), 0)
            got = partition_log.read(
                fp.fetch_offset, limit, max_offset=hw, file_range_min_bytes=file_min
            )
            fp.high_watermark = got.high_watermark
            fp.log_start_offset = got.log_start_offset
            fp.records, fp.file = got.records, got.file
            size = got.size
            if (
                replica_id >= 0
                and size > 0
                and self.throttles.leader_throttled(topic.configs, tp.partition)
            ):
                self.throttles.leader.record(size, at=due)
            return size, held
        except KafkaError as exc:
            fp.error = int(exc.code)
        except Exception as exc:
            fp.error = unexpected_error(exc)[0]
        if fp.error == ErrorCode.OFFSET_OUT_OF_RANGE and partition_log is not None:
            fp.log_start_offset = partition_log.log_start_offset
        return 0, False

    def _fetch_log(
        self, fp: FetchPartition, replica_id: int
    ) -> tuple[TopicView, PartitionView, Log, EpochEnd | None]:
        """The leader's log to serve ``fp`` from (with its metadata), or with it the
        ``divergingEpoch`` to answer instead of records when the fetcher's log parts from this
        one (:func:`~.leader_epochs.diverging_epoch`; Kafka checks it for any fetch that sends
        ``lastFetchedEpoch``). FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a fetch on
        another epoch, checked first. A follower's fetch (``replica_id`` >= 0) that does not
        diverge records its position, which may move the high watermark and wake waiting
        requests."""
        tp = fp.tp
        topic = self.metadata.topics.get(tp.topic)
        part = topic.partitions.get(tp.partition) if topic is not None else None
        if topic is None or part is None:
            raise KafkaError(f"unknown partition {tp}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        check_current_epoch(tp, part.leader_epoch, fp.current_leader_epoch)
        found = self.lifecycle.led_log(tp, part)
        last_fetched_epoch = fp.last_fetched_epoch
        if last_fetched_epoch != NO_EPOCH:
            leader_end = found.end_offset_for_epoch(last_fetched_epoch)
            diverging = diverging_epoch(leader_end, last_fetched_epoch, fp.fetch_offset)
            if diverging is not None:
                return topic, part, found, diverging
        if replica_id >= 0 and self.roles.on_follower_fetch(tp, replica_id, fp.fetch_offset):
            self.purgatory.notify()
        return topic, part, found, None

    def end_offset_for_leader_epoch(
        self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEnd:
        """OffsetsForLeaderEpoch for one partition led here (Kafka's
        ``Partition.lastOffsetForLeaderEpoch`` with ``fetchOnlyFromLeader``): the epoch check,
        then the leader's (epoch, end offset) for ``leader_epoch``; (-1, -1) if unknown."""
        self.lifecycle.check_leader_epoch(tp, current_leader_epoch)
        return self.lifecycle.hosted_log(tp).end_offset_for_epoch(leader_epoch)

    # --- the leader's replication throttle (the follower's is quota.FollowerPacer) ---------

    def _leader_throttles(self, topic: TopicView, part: PartitionView, replica_id: int) -> bool:
        """Kafka's ``shouldLeaderThrottle`` once the quota is exceeded: the partition is
        throttled here and the follower is not in its ISR (an in-sync follower is never held
        back)."""
        return replica_id not in part.isr and self.throttles.leader_throttled(
            topic.configs, part.partition
        )

    def _leader_read_cap(
        self, topic: TopicView, part: PartitionView, replica_id: int
    ) -> int | None:
        """Most bytes a follower's fetch may read of the partition while it is throttled for
        that follower (:meth:`.quota.ReplicationQuota.read_slice`); None when not throttled."""
        quota = self.throttles.leader
        if quota.unlimited or not self._leader_throttles(topic, part, replica_id):
            return None
        return quota.read_slice()
