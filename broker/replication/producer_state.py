"""Idempotent-producer sequence checks, per partition and producer id (Kafka's
``ProducerStateManager``/``ProducerAppendInfo``, reduced to what a non-transactional producer
needs). Pure bookkeeping: no I/O, not thread-safe (used from the event loop only).

Rules, as Kafka applies them to one batch with producer id P, epoch E, sequences [s, t]:

- E older than P's epoch: INVALID_PRODUCER_EPOCH (a fenced, zombie producer).
- E newer than P's epoch: a bumped producer; its first sequence must be 0.
- [s, t] equal to one of the last five batches of P: a retry of a batch already written ->
  answered with the original offsets, nothing written again (DUPLICATE dropped).
- otherwise s must follow the last sequence (t_last + 1, wrapping after int32 max), else
  OUT_OF_ORDER_SEQUENCE_NUMBER.
- P unknown here (a new producer, or one whose batches lie beyond the tail the broker reads
  at start-up): accepted as the start of P. At start-up the broker replays the last batches of
  every log into this table (``ReplicaManager.load_producer_state``), as Kafka rebuilds its
  producer state from the log, so retries across a restart are still recognised.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition

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

    def forget_partition(self, tp: TopicPartition) -> None:
        for key in [k for k in self._entries if k[0] == tp]:
            del self._entries[key]
