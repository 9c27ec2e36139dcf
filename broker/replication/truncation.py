"""A follower's truncation after a leader change (KIP-101/279), applied to its log: the
OffsetsForLeaderEpoch request it sends the leader, the answers it reads back, and the cut
itself (:func:`~.leader_epochs.truncation_point` decides where). Used by :mod:`.fetcher`;
event loop only (the log calls are synchronous and take the partition lock).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from spindle.broker.common.errors import KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.storage import Log

from .leader_epochs import EpochEnd, truncation_point

with warnings.catch_warnings():  # kafka-python's schema classes warn on import
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest

log = logging.getLogger(__name__)

OFFSETS_FOR_LEADER_EPOCH_VERSION = 4
"""What Kafka's own followers send (v3 added ReplicaId, v4 is the flexible form)."""

_Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
_Partition = _Topic.OffsetForLeaderPartition


def offsets_for_leader_epoch_request(
    node_id: int, asks: Mapping[TopicPartition, tuple[int, int]]
) -> Any:
    """OffsetsForLeaderEpoch from follower ``node_id`` for ``asks``: partition ->
    (current leader epoch, the follower's latest epoch)."""
    by_topic: dict[str, list[Any]] = {}
    for tp, (current, latest) in sorted(asks.items()):
        by_topic.setdefault(tp.topic, []).append(
            _Partition(partition=tp.partition, current_leader_epoch=current, leader_epoch=latest)
        )
    return OffsetForLeaderEpochRequest[OFFSETS_FOR_LEADER_EPOCH_VERSION](
        replica_id=node_id,
        topics=[_Topic(topic=t, partitions=parts) for t, parts in by_topic.items()],
    )


def epoch_answers(response: Any) -> Iterator[tuple[TopicPartition, int, EpochEnd]]:
    """(partition, error code, (leader epoch, end offset)) of each answer in ``response``."""
    for t in response.topics:
        for p in t.partitions:
            yield TopicPartition(t.topic, p.partition), p.error_code, (p.leader_epoch, p.end_offset)


def truncate_to_leader(tp: TopicPartition, replica: Log, leader_end: EpochEnd, leader: int) -> bool:
    """Cut ``replica`` where it parts from the leader's log, given the leader's answer for the
    replica's latest epoch (from OffsetsForLeaderEpoch or a fetch's ``divergingEpoch``); True
    when done, False when the leader must be asked again with the new latest epoch (or the
    replica's directory failed: it is not fetched again)."""
    cut = truncation_point(
        leader_end,
        local_end_for=replica.end_offset_for_epoch,
        log_end_offset=replica.log_end_offset,
        high_watermark=replica.high_watermark,
    )
    # Logged whether or not anything is cut, as Kafka logs each truncation decision.
    log.info(
        "%s: leader %d ends epoch %d at %d; log end %d -> %d%s",
        tp,
        leader,
        leader_end[0],
        leader_end[1],
        replica.log_end_offset,
        cut.offset,
        "" if cut.complete else " (asking again)",
    )
    # Even at the log end: an epoch this replica started there as leader and never appended
    # in goes too, else it stays the latest epoch, which the leader never had, and every
    # fetch is answered divergingEpoch again without a record.
    try:
        replica.truncate_to(cut.offset)
    except KafkaStorageError as exc:
        # Its directory just failed: the replica goes offline and is not fetched again
        # (it truncates at the next start-up); the other partitions go on.
        log.warning("%s: cannot truncate to %d: %s", tp, cut.offset, exc)
        return False
    return cut.complete


def truncate_without_epochs(tp: TopicPartition, replica: Log) -> bool:
    """A replica that knows no leader epoch (written before leaders stamped them) keeps only
    what was committed: it truncates to its high watermark (the rule before KIP-101). False if
    its directory failed meanwhile."""
    hw = replica.high_watermark
    if replica.log_end_offset > hw:
        log.info("%s: no leader epochs; truncating %d -> %d", tp, replica.log_end_offset, hw)
        try:
            replica.truncate_to(hw)
        except KafkaStorageError as exc:
            log.warning("%s: cannot truncate to %d: %s", tp, hw, exc)
            return False
    return True
