"""Leader-epoch rules of replication (KIP-101, KIP-279, KIP-320, KIP-595's divergingEpoch):
which requests a replica fences, where a leader sees a follower's log diverge, and where a
follower truncates to. Pure: no I/O, no event loop; the replica manager (leader side) and the
fetcher (follower side) apply them to their logs.

* **Fencing** (Kafka's ``Partition.checkCurrentLeaderEpoch``): a request carrying a
  ``currentLeaderEpoch`` older than this broker's is FENCED_LEADER_EPOCH (the sender's metadata
  is stale); a newer one is UNKNOWN_LEADER_EPOCH (this broker's is); -1 is not checked.
* **Divergence** (``Partition.fetchRecords``): a follower fetching from offset ``o`` whose
  last fetched batch had epoch ``e`` diverges when the leader's answer for ``e`` is an older
  epoch, or ends before ``o``; the leader then sends that answer as ``divergingEpoch`` and no
  records, and does not count the fetch as the follower's position.
* **Truncation** (``AbstractFetcherThread.getOffsetTruncationState``): given the leader's
  (epoch, end offset) for the follower's latest epoch, the follower keeps only what both logs
  share: up to the smaller of the two ends of that epoch. If the follower never had the epoch
  the leader answered with, it cuts to the end of its own largest epoch below it and asks again
  (``complete`` False). A leader that knows no epochs (end -1) leaves the follower its high
  watermark, the rule before KIP-101.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition

NO_EPOCH = -1
"""A request field that carries no epoch (``RecordBatch.NO_PARTITION_LEADER_EPOCH``)."""
UNDEFINED_OFFSET = -1

EpochEnd = tuple[int, int]
"""(leader epoch, end offset) as OffsetsForLeaderEpoch answers it; (-1, -1) = unknown."""


def check_current_epoch(tp: TopicPartition, local: int, requested: int) -> None:
    """Raise FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH unless ``requested`` (the sender's
    current leader epoch of ``tp``) is -1 or this broker's ``local`` epoch."""
    if requested in (NO_EPOCH, local):
        return
    if requested < local:
        raise KafkaError(
            f"leader epoch {requested} of {tp} is older than the current epoch {local}",
            ErrorCode.FENCED_LEADER_EPOCH,
        )
    raise KafkaError(
        f"leader epoch {requested} of {tp} is newer than the epoch {local} this broker knows",
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    )


def diverging_epoch(
    leader_end: EpochEnd, last_fetched_epoch: int, fetch_offset: int
) -> EpochEnd | None:
    """The leader's ``divergingEpoch`` answer to a fetch from ``fetch_offset`` whose previous
    batch had ``last_fetched_epoch``, given the leader's ``leader_end`` for that epoch; None
    if the follower's log is a prefix of the leader's (or it sent no epoch)."""
    if last_fetched_epoch == NO_EPOCH:
        return None
    epoch, end = leader_end
    if epoch < last_fetched_epoch or end < fetch_offset:
        return leader_end
    return None


@dataclass(frozen=True)
class Truncation:
    """Where a follower truncates to, and whether it is done (else it asks the leader again
    with its new latest epoch)."""

    offset: int
    complete: bool


def truncation_point(
    leader_end: EpochEnd,
    *,
    local_end_for: Callable[[int], EpochEnd],
    log_end_offset: int,
    high_watermark: int,
) -> Truncation:
    """Where the follower truncates to, given the leader's ``leader_end`` for the follower's
    latest epoch (see module docstring); ``local_end_for`` is the follower's own answer."""
    epoch, end = leader_end
    if end == UNDEFINED_OFFSET:
        return Truncation(min(high_watermark, log_end_offset), True)
    if epoch == NO_EPOCH:
        return Truncation(min(end, log_end_offset), True)
    local_epoch, local_end = local_end_for(epoch)
    if local_end == UNDEFINED_OFFSET:
        # The follower knows no epoch at or below the leader's: the leader's end stands.
        return Truncation(min(end, log_end_offset), True)
    if local_epoch != epoch:
        return Truncation(min(local_end, log_end_offset), False)
    return Truncation(min(local_end, end, log_end_offset), True)
