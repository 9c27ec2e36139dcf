"""The broker-byte phase's skip check (``byte_phases._window_fails``) against the search it
stands for: ``Placer.shed`` tries, per directory, the ``TRIES`` replicas from the best fit
for ``need`` down and the ``TRIES`` before it up to ``room`` bytes; the donor is skipped only
when none of those may join the taker's rack, and a failure is remembered for every
``need`` and ``room`` it names."""

from __future__ import annotations

import numpy as np
from spindle.rebalance.search.byte_phases import _window_fails
from spindle.rebalance.search.placement import TRIES


def _tries_one(size: np.ndarray, ok: np.ndarray, need: float, room: float) -> bool:
    """The replicas the search tries, by their definition: sizes descending, cut at
    ``need``; whether one of them may join (``ok``)."""
    k = int((size > need).sum())
    if ok[k : k + TRIES].any():
        return True
    up = slice(max(k - TRIES, 0), k)
    return bool((ok[up] & (size[up] <= room)).any())


def test_a_skipped_donor_tries_no_replica_that_may_join_for_any_need_it_is_remembered_for() -> None:
    rng = np.random.default_rng(15)
    for _ in range(300):
        n = int(rng.integers(1, 200))
        size = np.sort(rng.integers(1, 60, n))[::-1].astype(np.float64)  # ties included
        ok = rng.random(n) < rng.choice([0.02, 0.1, 0.5])
        neg = (-size).astype(np.int64).tolist()
        sizes = size.tolist()
        oks = np.flatnonzero(ok).tolist()
        for _ in range(20):
            need = float(rng.integers(0, 70)) + float(rng.choice([0.0, 0.5]))
            room = float(rng.integers(0, 70))
            got = _window_fails(neg, sizes, oks, need, room)
            assert (got is None) == _tries_one(size, ok, need, room)
            if got is None:
                continue
            lo, hi, room_max = got
            assert lo <= need < hi
            assert room < room_max
            for need2 in np.linspace(max(lo, 0.0), min(hi, 70.0), 15):
                if lo <= need2 < hi:
                    for room2 in (0.0, room, min(room_max, 80.0) - 0.5):
                        if room2 < room_max:
                            assert not _tries_one(size, ok, float(need2), room2)


class _Reads(Exception):
    """``may_give`` went past its record to the donor's replicas."""


def test_surely_fail_refuses_exactly_the_donors_may_give_refuses_from_its_record() -> None:
    from types import SimpleNamespace

    from spindle.rebalance.search.byte_phases import _Windows

    rng = np.random.default_rng(7)
    n_b, n_r = 40, 3
    pl = SimpleNamespace(
        _broker_rack=rng.integers(0, n_r, n_b).tolist(),
        c=SimpleNamespace(n_brokers=n_b),
        g=SimpleNamespace(rack_aware=True),
        _ver=rng.integers(0, 3, n_b).tolist(),
        _closed_b=rng.random(n_b) < 0.2,
    )
    pl.touched = lambda b: pl._ver[b]
    w = _Windows(pl)  # type: ignore[arg-type]

    def reads(donor: int) -> None:
        raise _Reads

    w._of = reads  # type: ignore[assignment,method-assign]
    shape = w.no_ver.shape
    w.no_ver[:] = rng.integers(-1, 3, shape)
    w.no_lo[:] = rng.choice([-np.inf, 0.0, 10.0, 20.0], shape)
    w.no_hi[:] = rng.choice([5.0, 15.0, 25.0, np.inf], shape)
    w.no_room[:] = rng.choice([0.0, 8.0, np.inf], shape)
    donors = np.arange(n_b)
    for _ in range(50):
        rack = int(rng.integers(0, n_r))
        need = rng.integers(0, 30, n_b).astype(np.float64)
        room = rng.integers(0, 12, n_b).astype(np.float64)
        got = w.surely_fail(donors, rack, need, room)
        for d in range(n_b):
            try:
                refused = not w.may_give(d, rack, float(need[d]), float(room[d]))
            except _Reads:
                refused = False
            assert bool(got[d]) == (refused and not pl._closed_b[d])
