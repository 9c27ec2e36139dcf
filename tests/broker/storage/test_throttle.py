"""The movers' shared throttle, on fake time."""

from __future__ import annotations

import threading

from spindle.broker.storage.throttle import (
    STEP_MAX,
    STEP_MIN,
    UNLIMITED,
    Throttle,
    unthrottled_step,
)

from .conftest import FakeClock


def test_throttle_holds_the_rate_over_a_window_within_one_chunk(clock: FakeClock) -> None:
    throttle = Throttle(10_000_000, clock=clock)
    chunk = throttle.chunk_size()
    assert chunk == 500_000  # 1/20 s of the rate
    start = clock.monotonic()
    copied = 0
    while clock.monotonic() - start < 4.0:
        assert throttle.acquire(chunk)
        copied += chunk
    achieved = copied / (clock.monotonic() - start)
    assert abs(achieved / 10_000_000 - 1) < chunk / (4 * 10_000_000) + 1e-9


def test_rate_change_applies_at_once_and_forgets_old_reservations(clock: FakeClock) -> None:
    throttle = Throttle(1_000_000, clock=clock)
    throttle.reserve(5_000_000)  # books 5 s at the slow rate
    throttle.set_rate(100_000_000)
    assert throttle.reserve(1_000_000) == 0.0


def test_unlimited_never_waits_and_cancel_stops_a_wait(clock: FakeClock) -> None:
    assert Throttle((1 << 63) - 1, clock=clock).reserve(1 << 40) == 0.0
    throttle = Throttle(1000, clock=clock)
    throttle.reserve(10_000)
    cancelled = threading.Event()
    cancelled.set()
    assert not throttle.acquire(1000, cancelled)


def test_an_unthrottled_step_takes_about_50_ms_between_8_and_64_mib() -> None:
    assert unthrottled_step(8 << 20, 0.0027) == STEP_MAX  # page-cache pace: the largest
    assert unthrottled_step(8 << 20, 0.0) == STEP_MAX
    disk_200mbps = unthrottled_step(8 << 20, (8 << 20) / 200e6)
    assert 9.5e6 < disk_200mbps < 10.5e6  # 50 ms at 200 MB/s
    assert unthrottled_step(8 << 20, (8 << 20) / 20e6) == STEP_MIN  # slower disks: the floor


def test_a_set_rate_sizes_chunks_by_the_rate_whatever_the_unthrottled_step(
    clock: FakeClock,
) -> None:
    assert Throttle(10_000_000, clock=clock).chunk_size(STEP_MAX) == 500_000
    assert Throttle(UNLIMITED, clock=clock).chunk_size(20 << 20) == 20 << 20
