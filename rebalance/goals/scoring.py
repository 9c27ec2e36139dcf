"""How a byte move's destination is ranked, from the goals' weights: written once.

A byte move (evacuation, capacity relief, byte balance) ranks each candidate directory by
its broker's utilisation after the move (``BrokerBytes``), its own as a tie-breaker
(``DiskBytes``), and a small cost for each count goal the move would push out of band
(``CountGoal``: counts rank byte moves but do not forbid them). When the move must go
somewhere (``strict=False``), each band it would break adds that goal's ``MISS_WEIGHT``
instead of refusing. Count moves rank by ``counts.taker_score`` and ``counts.dir_score``.

The expressions keep the order of the additions they replaced, so floating-point results,
and with them plans, stay byte-identical.
"""

from __future__ import annotations

import numpy as np
from spindle.rebalance.goals.broker_bytes import BrokerBytes
from spindle.rebalance.goals.counts import CountGoal
from spindle.rebalance.goals.disk_bytes import DiskBytes


def byte_dest_score(
    util: np.ndarray, dutil: np.ndarray, reps_ok: np.ndarray, lead_ok: np.ndarray
) -> np.ndarray:
    """Lower is better: the taker's utilisation after the move, then the directory's, then a
    small cost per count band the move would leave."""
    count_w = CountGoal.RANK_WEIGHT
    return np.asarray(
        util + DiskBytes.RANK_WEIGHT * dutil + count_w * ~reps_ok + count_w * ~lead_ok
    )


def with_misses(
    score: np.ndarray,
    in_band: np.ndarray,
    dir_in: np.ndarray,
    reps_ok: np.ndarray,
    lead_ok: np.ndarray,
) -> np.ndarray:
    """``score`` plus each goal's ``MISS_WEIGHT`` for every band the move would break: for
    moves that must go somewhere, so the bands rank the choices instead of refusing them."""
    miss = CountGoal.MISS_WEIGHT
    return np.asarray(
        score
        + BrokerBytes.MISS_WEIGHT * ~in_band
        + DiskBytes.MISS_WEIGHT * ~dir_in
        + miss * ~reps_ok
        + miss * ~lead_ok
    )
