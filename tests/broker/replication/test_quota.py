"""Replication throttles (``replication.quota`` and the throttled-replica lists) on fake time:
the meter admits data only while it is not ahead of the rate, so over any window the
throttled bytes stay within ``rate * window`` plus one fetch; only replicas named by
``partition:broker`` (or ``*``) are throttled; a rate change applies at once."""

from __future__ import annotations

import random

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.throttled_replicas import parse_throttled_replicas
from spindle.broker.controller.controller import ConfigChange, apply_config_changes
from spindle.broker.replication.quota import ReplicationQuota, ReplicationThrottles

from ..fakes import FakeClock

MB = 1_000_000


def _simulate(
    clock: FakeClock, quota: ReplicationQuota, *, seconds: float, fetch_max: int, seed: int
) -> list[tuple[float, int]]:
    """A follower fetching as fast as it can, each fetch of a random size up to
    ``fetch_max``, data left out while the quota is exceeded; (time, bytes) of what got
    through."""
    rng = random.Random(seed)
    admitted = []
    end = clock.monotonic() + seconds
    while clock.monotonic() < end:
        if quota.is_exceeded():
            clock.advance(min(quota.delay(), rng.uniform(0.001, 0.05)))
            continue
        # A fetch decided now; its bytes are known (and recorded, back-dated to the decision)
        # one round trip later.
        decided = clock.monotonic()
        nbytes = rng.randint(fetch_max // 2, fetch_max)
        clock.advance(rng.uniform(0.0001, 0.002))
        quota.record(nbytes, at=decided)
        admitted.append((decided, nbytes))
    return admitted


@pytest.mark.parametrize("rate", [10 * MB, 50 * MB, 300_000])
def test_bytes_in_any_window_never_exceed_the_quota_by_more_than_one_fetch(rate: int) -> None:
    clock = FakeClock()
    quota = ReplicationQuota(clock=clock, rate=rate)
    fetch_max = 1 << 20
    admitted = _simulate(clock, quota, seconds=30, fetch_max=fetch_max, seed=rate)
    for window in (0.1, 1.0, 5.0):
        for i, (start, _n) in enumerate(admitted):
            in_window = sum(n for t, n in admitted[i:] if t < start + window)
            assert in_window <= rate * window + fetch_max, (window, start, in_window)
    # And the long-run rate is the set rate: round trips shorter than a fetch's share of the
    # rate cost nothing, since the follower's bytes count from when it sent the fetch.
    total = sum(n for _t, n in admitted[:-1])
    span = admitted[-1][0] - admitted[0][0]
    assert abs(total / span - rate) / rate < 0.01


def test_idle_time_earns_no_burst() -> None:
    clock = FakeClock()
    quota = ReplicationQuota(clock=clock, rate=MB)
    quota.record(MB)
    clock.advance(60)  # a minute without throttled traffic
    assert not quota.is_exceeded()
    quota.record(MB)  # one fetch gets through ...
    assert quota.is_exceeded()  # ... and the next waits its full second
    assert quota.delay() == pytest.approx(1.0)


def test_rate_change_applies_at_once_and_unlimited_never_holds_back() -> None:
    clock = FakeClock()
    quota = ReplicationQuota(clock=clock, rate=MB)
    quota.record(2 * MB)
    assert quota.delay() == pytest.approx(2.0)
    quota.set_rate(4 * MB)  # raised: the debt is paid at the new rate
    assert quota.delay() == pytest.approx(0.5)
    quota.set_rate(MB // 2)  # lowered: held back longer, at once
    assert quota.delay() == pytest.approx(4.0)
    quota.set_rate(None)  # the config was deleted
    assert quota.unlimited
    assert not quota.is_exceeded()
    assert quota.delay() == 0.0
    quota.record(100 * MB)
    assert not quota.is_exceeded()
    assert quota.recorded_bytes == 102 * MB


def test_throttled_replica_lists_name_partition_broker_pairs_or_everything() -> None:
    throttles = ReplicationThrottles(node_id=2, clock=FakeClock())
    configs = {
        "leader.replication.throttled.replicas": "0:1, 0:2,1:3",
        "follower.replication.throttled.replicas": "*",
    }
    assert throttles.leader_throttled(configs, 0)
    assert not throttles.leader_throttled(configs, 1)  # 1:3 is another broker's replica
    assert throttles.follower_throttled(configs, 7)
    assert not throttles.leader_throttled({}, 0)
    throttles.set_rates({"leader.replication.throttled.rate": "1000"})
    assert throttles.leader.rate == 1000
    assert throttles.follower.unlimited
    throttles.set_rates({})
    assert throttles.leader.unlimited


@pytest.mark.parametrize("bad", ["0-1", "a:1", "0:", "1:-2", "0:1,*"])
def test_malformed_throttled_replica_list_is_invalid_config(bad: str) -> None:
    with pytest.raises(ValueError, match=r"partition:broker|negative"):
        parse_throttled_replicas(bad)
    change = ConfigChange("leader.replication.throttled.replicas", 0, bad)
    with pytest.raises(KafkaError) as err:
        apply_config_changes({}, [change], allowed=frozenset({change.name}))
    assert err.value.code == ErrorCode.INVALID_CONFIG
    assert bad.split(",")[-1].strip() in str(err.value) or bad in str(err.value)


def test_a_late_wake_up_costs_no_rate() -> None:
    clock = FakeClock()
    quota = ReplicationQuota(clock=clock, rate=MB)
    quota.record(MB // 10)
    due = clock.monotonic() + quota.delay()
    clock.advance(quota.delay() + 0.05)  # the event loop woke the waiter 50 ms late
    quota.record(MB // 10, at=due)  # counted from when the wait was due to end
    assert quota.delay() == pytest.approx(0.05)
    # Without ``at`` the 50 ms would be lost: the next read would wait the full 100 ms.
    late = ReplicationQuota(clock=clock, rate=MB)
    late.record(MB // 10)
    clock.advance(0.15)
    late.record(MB // 10)
    assert late.delay() == pytest.approx(0.1)


def test_a_throttled_read_is_cut_to_a_tenth_of_a_second_of_the_rate() -> None:
    """Several throttled partitions read in one fetch before the quota is exceeded take at
    most a slice each, not 1 MiB each (7 x 1 MiB at 512 kB/s was 14 s of quota at once)."""
    quota = ReplicationQuota(clock=FakeClock(), rate=512_000)
    assert quota.read_slice() == 51_200
    quota.set_rate(5)
    assert quota.read_slice() == 1  # never zero: storage still returns one whole batch
    quota.set_rate(None)
    assert quota.read_slice() is None
