"""The append path: a produce request's batches into the leader replicas (Kafka's
``ReplicaManager.appendRecords`` and ``Partition.appendRecordsToLeader``).

:meth:`Appender.append_records` serves one produce request: for acks=all the ISR must hold
``min.insync.replicas`` before anything is written (NOT_ENOUGH_REPLICAS), each batch passes the
idempotent-producer checks (a retried batch is answered with its original offsets, a gap or a
stale epoch refused) and is appended with the leader epoch, waiting requests are woken once,
and acks=all then waits in the purgatory until the high watermark passes every appended batch
(REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER). It owns the
idempotent producers' state of the leader replicas (followers' follows their fetcher:
:class:`~.producer_state.ProducerStateFollower`).

Task safety: event loop only (not thread-safe). Each append is synchronous (a page-cache
write), so the batches of one request are written in order with nothing in between.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import parse_header
from spindle.broker.storage import LogManager

from .lifecycle import ReplicaLifecycle
from .metadata import MetadataView
from .producer_state import DuplicateBatch, ProducerStateTable
from .purgatory import Purgatory
from .requests import AppendEntry, RecordsView, unexpected_error
from .roles import PartitionRoles

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)


class Appender:
    """Appends to the replicas led here (see module docstring). Event loop only."""

    def __init__(
        self,
        *,
        node_id: int,
        logs: LogManager,
        metadata: MetadataView,
        static_configs: Mapping[str, str],
        producers: ProducerStateTable,
        roles: PartitionRoles,
        lifecycle: ReplicaLifecycle,
        purgatory: Purgatory,
    ) -> None:
        self.node_id = node_id
        self.logs = logs
        self.metadata = metadata
        self.static_configs = static_configs
        self.producers = producers
        self.roles = roles
        self.lifecycle = lifecycle
        self.purgatory = purgatory

    async def append_records(
        self, entries: Sequence[AppendEntry], acks: int, timeout_s: float
    ) -> None:
        """Serve one produce: append each entry's batch and write its answer into it (see
        module docstring); with acks=all, return once every appended batch is committed or
        ``timeout_s`` has passed. A retried idempotent batch already written ends where its
        original does: acks=all waits for that to be committed too, since the original may
        not be yet (Kafka's DelayedProduce waits on the duplicate's offsets)."""
        appended = False
        ends: dict[TopicPartition, int] | None = {} if acks == -1 else None
        waiting: dict[TopicPartition, AppendEntry] = {}
        for entry in entries:
            tp = entry.tp
            try:
                if acks not in VALID_ACKS:
                    raise KafkaError(
                        f"acks={acks} is not -1, 0 or 1", ErrorCode.INVALID_REQUIRED_ACKS
                    )
                if ends is not None:
                    self.check_min_isr(tp)
                entry.base_offset, entry.log_start_offset, end = self._append(tp, entry.records)
                appended = True
            except DuplicateBatch as dup:
                entry.base_offset = dup.meta.base_offset
                end = dup.meta.last_offset + 1
            except KafkaError as exc:
                entry.error, entry.message = int(exc.code), str(exc)
                continue
            except Exception as exc:
                entry.error, entry.message = unexpected_error(exc)
                continue
            if ends is not None:
                ends[tp] = end
                waiting[tp] = entry
        if appended:
            self.purgatory.notify()
        if ends:
            await self._wait_for_ends(ends, waiting, timeout_s)

    async def _wait_for_ends(
        self,
        ends: Mapping[TopicPartition, int],
        waiting: Mapping[TopicPartition, AppendEntry],
        timeout_s: float,
    ) -> None:
        """acks=all: answer once every in-sync replica has the records (the high watermark
        passed them); a partition that fails the wait gets that error instead."""
        failed = await self.purgatory.wait_committed(self, ends, timeout_s)
        for tp, exc in failed.items():
            waiting[tp].error, waiting[tp].message = int(exc.code), str(exc)

    def append(self, tp: TopicPartition, records: RecordsView | None) -> tuple[int, int]:
        """Append one producer batch to the leader replica of ``tp``: (base offset, log start).

        Raises ``DuplicateBatch`` for a retried idempotent batch (answered with its original
        offsets) and KafkaError for everything refused. Call :meth:`Purgatory.notify` once
        per request that appended anything, to wake long-polling fetches (as
        :meth:`append_records` does).
        """
        base, start, _end = self._append(tp, records)
        return base, start

    def _append(self, tp: TopicPartition, records: RecordsView | None) -> tuple[int, int, int]:
        """:meth:`append`, and the log end offset after it."""
        if not records:
            raise KafkaError(f"produce to {tp} carries no records", ErrorCode.CORRUPT_MESSAGE)
        partition_log = self.lifecycle.hosted_log(tp)
        if tp not in self.roles.leaders and not self.logs.is_partition_offline(tp):
            # The metadata names this broker leader but the role is not taken: take it now, so
            # the high watermark waits for the ISR (without a role an append counted as
            # committed at once). Roles are applied with the metadata, so this should not
            # happen; it did on the node (a new broker leading a reassigned partition), hence
            # the warning, to find where.
            log.warning("%s: led here per the metadata without its leader role; taking it", tp)
            self.roles.apply(self.lifecycle.partitions())
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
        result = partition_log.append(records, leader_epoch=self.lifecycle.leader_epoch_of(tp))
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
        return (
            int(result.base_offset),
            int(getattr(result, "log_start_offset", 0)),
            partition_log.log_end_offset,
        )

    def isr_shortfall(self, tp: TopicPartition) -> str | None:
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
        shortfall = self.isr_shortfall(tp)
        if shortfall is not None:
            raise KafkaError(shortfall, ErrorCode.NOT_ENOUGH_REPLICAS)

    # --- what an acks=all wait reads (purgatory.CommitView) --------------------------------

    def led_epoch(self, tp: TopicPartition) -> int | None:
        """The leader epoch this broker leads ``tp`` at, or None if it does not lead it."""
        state = self.roles.leaders.get(tp)
        return None if state is None else state.leader_epoch

    def high_watermark(self, tp: TopicPartition) -> int | None:
        """The high watermark of the local replica of ``tp`` (None if not hosted)."""
        found = self.logs.get_log(tp)
        return None if found is None else found.high_watermark

    async def wait_committed(
        self, ends: Mapping[TopicPartition, int], timeout_s: float
    ) -> dict[TopicPartition, KafkaError]:
        """acks=all for appends made outside :meth:`append_records` (the group coordinator's
        offset commits): :meth:`.purgatory.Purgatory.wait_committed` on this append path."""
        return await self.purgatory.wait_committed(self, ends, timeout_s)
