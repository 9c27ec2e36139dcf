"""The broker-byte phase's skip check (``byte_phases._window_fails``) against the search it
stands for: ``Placer.shed`` tries, per directory, the ``TRIES`` replicas from the best fit
for ``need`` down and the ``TRIES`` before it up to ``room`` bytes; the donor is skipped only
when none of those may join the taker's rack, and a failure is remembered for every
``need`` and ``room`` it names."""

from __future__ import annotations

import numpy as np
from spindle.rebalance.byte_phases import _window_fails
from spindle.rebalance.placement import TRIES


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
