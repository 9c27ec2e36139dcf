"""The leader's replica bookkeeping (``replication.isr``) on fake time: high watermark from the
ISR's log ends, ISR expansion once caught up, shrink after ``replica.lag.time.max.ms``; and the
follower's handling of a cut last batch (``fetcher.whole_batches``)."""

from __future__ import annotations

import struct

from spindle.broker.replication.fetcher import whole_batches
from spindle.broker.replication.isr import LeaderState

LAG_S = 30.0


def leader(isr: list[int], *, leo: int = 10, hw: int = 10, now: float = 0.0) -> LeaderState:
    return LeaderState.become_leader(
        node_id=1,
        replicas=[1, 2, 3],
        isr=isr,
        leader_epoch=4,
        log_end_offset=leo,
        high_watermark=hw,
        now=now,
    )


def test_high_watermark_is_the_smallest_log_end_in_the_isr() -> None:
    state = leader([1, 2, 3])
    # The leader appended up to 20; followers have not fetched yet: nothing new is committed.
    assert state.advance_high_watermark(20) == 10
    state.on_fetch(2, 20, 20, now=1.0)
    assert state.advance_high_watermark(20) == 10  # 3 still lacks 10..19
    state.on_fetch(3, 15, 20, now=1.0)
    assert state.advance_high_watermark(20) == 15
    state.on_fetch(3, 20, 20, now=2.0)
    assert state.advance_high_watermark(20) == 20


def test_high_watermark_never_moves_back() -> None:
    state = leader([1, 2], hw=10)
    state.on_fetch(2, 5, 10, now=1.0)  # a follower that truncated asks from below
    assert state.advance_high_watermark(10) == 10


def test_follower_outside_the_isr_does_not_hold_the_high_watermark_back() -> None:
    state = leader([1, 2])
    state.on_fetch(2, 30, 30, now=1.0)
    assert state.advance_high_watermark(30) == 30  # 3 is not in the ISR


def test_caught_up_follower_is_proposed_for_the_isr() -> None:
    state = leader([1, 2], leo=10, hw=10)
    state.on_fetch(3, 8, 10, now=1.0)
    assert state.to_expand() == []
    state.on_fetch(3, 10, 10, now=2.0)
    assert state.to_expand() == [3]


def test_follower_must_reach_the_leaders_epoch_start_to_join() -> None:
    # Leader took over with log end 50 but high watermark 40 (the old leader's last commit).
    state = leader([1, 2], leo=50, hw=40)
    state.on_fetch(3, 45, 50, now=1.0)
    assert state.to_expand() == []
    state.on_fetch(3, 50, 50, now=2.0)
    assert state.to_expand() == [3]


def test_lagging_follower_leaves_the_isr_after_the_lag_time() -> None:
    state = leader([1, 2, 3], now=0.0)
    state.on_fetch(2, 10, 10, now=5.0)
    state.on_fetch(3, 10, 10, now=5.0)
    # The leader moves on to 20; follower 3 keeps fetching but never catches up.
    state.on_fetch(2, 20, 20, now=20.0)
    state.on_fetch(3, 12, 20, now=20.0)
    assert state.to_shrink(20, now=30.0, lag_max_s=LAG_S) == []
    state.on_fetch(2, 20, 20, now=36.0)
    assert state.to_shrink(20, now=36.0, lag_max_s=LAG_S) == [3]


def test_idle_follower_with_nothing_to_fetch_stays_in_sync() -> None:
    state = leader([1, 2], now=0.0)
    state.on_fetch(2, 10, 10, now=1.0)
    # No appends for a long time: the follower is at the log end, so it is not lagging.
    assert state.to_shrink(10, now=1000.0, lag_max_s=LAG_S) == []


def test_new_replicas_from_a_reassignment_get_tracked() -> None:
    state = leader([1, 2, 3])
    state.update_metadata([1, 2, 3, 4], [1, 2, 3], now=3.0)
    state.on_fetch(4, 10, 10, now=4.0)
    assert state.to_expand() == [4]
    state.update_metadata([1, 4], [1, 4], now=5.0)
    assert sorted(state.followers) == [4]


def _batch(base: int, body: bytes) -> bytes:
    return struct.pack(">qi", base, len(body)) + body


def test_a_cut_last_batch_is_left_for_the_next_fetch() -> None:
    first, second = _batch(0, b"x" * 40), _batch(1, b"y" * 40)
    assert whole_batches(first + second) == first + second
    assert whole_batches(first + second[:30]) == first
    assert whole_batches(first[:5]) == b""


def test_a_follower_out_of_the_isr_must_fetch_again_before_it_may_rejoin() -> None:
    state = leader([1, 2, 3])
    state.on_fetch(3, 10, 10, now=1.0)  # caught up, then it dies and the controller drops it
    state.update_metadata([1, 2, 3], [1, 2], now=2.0)
    assert state.to_expand() == []  # its old position does not count
    state.on_fetch(3, 10, 10, now=3.0)  # back, and caught up by a fetch of its own
    assert state.to_expand() == [3]
