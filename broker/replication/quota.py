"""Replication throttles (Kafka's ``ReplicationQuotaManager``): the leader and follower
byte-rate quotas that ``kafka-reassign-partitions --throttle`` and ``kafka-configs`` set.

Two dynamic broker configs give the rates (bytes/second; unset = unlimited):
``leader.replication.throttled.rate`` caps the bytes a leader returns to followers for its
throttled partitions, ``follower.replication.throttled.rate`` the bytes a follower fetches for
its throttled partitions. Which partitions are throttled is per topic
(``leader/follower.replication.throttled.replicas``, parsed by
:mod:`spindle.broker.common.throttled_replicas`): an entry ``partition:broker`` naming this
broker. As in Kafka, only replicas *outside* the ISR are held back (a reassignment's adding
replicas, a replica catching up); in-sync followers are never slowed, but their bytes of
throttled partitions still count against the quota.

Semantics, as in Kafka: when the quota is exceeded, a throttled partition's data is left out
of the fetch response (the leader) or out of the fetch request (the follower) -- the fetch is
not failed, the partition simply gets nothing this round.

The quota itself is a virtual-time meter (the generic cell rate algorithm), not Kafka's sampled
rate over 11 one-second windows: each recorded byte count pushes a "free at" time forward by
``bytes / rate`` from ``max(free at, now)``; the quota is exceeded while "free at" lies in the
future. So data is only ever admitted when the meter is not ahead of real time, and the bytes
admitted over any interval of length ``T`` are at most ``rate * T`` plus the one response
admitted last. That response is what makes a low rate lumpy: a follower asks up to 1 MiB of
every partition it copies, so unchecked one response could carry seconds of quota and the
partitions then wait as long (measured on the node: 1.36x the rate over a 7 MB move, the
first lump landing inside the measured span). Spindle cuts each throttled partition's read in
a response to :data:`READ_SLICE_S` of the rate (storage still returns one whole batch), so a
response is a fraction of a second of quota; above ~10 MB/s the slice exceeds 1 MiB and
nothing changes. Kafka has no such cut; its sampled rate hides the lumps in its windows. Kafka's sampled rate allows a burst of up to ten windows' worth
after an idle period (the rate is averaged over the full sample span); the meter allows none,
which is what makes the measured rate of a throttled reassignment match the set rate. Idle
time earns no credit; the only lateness forgiven is the quota's own: bytes read after waiting
for the quota count from when the wait was due to end (``record(at=...)``), so a wake-up that
a loaded machine delivers late does not lower the rate. Hand-written because it is a dozen lines over the injected clock.

:class:`FollowerPacer` applies the follower's quota to the fetcher's rounds; the leader's is
applied by the read path (:mod:`.reads`).

Pure logic over an injected clock and the in-memory metadata; event loop only (not
thread-safe).
"""

from __future__ import annotations

from collections.abc import Mapping

from spindle.broker.common.clock import Clock
from spindle.broker.common.ids import TopicPartition
from spindle.broker.common.throttled_replicas import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    parse_throttled_replicas,
)

from .metadata import MetadataView, find_partition

UNLIMITED = (1 << 63) - 1

READ_SLICE_S = 0.1
"""A throttled partition's read is cut to what the quota admits in this long: a follower asks
up to 1 MiB per partition, and several partitions read at once when the quota is not yet
exceeded would otherwise pass a low rate's seconds' worth in one response (7 partitions at
512 kB/s: 14 s of quota in the first fetch). Storage still returns at least one whole batch."""


class ReplicationQuota:
    """One byte-rate quota (see module docstring). ``rate`` None or UNLIMITED = no quota."""

    def __init__(self, *, clock: Clock, rate: int | None = None) -> None:
        self._clock = clock
        self._rate = UNLIMITED
        self._free_at = 0.0
        self.recorded_bytes = 0
        """Bytes recorded since start (metrics and tests)."""
        self.set_rate(rate)

    @property
    def rate(self) -> int:
        return self._rate

    @property
    def unlimited(self) -> bool:
        return self._rate >= UNLIMITED

    def set_rate(self, rate: int | None) -> None:
        """Change the rate now (a dynamic config change). Debt owed at the old rate is
        rescaled to the new one, so lowering the rate holds the partition back at once and
        raising it frees it sooner; switching the quota off forgets the debt."""
        new = UNLIMITED if rate is None or rate <= 0 or rate >= UNLIMITED else int(rate)
        now = self._clock.monotonic()
        if new >= UNLIMITED or self._rate >= UNLIMITED:
            self._free_at = now
        else:
            debt_bytes = max(0.0, self._free_at - now) * self._rate
            self._free_at = now + debt_bytes / new
        self._rate = new

    def is_exceeded(self) -> bool:
        """True while the bytes recorded so far are ahead of the rate."""
        return not self.unlimited and self._free_at > self._clock.monotonic()

    def delay(self) -> float:
        """Seconds until :meth:`is_exceeded` turns false (0 if it is false now)."""
        if self.unlimited:
            return 0.0
        return max(0.0, self._free_at - self._clock.monotonic())

    def now(self) -> float:
        return self._clock.monotonic()

    def read_slice(self) -> int | None:
        """Most bytes one read of a throttled partition takes (:data:`READ_SLICE_S` of the
        rate, at least 1); None when unlimited."""
        if self.unlimited:
            return None
        return max(int(self._rate * READ_SLICE_S), 1)

    def record(self, nbytes: int, *, at: float | None = None) -> None:
        """Count ``nbytes`` of throttled replication traffic against the quota, admitted at
        ``at`` (default now). A follower passes the time it sent the fetch -- when it decided
        the partition may fetch -- so the time the bytes spent on the wire is not lost to the
        rate; the leader records when it reads."""
        if nbytes <= 0:
            return
        self.recorded_bytes += nbytes
        if self.unlimited:
            return
        start = self._clock.monotonic() if at is None else min(at, self._clock.monotonic())
        self._free_at = max(self._free_at, start) + nbytes / self._rate


def _covers(configs: Mapping[str, str], key: str, partition: int, broker: int) -> bool:
    value = configs.get(key)
    if not value:
        return False
    try:
        return parse_throttled_replicas(value).covers(partition, broker)
    except ValueError:
        return False  # refused when set; an unparsable stored value throttles nothing


class ReplicationThrottles:
    """This broker's leader and follower quotas, and which of its replicas they apply to."""

    def __init__(self, *, node_id: int, clock: Clock) -> None:
        self.node_id = node_id
        self.leader = ReplicationQuota(clock=clock)
        self.follower = ReplicationQuota(clock=clock)

    def set_rates(self, effective: Mapping[str, str]) -> None:
        """Apply the effective broker configs' ``leader/follower.replication.throttled.rate``
        (unset = unlimited)."""
        for quota, key in ((self.leader, LEADER_RATE), (self.follower, FOLLOWER_RATE)):
            raw = effective.get(key)
            rate = int(raw) if raw is not None and raw.strip().lstrip("-").isdigit() else None
            if rate != (None if quota.unlimited else quota.rate):
                quota.set_rate(rate)

    def leader_throttled(self, configs: Mapping[str, str], partition: int) -> bool:
        """Is this broker's (leader) replica of the partition throttled?"""
        return _covers(configs, LEADER_REPLICAS, partition, self.node_id)

    def follower_throttled(self, configs: Mapping[str, str], partition: int) -> bool:
        """Is this broker's (follower) replica of the partition throttled?"""
        return _covers(configs, FOLLOWER_REPLICAS, partition, self.node_id)


class FollowerPacer:
    """The follower side of the replication throttles (Kafka's ``shouldFollowerThrottle``):
    which followed partitions sit out a fetch round, and counting what was fetched (the
    fetcher's :class:`~.fetcher.FetchPacer`)."""

    def __init__(self, metadata: MetadataView, throttles: ReplicationThrottles) -> None:
        self._metadata = metadata
        self._throttles = throttles

    def _throttled(self, tp: TopicPartition) -> tuple[bool, bool]:
        """(throttled here, this broker in the ISR) for a followed partition."""
        found = find_partition(self._metadata, tp)
        if found is None:
            return False, True
        topic, part = found
        throttles = self._throttles
        return (
            throttles.follower_throttled(topic.configs, tp.partition),
            throttles.node_id in part.isr,
        )

    def hold(self, tp: TopicPartition) -> bool:
        """Leave ``tp`` out of the next fetch: quota exceeded, throttled, not in the ISR."""
        quota = self._throttles.follower
        if quota.unlimited or not quota.is_exceeded():
            return False
        throttled, in_sync = self._throttled(tp)
        return throttled and not in_sync

    def fetched(self, tp: TopicPartition, nbytes: int, sent_at: float) -> None:
        """Count fetched bytes of a throttled partition, admitted when the fetch was sent."""
        if nbytes > 0 and self._throttled(tp)[0]:
            self._throttles.follower.record(nbytes, at=sent_at)

    def delay(self) -> float:
        return self._throttles.follower.delay()

    def now(self) -> float:
        return self._throttles.follower.now()
