"""Fewer bytes for the same bands, last: a replica moved from broker A to broker B and
another moved from B to A both stay where they were.

Why: the phases pass replicas between two brokers both ways. A broker over its count band
but at its byte floor takes large replicas so that it may give away more small ones, and
the exchange phase later ships large ones back (combined, 16K replicas, seed 7: an aged
broker received 212 replicas, ~350 GB, and sent out 121 large ones, 233 GB); a draining
directory is emptied onto rack-mates that then hand back what the broker must hold for its
count band (violations, 2K replicas, seed 0: 109 GB one way, 282 GB the other). Each step
chose well for its own goal; only the composition is wasteful, and choosing otherwise while
planning changes every later step of the greedy (see ``simplify``).

A pair (x moved A->B, y moved B->A) is cancelled: y goes back to its snapshot directory
on B, and x back to its own on A -- or, when that directory is being emptied (x had to
leave it), to the directory of A that y had been moved to (x still moves, inside A).
Counts of both brokers are unchanged; their bytes, leaders and directories change by the
difference of the two sizes, so a pair is taken only when both brokers' byte and leader
bands and all their directories' bands (capacity threshold included) are no worse than
now, and the partition rules hold (``_may_return``). Sizes close to each other are tried
first; bounded by ``TRIES_IN_ALL`` pairs judged, in a fixed order (deterministic).
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import numpy as np
from spindle.rebalance.search.simplify import band_violation, dir_band

if TYPE_CHECKING:
    from spindle.rebalance.search.core import Planner

#: Replicas moved the other way tried per replica (nearest in size first).
NEAREST = 6
#: Pairs judged at most, in all.
TRIES_IN_ALL = 20_000


def cancel_pairs(pl: Planner) -> int:
    """Cancel pairs of replicas moved between two brokers in opposite directions where
    both brokers' bands stay no worse (module docstring); returns how many pairs."""
    if pl.capped or not pl.s.cross_ok:
        return 0
    c = pl.c
    cross = np.flatnonzero(pl.moved & (pl.cur_b != c.rep_broker))
    if len(cross) < 2:
        return 0
    flows: dict[tuple[int, int], list[int]] = {}
    for r in cross[np.lexsort((cross, -pl.size_f[cross]))].tolist():
        flows.setdefault((int(c.rep_broker[r]), int(pl.cur_b[r])), []).append(r)
    budget = [TRIES_IN_ALL]
    done = 0
    for a, b in sorted(flows):
        if a < b and (b, a) in flows and budget[0] > 0:
            done += _between(pl, a, b, flows[(a, b)], flows[(b, a)], budget)
    return done


def _between(pl: Planner, a: int, b: int, xs: list[int], ys: list[int], budget: list[int]) -> int:
    """Pairs cancelled between brokers a and b: ``xs`` moved a->b (largest first), ``ys``
    moved b->a; for each x, the ys nearest in size are tried first."""
    done = 0
    left = sorted(ys, key=lambda y: (float(pl.size_f[y]), y))
    sizes = [float(pl.size_f[y]) for y in left]
    for x in xs:
        if budget[0] <= 0 or not left:
            break
        sx = float(pl.size_f[x])
        k = bisect.bisect_left(sizes, sx)
        window = range(max(0, k - NEAREST), min(len(left), k + NEAREST))
        near = sorted(window, key=lambda i: (abs(sizes[i] - sx), left[i]))[:NEAREST]
        for i in near:
            budget[0] -= 1
            if _try(pl, x, left[i], a, b):
                done += 1
                del left[i], sizes[i]
                break
    return done


def _home_or_instead(pl: Planner, x: int, y: int) -> int:
    """Where x goes when cancelled: its snapshot directory, or where y had landed on x's
    broker when the snapshot directory is being emptied; -1 when neither may take it."""
    home = int(pl.c.rep_dir[x])
    if pl.hosting[home]:
        return home
    d = int(pl.cur_d[y])
    if pl.s.intra_ok[int(pl.dir_b[d])] and pl.recv[d]:
        return d
    return -1


def _may_return(pl: Planner, x: int, y: int, a: int, b: int) -> bool:
    """Partition rules with x back on broker a and y back on b: neither broker holds
    another replica of the returning one's partition, and the rack limits hold."""
    if pl._rep_part[x] == pl._rep_part[y]:
        return False
    for r, to in ((x, a), (y, b)):
        p = pl._rep_part[r]
        lo, hi = pl._part_start[p], pl._part_start[p + 1]
        others = [int(m) for i, m in enumerate(pl.cur_b[lo:hi].tolist()) if lo + i != r]
        if to in others:
            return False
        if pl.g.rack_aware and pl._broker_rack[a] != pl._broker_rack[b]:
            rk = pl._broker_rack[to]
            if sum(1 for m in others if pl._broker_rack[m] == rk) >= pl._rack_limit[p]:
                return False
    return True


def _worse(v0: float, v1: float, lo: float, hi: float) -> bool:
    out0 = max(v0 - hi, 0.0) + max(lo - v0, 0.0)
    out1 = max(v1 - hi, 0.0) + max(lo - v1, 0.0)
    return out1 > out0


def _dirs_keep(pl: Planner, broker: int, delta: dict[int, float], active_delta: float) -> bool:
    """Whether adding ``delta`` (bytes per directory) to ``broker``'s directories, its
    Active load changing by ``active_delta``, leaves none further outside its band."""
    own = pl.dirs_of[broker]
    own = own[pl.hosting[own]]
    a_cap = float(pl.a_cap[broker])
    load = pl.dir_load[own].astype(np.float64)
    after = load.copy()
    for d, s in delta.items():
        after[own == d] += s
    a_load = float(pl.a_load[broker])
    u0 = a_load / a_cap if a_cap > 0 else 0.0
    u1 = (a_load + active_delta) / a_cap if a_cap > 0 else 0.0
    fl0, tp0 = dir_band(pl, own, u0)
    fl1, tp1 = dir_band(pl, own, u1)
    return bool((band_violation(fl1, tp1, after) <= band_violation(fl0, tp0, load)).all())


def _try(pl: Planner, x: int, y: int, a: int, b: int) -> bool:
    """Cancel x (moved a->b) and y (moved b->a) if that keeps every band it touches no
    worse and the partition rules; True when done. At most one of the two must leave its
    snapshot directory (that one is x below)."""
    if not pl.hosting[int(pl.c.rep_dir[y])]:
        x, y, a, b = y, x, b, a
    to_x = _home_or_instead(pl, x, y)
    home_y = int(pl.c.rep_dir[y])
    if to_x < 0 or not pl.hosting[home_y] or not _may_return(pl, x, y, a, b):
        return False
    sx, sy = float(pl.size_f[x]), float(pl.size_f[y])
    lx, ly = int(pl.lead[x]), int(pl.lead[y])
    checks = [
        (float(pl.b_load[a]), float(pl.b_load[a]) + sx - sy, float(pl.b_lo[a]), float(pl.b_hi[a])),
        (float(pl.b_load[b]), float(pl.b_load[b]) - sx + sy, float(pl.b_lo[b]), float(pl.b_hi[b])),
        (
            float(pl.b_leaders[a]),
            float(pl.b_leaders[a]) + lx - ly,
            float(pl.l_lo),
            float(pl.l_hi),
        ),
        (
            float(pl.b_leaders[b]),
            float(pl.b_leaders[b]) - lx + ly,
            float(pl.l_lo),
            float(pl.l_hi),
        ),
    ]
    if any(_worse(*ch) for ch in checks):
        return False
    dy, dx = int(pl.cur_d[y]), int(pl.cur_d[x])
    on_a = {to_x: sx}
    on_a[dy] = on_a.get(dy, 0.0) - sy
    act_a = (sx if pl.active[to_x] else 0.0) - (sy if pl.active[dy] else 0.0)
    on_b = {dx: -sx}
    on_b[home_y] = on_b.get(home_y, 0.0) + sy
    act_b = (sy if pl.active[home_y] else 0.0) - (sx if pl.active[dx] else 0.0)
    if not (_dirs_keep(pl, a, on_a, act_a) and _dirs_keep(pl, b, on_b, act_b)):
        return False
    pl.undo_move(y)
    if to_x == int(pl.c.rep_dir[x]):
        pl.undo_move(x)
    else:
        pl.retarget(x, to_x)
    return True
