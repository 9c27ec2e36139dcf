"""Where produce and fetch requests wait (Kafka's ``DelayedOperationPurgatory`` with its
``DelayedProduce`` and ``DelayedFetch``).

An acks=all produce waits until the high watermark passes what it appended; a fetch that found
fewer than ``min_bytes`` waits for more data, up to ``max_wait_ms``. Both are woken by one
event, :meth:`Purgatory.notify`, called after anything that may complete them: an append, a
follower fetch that moved a high watermark, a metadata change (a new ISR or leader). Every
waiter re-checks its own condition when woken. Kafka keys its watchers by partition so that an
append completes only that partition's waiters; here one event wakes them all, which costs one
check per waiting request per append -- a few waiting requests per broker in practice -- and
makes no allocation per append beyond the replaced event.

The completion rules stay with their owners: the append path says when a partition's records
are committed (:class:`CommitView`), the read path reads one round of a fetch
(:class:`FetchRounds`). This module only runs the waits.

Event loop only (not thread-safe).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Protocol

from spindle.broker.common.clock import Clock
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition

from .requests import FetchParams


class CommitView(Protocol):
    """What an acks=all wait asks of the append path, per partition."""

    node_id: int

    def led_epoch(self, tp: TopicPartition) -> int | None:
        """The leader epoch this broker leads ``tp`` at, None if it does not lead it."""

    def high_watermark(self, tp: TopicPartition) -> int | None:
        """The high watermark of the local replica of ``tp``, None if there is none."""

    def isr_shortfall(self, tp: TopicPartition) -> str | None:
        """Why the ISR of ``tp`` is below ``min.insync.replicas``, None if it is not."""


class FetchRounds(Protocol):
    """What a waiting fetch asks of the read path (:class:`~.reads.LeaderReads`)."""

    def read_round(self, params: FetchParams, due: float | None) -> tuple[int, bool, bool]:
        """Read every partition of the fetch again: (bytes, any partition failed, the
        replication throttle held any back). ``due``: when a held-back read was due."""

    def release(self, params: FetchParams) -> None:
        """Drop what the last round read (it will not be sent): close its file ranges."""

    def throttle_delay(self) -> float:
        """Seconds until the leader quota lets held-back data out again."""


def fetch_satisfied(total: int, any_error: bool, remaining: float, min_bytes: int) -> bool:
    """Kafka's DelayedFetch completion: enough bytes, an error to answer, the wait is over,
    or the fetch asked not to wait (``min_bytes`` 0)."""
    return total >= min_bytes or any_error or remaining <= 0 or min_bytes == 0


class Purgatory:
    """The waits of the data path (see module docstring). Event loop only."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._event = asyncio.Event()

    def notify(self) -> None:
        """Wake every waiting request to re-check (one event per call, replaced)."""
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout_s: float) -> None:
        """Until the next :meth:`notify` or ``timeout_s`` (no error on timeout)."""
        event = self._event
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=max(timeout_s, 0.0))

    async def wait_committed(
        self, partitions: CommitView, ends: Mapping[TopicPartition, int], timeout_s: float
    ) -> dict[TopicPartition, KafkaError]:
        """DelayedProduce: wait until each partition's high watermark reaches its end offset
        in ``ends`` (call it right after the appends: their leader epochs are read at once).
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
        epochs = {tp: partitions.led_epoch(tp) for tp in ends}
        while True:
            for tp, end in list(pending.items()):
                hw = partitions.high_watermark(tp)
                if epochs[tp] is None or partitions.led_epoch(tp) != epochs[tp]:
                    del pending[tp]
                    failed[tp] = KafkaError(
                        f"broker {partitions.node_id} no longer leads {tp} at leader epoch "
                        f"{epochs[tp]}",
                        ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    )
                elif hw is not None and hw >= end:
                    del pending[tp]
                    shortfall = partitions.isr_shortfall(tp)
                    if shortfall is not None:
                        failed[tp] = KafkaError(
                            shortfall, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                        )
            remaining = deadline - loop.time()
            if not pending or remaining <= 0:
                break
            await self.wait(remaining)
        for tp in pending:
            failed[tp] = KafkaError(
                f"{tp} was not replicated to the in-sync replicas in time",
                ErrorCode.REQUEST_TIMED_OUT,
            )
        return failed

    async def delayed_fetch(
        self,
        rounds: FetchRounds,
        params: FetchParams,
        *,
        deadline: float,
        now: float,
        min_bytes: int,
        held: bool,
    ) -> None:
        """DelayedFetch: a fetch whose first round (read at ``now``) did not satisfy it reads
        again on every wake-up until it does or ``deadline`` (the request's clock) passes.
        ``held``: the replication throttle left a partition out of the last round; it is read
        again once the leader quota allows, and what is read then counts from that moment (a
        late wake-up costs no rate)."""
        while True:
            rounds.release(params)
            remaining = deadline - now
            due: float | None = None
            if held:
                wait = max(rounds.throttle_delay(), 0.001)
                due = now + wait
                remaining = min(remaining, wait)
            await self.wait(remaining)
            total, any_error, held = rounds.read_round(params, due)
            now = self._clock.monotonic()
            if fetch_satisfied(total, any_error, deadline - now, min_bytes):
                return
