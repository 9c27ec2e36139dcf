"""Idempotent-producer sequence checks, per partition and producer id (Kafka's
``ProducerStateManager``/``ProducerAppendInfo``, reduced to what a non-transactional producer
needs). Bookkeeping on the event loop only (not thread-safe); the one read of a log is
:meth:`ProducerStateTable.rebuild`.

Rules, as Kafka applies them to one batch with producer id P, epoch E, sequences [s, t]:

- E older than P's epoch: INVALID_PRODUCER_EPOCH (a fenced, zombie producer).
- E newer than P's epoch: a bumped producer; its first sequence must be 0.
- [s, t] equal to one of the last five batches of P: a retry of a batch already written ->
  answered with the original offsets, nothing written again (DUPLICATE dropped).
- otherwise s must follow the last sequence (t_last + 1, wrapping after int32 max), else
  OUT_OF_ORDER_SEQUENCE_NUMBER.
- P unknown here (a new producer, or one whose batches lie beyond the tail the broker reads
  at start-up): accepted as the start of P.

The table follows every replica's log, leader or follower, as Kafka's producer state does:
the leader records what it appends, a follower what it replicates (:meth:`record_batches`,
Kafka's appends with origin REPLICATION, which are not checked), and a truncated log -- a
follower cutting a divergent tail (KIP-101/279) or starting over at the leader's log start --
is read again (:meth:`rebuild`, Kafka's ``rebuildProducerState`` after ``truncateTo``). So a
replica that becomes leader, by whatever sequence of metadata changes, already knows every
batch in its log: a producer retrying a batch the old leader wrote gets it answered as a
duplicate, and a batch truncated away is not. At start-up the tail of every log is read the
same way.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import BatchHeader, iter_batches
from spindle.broker.storage import Log

log = logging.getLogger(__name__)

INT32_MAX = (1 << 31) - 1
NO_PRODUCER_ID = -1
CACHED_BATCHES = 5
"""Kafka keeps the metadata of the last five batches per producer (max.in.flight = 5)."""


@dataclass(frozen=True, slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))


class DuplicateBatch(Exception):
    """The batch was already written; ``meta`` holds its offsets for the answer."""

    def __init__(self, meta: BatchMeta) -> None:
        super().__init__(f"duplicate of batch at offset {meta.base_offset}")
        self.meta = meta


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


def _last_seq(first: int, record_count: int) -> int:
    last = first + record_count - 1
    return last - INT32_MAX - 1 if last > INT32_MAX else last


class ProducerStateTable:
    """Sequence state of every idempotent producer, per partition."""

    def __init__(self) -> None:
        self._entries: dict[tuple[TopicPartition, int], ProducerEntry] = {}

    def check(
        self, tp: TopicPartition, producer_id: int, epoch: int, first_seq: int, record_count: int
    ) -> None:
        """Raise DuplicateBatch or KafkaError if the batch must not be appended."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self._entries.get((tp, producer_id))
        if entry is None:
            return
        if epoch < entry.epoch:
            raise KafkaError(
                f"producer {producer_id} epoch {epoch} is older than the current epoch "
                f"{entry.epoch} on {tp}",
                ErrorCode.INVALID_PRODUCER_EPOCH,
            )
        if epoch > entry.epoch:
            if first_seq != 0:
                raise KafkaError(
                    f"producer {producer_id} started epoch {epoch} on {tp} at sequence "
                    f"{first_seq}, not 0",
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                )
            return
        last_seq = _last_seq(first_seq, record_count)
        for meta in entry.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                raise DuplicateBatch(meta)
        if entry.batches and first_seq != _next_seq(entry.batches[-1].last_seq):
            raise KafkaError(
                f"producer {producer_id} sent sequence {first_seq} on {tp}; expected "
                f"{_next_seq(entry.batches[-1].last_seq)}",
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            )

    def record(
        self,
        tp: TopicPartition,
        producer_id: int,
        epoch: int,
        first_seq: int,
        record_count: int,
        base_offset: int,
        last_offset: int,
    ) -> None:
        """Remember an appended batch."""
        if producer_id == NO_PRODUCER_ID:
            return
        key = (tp, producer_id)
        entry = self._entries.get(key)
        if entry is None or entry.epoch != epoch:
            entry = ProducerEntry(epoch)
            self._entries[key] = entry
        entry.batches.append(
            BatchMeta(first_seq, _last_seq(first_seq, record_count), base_offset, last_offset)
        )

    def record_batches(self, tp: TopicPartition, records: bytes | bytearray | memoryview) -> int:
        """Remember every idempotent batch in ``records`` (whole v2 batches that already carry
        their offsets, as a follower appends them); returns the batches seen."""
        seen = 0
        for h in iter_batches(records, check_crc=False):
            self._remember(tp, h)
            seen += 1
        return seen

    def _remember(self, tp: TopicPartition, h: BatchHeader) -> None:
        if h.producer_id >= 0 and not h.is_control:
            self.record(
                tp,
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.record_count,
                h.base_offset,
                h.last_offset,
            )

    def rebuild(self, tp: TopicPartition, partition_log: Log, *, tail_offsets: int = 20_000) -> int:
        """Forget ``tp``'s producers and read them again from the last ``tail_offsets``
        offsets of its log (Kafka reads snapshots and the log after them); returns the
        batches seen. Raises KafkaError if the log cannot be read."""
        self.forget_partition(tp)
        seen = 0
        offset = max(partition_log.log_start_offset, partition_log.log_end_offset - tail_offsets)
        end = partition_log.log_end_offset
        while offset < end:
            chunk = partition_log.read(offset, 4 << 20)
            if not chunk.records:
                break
            before = seen
            for h in iter_batches(chunk.records, check_crc=False):
                self._remember(tp, h)
                seen += 1
                offset = h.next_offset
            if seen == before:
                break
        return seen

    def forget_partition(self, tp: TopicPartition) -> None:
        for key in [k for k in self._entries if k[0] == tp]:
            del self._entries[key]


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
