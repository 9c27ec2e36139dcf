"""Follower fetching: this broker copies the partitions it follows from their leaders (Kafka's
``ReplicaFetcherThread``), one asyncio task per leader broker, over the Kafka protocol.

Each round sends one Fetch (v12, ``replica_id`` = this broker) for every partition followed from
that leader, asking from the local log end offset; the leader answers records up to its log
end (not only up to the high watermark) and records this fetch as the follower's position
(:mod:`.isr`). Records are appended unchanged, keeping the leader's offsets; the follower's
high watermark is ``min(leader's high watermark, local log end)``. The leader's long poll
(``max_wait_ms``) makes an idle follower cost one request per wait, and a produce wakes it.

Replication throttles (:mod:`.quota`) pace the rounds: while the follower quota is exceeded,
throttled partitions outside the ISR are left out of the request, and the round's long poll
ends when they may fetch again.

Leader epochs (KIP-101/279, rules in :mod:`.leader_epochs`): every partition fetched at a new
leader epoch -- this broker just became its follower, the leader changed, or the broker
restarted -- first asks the leader OffsetsForLeaderEpoch (v4, ``replica_id`` = this broker)
for the end of its own latest epoch and truncates to where the two logs part, repeating while
the leader answers an epoch it never had; only then is it fetched. Each fetch carries the
partition's ``currentLeaderEpoch`` (the leader fences a stale one) and ``lastFetchedEpoch``; a
``divergingEpoch`` in the answer truncates the same way. A replica with no epochs at all (data
written before leaders stamped them) truncates to its high watermark, the rule before KIP-101.

What a follower appends and every cut of its log are told to a :class:`ReplicaListener` (the
replica manager keeps the idempotent producers' state from them, as a Kafka follower does).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from spindle.broker.common.errors import ErrorCode, KafkaError, KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.peer import PLAINTEXT, PeerConnection, PeerSecurity
from spindle.broker.storage import Log, LogManager

from .leader_epochs import NO_EPOCH
from .truncation import (
    epoch_answers,
    offsets_for_leader_epoch_request,
    truncate_to_leader,
    truncate_without_epochs,
)

with warnings.catch_warnings():  # kafka-python's schema classes warn on import
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer import FetchRequest, FetchResponse
    from kafka.protocol.consumer.offsets import OffsetForLeaderEpochResponse

log = logging.getLogger(__name__)

FETCH_VERSION = 12
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length (bytes after this field)


def whole_batches(data: bytes) -> bytes:
    """The prefix of ``data`` made of complete record batches (a leader may cut the last)."""
    pos = 0
    while pos + _BATCH_HEAD.size <= len(data):
        _base, length = _BATCH_HEAD.unpack_from(data, pos)
        end = pos + _BATCH_HEAD.size + length
        if length <= 0 or end > len(data):
            break
        pos = end
    return data[:pos]


def _latest_epoch(replica: Log) -> int:
    latest = replica.epochs.latest_epoch
    return NO_EPOCH if latest is None else latest


@dataclass
class FetchSettings:
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 << 20
    partition_max_bytes: int = 1 << 20
    backoff_s: float = 0.5


class FetchPacer(Protocol):
    """Replication throttles on the follower side (:class:`.quota.FollowerPacer`):
    partitions held out of a fetch round while the follower quota is exceeded."""

    def hold(self, tp: TopicPartition) -> bool: ...
    def fetched(self, tp: TopicPartition, nbytes: int, sent_at: float) -> None: ...
    def delay(self) -> float: ...
    def now(self) -> float: ...


class ReplicaListener(Protocol):
    """Told of every change the fetcher makes to a followed replica's log."""

    def replicated(self, tp: TopicPartition, records: bytes) -> None:
        """``records`` (whole batches, the leader's offsets) were appended to ``tp``."""

    def truncated(self, tp: TopicPartition, replica: Log) -> None:
        """``replica``'s log lost its tail, or was emptied to start at the leader's log start."""


class _Unheard:
    def replicated(self, tp: TopicPartition, records: bytes) -> None:
        return None

    def truncated(self, tp: TopicPartition, replica: Log) -> None:
        return None


class Unthrottled:
    """No replication throttle."""

    def hold(self, tp: TopicPartition) -> bool:
        return False

    def fetched(self, tp: TopicPartition, nbytes: int, sent_at: float) -> None:
        return None

    def delay(self) -> float:
        return 0.0

    def now(self) -> float:
        return 0.0


class LeaderConnection(PeerConnection):
    """The connection to a leader broker, its answers decoded (requests in order, one at a
    time)."""

    async def call(self, request: Any, response_cls: Any, *, timeout_s: float) -> Any:
        corr, data = await self.exchange(request, timeout_s)
        response = response_cls.decode(data, version=request.API_VERSION, header=True)
        if response.header.correlation_id != corr:
            raise KafkaError(f"response {response.header.correlation_id} for request {corr}")
        return response


class ReplicaFetcher:
    """Fetch the partitions followed from one leader broker until cancelled."""

    def __init__(
        self,
        *,
        node_id: int,
        leader_id: int,
        endpoint: Callable[[int], tuple[str, int] | None],
        logs: LogManager,
        settings: FetchSettings,
        pacer: FetchPacer | None = None,
        listener: ReplicaListener | None = None,
        security: PeerSecurity = PLAINTEXT,
    ) -> None:
        self.node_id = node_id
        self.leader_id = leader_id
        self._security = security
        self._listener: ReplicaListener = listener or _Unheard()
        self._endpoint = endpoint
        self._logs = logs
        self._settings = settings
        self._pacer: FetchPacer = pacer or Unthrottled()
        self.partitions: set[TopicPartition] = set()
        self._stopped = False
        self.epochs: dict[TopicPartition, int] = {}
        """The current leader epoch of each partition fetched (from the metadata)."""
        self.truncating: set[TopicPartition] = set()
        """Partitions that must find where they part from the leader before fetching."""
        self._changed = asyncio.Event()
        self.fetched_bytes = 0

    def set_partitions(
        self,
        partitions: Iterable[TopicPartition],
        epochs: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Fetch ``partitions`` at their leader ``epochs`` (none given: -1); one whose epoch
        changed (or that is new here) truncates first."""
        self.partitions = set(partitions)
        for tp in self.partitions:
            epoch = (epochs or {}).get(tp, NO_EPOCH)
            if self.epochs.get(tp) != epoch:
                self.truncating.add(tp)
            self.epochs[tp] = epoch
        for tp in set(self.epochs) - self.partitions:
            del self.epochs[tp]
        self.truncating &= self.partitions
        self._changed.set()

    def stop(self) -> None:
        """Follow nothing more, before the task is cancelled: Python 3.11's ``wait_for``
        returns a response that arrived together with the cancellation instead of raising,
        and its records must not be appended to a replica that may be leading by now (its
        producer state was rebuilt from the log without them: a retried batch would be
        appended twice)."""
        self._stopped = True
        self.set_partitions(())

    def _request(self, tps: list[TopicPartition], max_wait_ms: int | None = None) -> Any:
        s = self._settings
        by_topic: dict[str, list[Any]] = {}
        for tp in tps:
            replica = self._logs.get_log(tp)
            if replica is None or self._logs.is_partition_offline(tp):
                continue  # a replica in a failed directory fetches nothing (KIP-112)
            by_topic.setdefault(tp.topic, []).append(
                FetchRequest.FetchTopic.FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=self.epochs.get(tp, NO_EPOCH),
                    fetch_offset=replica.log_end_offset,
                    last_fetched_epoch=_latest_epoch(replica),
                    log_start_offset=replica.log_start_offset,
                    partition_max_bytes=s.partition_max_bytes,
                )
            )
        return FetchRequest[FETCH_VERSION](
            replica_id=self.node_id,
            max_wait_ms=s.max_wait_ms if max_wait_ms is None else max_wait_ms,
            min_bytes=s.min_bytes,
            max_bytes=s.max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            forgotten_topics_data=[],
            rack_id="",
            topics=[
                FetchRequest.FetchTopic(topic=t, partitions=parts) for t, parts in by_topic.items()
            ],
        )

    def _apply(self, response: Any, sent_at: float = 0.0) -> None:
        for t in response.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                if tp not in self.partitions:
                    continue
                replica = self._logs.get_log(tp)
                if replica is not None:
                    self._apply_partition(tp, replica, p, sent_at)

    def _apply_partition(self, tp: TopicPartition, replica: Log, p: Any, sent_at: float) -> None:
        if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(tp, replica, p.log_start_offset)
            return
        if p.error_code != ErrorCode.NONE:
            log.debug("fetch of %s from %d: error %d", tp, self.leader_id, p.error_code)
            return
        diverging = getattr(p, "diverging_epoch", None)  # Fetch v12+
        if diverging is not None and diverging.end_offset >= 0:
            answer = (diverging.epoch, diverging.end_offset)
            end = replica.log_end_offset
            done = truncate_to_leader(tp, replica, answer, self.leader_id)
            self._cut(tp, replica, end)
            if not done:
                self.truncating.add(tp)
            return
        records = whole_batches(bytes(p.records or b""))
        if records:
            try:
                replica.append(records, assign_offsets=False)
            except KafkaStorageError as exc:
                # Its directory just failed (the failure channel took it offline):
                # only this partition stops; the others from this leader go on.
                log.warning("%s: cannot append what %d sent: %s", tp, self.leader_id, exc)
                return
            self._listener.replicated(tp, records)
            self.fetched_bytes += len(records)
            self._pacer.fetched(tp, len(records), sent_at)
        replica.high_watermark = min(p.high_watermark, replica.log_end_offset)

    def _out_of_range(self, tp: TopicPartition, replica: Log, leader_log_start: int) -> None:
        """OFFSET_OUT_OF_RANGE: below the leader's log start (retention or DeleteRecords
        there while this replica was away), start over empty at it, as Kafka's follower does;
        beyond the leader's log end, find where the logs part again (OffsetsForLeaderEpoch)."""
        if leader_log_start > replica.log_end_offset:
            log.info(
                "%s: log end %d is below leader %d's log start %d; starting over there",
                tp,
                replica.log_end_offset,
                self.leader_id,
                leader_log_start,
            )
            try:
                replica.truncate_fully_and_start_at(leader_log_start)
            except KafkaStorageError as exc:
                log.warning("%s: cannot start over at %d: %s", tp, leader_log_start, exc)
            self._listener.truncated(tp, replica)
        else:
            self.truncating.add(tp)

    def _cut(self, tp: TopicPartition, replica: Log, end_before: int) -> None:
        """After one of :mod:`.truncation`'s cuts: tell the listener if the log lost a tail."""
        if replica.log_end_offset < end_before:
            self._listener.truncated(tp, replica)

    def _epoch_asks(self) -> dict[TopicPartition, tuple[int, int]]:
        """What to ask the leader for the partitions still truncating: partition -> (current
        leader epoch, this replica's latest epoch). A replica without epochs truncates to its
        high watermark instead; one gone or offline is not asked about."""
        asks: dict[TopicPartition, tuple[int, int]] = {}
        for tp in sorted(self.truncating):
            replica = self._logs.get_log(tp)
            if replica is None:
                self.truncating.discard(tp)
            elif self._logs.is_partition_offline(tp):
                continue  # its directory failed: neither asked for nor fetched
            elif _latest_epoch(replica) == NO_EPOCH:
                end = replica.log_end_offset
                if truncate_without_epochs(tp, replica):
                    self.truncating.discard(tp)
                self._cut(tp, replica, end)
            else:
                asks[tp] = (self.epochs.get(tp, NO_EPOCH), _latest_epoch(replica))
        return asks

    async def _truncate(self, connection: LeaderConnection, timeout_s: float) -> None:
        """One OffsetsForLeaderEpoch round for the partitions still truncating (module
        docstring); those done leave :attr:`truncating`, the others stay for the next round."""
        asks = self._epoch_asks()
        if not asks:
            return
        request = offsets_for_leader_epoch_request(self.node_id, asks)
        response = await connection.call(request, OffsetForLeaderEpochResponse, timeout_s=timeout_s)
        for tp, code, answer in epoch_answers(response):
            replica = self._logs.get_log(tp)
            # Left while the question was out (led here now, say): the answer is not for it.
            if tp not in asks or tp not in self.truncating or replica is None:
                continue
            if code != ErrorCode.NONE:
                log.info(
                    "%s: leader %d answers OffsetsForLeaderEpoch with error %d",
                    tp,
                    self.leader_id,
                    code,
                )
            else:
                end = replica.log_end_offset
                if truncate_to_leader(tp, replica, answer, self.leader_id):
                    self.truncating.discard(tp)
                self._cut(tp, replica, end)

    async def _round(
        self,
        connection: LeaderConnection,
        tps: list[TopicPartition],
        max_wait_ms: int | None,
        timeout_s: float,
        sent_at: float,
    ) -> None:
        """One round with the leader: partitions at a new epoch truncate first, the others
        are fetched."""
        if self.truncating:
            await self._truncate(connection, timeout_s)
        tps = [tp for tp in tps if tp not in self.truncating]
        if not tps:  # the leader cannot answer yet (an older or newer epoch)
            await asyncio.sleep(self._settings.backoff_s)
            return
        response = await connection.call(
            self._request(tps, max_wait_ms), FetchResponse, timeout_s=timeout_s
        )
        self._apply(response, sent_at)

    async def run(self) -> None:
        connection: LeaderConnection | None = None
        s = self._settings
        timeout_s = s.max_wait_ms / 1000 + 10
        due: float | None = None
        try:
            while not self._stopped:
                tps = sorted(self.partitions, key=lambda tp: (tp.topic, tp.partition))
                if not tps:
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                # Replication throttle: throttled partitions sit out while the quota is
                # exceeded, and the long poll ends when they may fetch again.
                max_wait_ms = None
                held = [tp for tp in tps if self._pacer.hold(tp)]
                if held:
                    tps = [tp for tp in tps if tp not in held]
                    wait_s = self._pacer.delay()
                    max_wait_ms = min(s.max_wait_ms, max(1, int(wait_s * 1000) + 1))
                    if not tps:
                        # At most one long poll: a rate raised meanwhile applies at once.
                        wait_s = min(wait_s, s.max_wait_ms / 1000)
                        due = self._pacer.now() + wait_s
                        await asyncio.sleep(wait_s)
                        continue
                where = self._endpoint(self.leader_id)
                if where is None:
                    await asyncio.sleep(s.backoff_s)
                    continue
                if connection is None or (connection.host, connection.port) != where:
                    if connection is not None:
                        await connection.close()
                    connection = LeaderConnection(
                        *where, client_id=f"replica-{self.node_id}", security=self._security
                    )
                try:
                    # Bytes count from when this fetch was due (a late wake-up costs no rate).
                    sent_at = self._pacer.now() if due is None else min(due, self._pacer.now())
                    due = None
                    await self._round(connection, tps, max_wait_ms, timeout_s, sent_at)
                except (OSError, TimeoutError, asyncio.IncompleteReadError, KafkaError) as exc:
                    log.info("fetch from leader %d failed: %s", self.leader_id, exc)
                    await connection.close()
                    await asyncio.sleep(s.backoff_s)
        finally:
            if connection is not None:
                await connection.close()


class FetcherManager:
    """One :class:`ReplicaFetcher` per leader this broker follows partitions from."""

    def __init__(
        self,
        *,
        node_id: int,
        endpoint: Callable[[int], tuple[str, int] | None],
        logs: LogManager,
        settings: FetchSettings | None = None,
        pacer: FetchPacer | None = None,
        listener: ReplicaListener | None = None,
        security: PeerSecurity = PLAINTEXT,
    ) -> None:
        self.node_id = node_id
        self._endpoint = endpoint
        self._security = security
        self._logs = logs
        self._settings = settings or FetchSettings()
        self._pacer = pacer
        self._listener = listener
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def assign(
        self,
        followed: dict[TopicPartition, int],
        epochs: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Follow exactly ``followed`` (partition -> leader id) at their leader ``epochs``
        (none given: no epoch is sent, -1); fetchers start and stop."""
        epochs = epochs or {}
        by_leader: dict[int, set[TopicPartition]] = {}
        for tp, leader in followed.items():
            by_leader.setdefault(leader, set()).add(tp)
        for leader in list(self.fetchers):
            if leader not in by_leader:
                self.fetchers.pop(leader).stop()
                self._tasks.pop(leader).cancel()
        for leader, tps in by_leader.items():
            fetcher = self.fetchers.get(leader)
            if fetcher is None:
                fetcher = ReplicaFetcher(
                    node_id=self.node_id,
                    leader_id=leader,
                    endpoint=self._endpoint,
                    logs=self._logs,
                    settings=self._settings,
                    pacer=self._pacer,
                    listener=self._listener,
                    security=self._security,
                )
                self.fetchers[leader] = fetcher
                self._tasks[leader] = asyncio.create_task(fetcher.run())
            if fetcher.partitions != tps or any(
                fetcher.epochs.get(tp) != epochs.get(tp) for tp in tps
            ):
                fetcher.set_partitions(tps, epochs)

    def followed(self) -> dict[TopicPartition, int]:
        return {tp: leader for leader, f in self.fetchers.items() for tp in f.partitions}

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for fetcher in self.fetchers.values():
            fetcher.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.fetchers.clear()
        self._tasks.clear()
