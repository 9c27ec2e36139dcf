"""One exchange search between two brokers (``exchange``): its candidates and how they are
judged, cheapest first.

Why a module of its own: the search is where an exchange phase spends its time, and it reads
nothing of the phase's driver but the two brokers' pools (``ExchangeSearch._grid``, written by
the driver) and the planner's live figures. Every candidate (out-set x in-replica x
destination directories) is judged with array operations over the two brokers: byte bands
first (an interval of A's change of bytes, so a run of B's in-replicas per out-set), then the
count table and destinations per cell, then the directory check only on the first
candidates in order (largest fall, fewest bytes, variant, cell), in pieces, stopping at the
first that passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from spindle.rebalance.goals import CountGoal
from spindle.rebalance.goals.bands import band_floor

if TYPE_CHECKING:
    from spindle.rebalance.search.core import Planner

#: Candidates whose directories are checked at once, best first.
CHUNK = 1024
#: Relative tolerance when comparing a band distance with the one before.
EPS = 1e-9

_EMPTY = np.zeros(0)


@dataclass(kw_only=True)
class Grid:
    """One exchange search's candidates between A and B: out-sets of A (``o1`` and, for
    pairs, ``o2``; -1: none) and in-replicas of B (``ins``; -1 first: none), their sizes,
    count classes, current directories, and each side's emptiest receivable dir. The cells
    the count table and destinations allow (out-set ``po``, in-replica ``pi``) with their
    fall and bytes are filled in once known."""

    o1: np.ndarray
    o2: np.ndarray
    ins: np.ndarray
    has2: np.ndarray
    hasi: np.ndarray
    s1: np.ndarray
    s2: np.ndarray
    si: np.ndarray
    oc: np.ndarray
    ic: np.ndarray
    d1: np.ndarray
    d2: np.ndarray
    di: np.ndarray
    e_a: int
    e_b: int
    r_d1: np.ndarray = field(default_factory=lambda: _EMPTY)
    r_di: np.ndarray = field(default_factory=lambda: _EMPTY)
    po: np.ndarray = field(default_factory=lambda: _EMPTY)
    pi: np.ndarray = field(default_factory=lambda: _EMPTY)
    c_fall: np.ndarray = field(default_factory=lambda: _EMPTY)
    c_bytes: np.ndarray = field(default_factory=lambda: _EMPTY)


class ExchangeSearch:
    """The search half of ``exchange._Exchanger``: the best exchange from A to B given the
    count table, against the planner's live figures. Not thread-safe (one per phase)."""

    pl: Planner
    #: Per directory: its size in bytes (float).
    total: np.ndarray
    #: The disk band's factor (``Goals.disk_balance``).
    db: float
    #: Per broker: whether it may receive.
    recv_b: np.ndarray

    def _grid(self, a: int, b: int) -> Grid | None:
        """The candidates between A = a and B = b (the driver builds them from its pools)."""
        raise NotImplementedError

    def _best_exchange(
        self,
        a: int,
        b: int,
        goal: CountGoal,
        table: tuple[np.ndarray, np.ndarray],
        cut: tuple[float, float] | None = None,
    ) -> tuple[float, float, list[tuple[int, int]]] | None:
        """Best exchange with A = a giving one or two replicas to B = b and B giving back none
        or one: (-violation fall, bytes moved, [(replica, destination dir)]) or None.

        Candidates are the cells of an out-set x in-replica grid (flat index = out-set x
        in-pool size + in position), each with up to four destination variants. They are
        judged cheapest first: count rules from a table over the few (replicas, leaders)
        classes of out-sets and in-replicas, byte bands only on the cells the counts allow,
        and the directory check (the costly part) only on the first candidates in order
        (largest fall, fewest bytes, variant, cell), in pieces, stopping at the first that
        passes. Sorting every candidate measured most of a mid-size plan's time; the first
        piece nearly always holds the winner.

        ``cut``: (-fall, bytes) of the best exchange another partner offers; only candidates
        below it (a larger fall, or an equal one with fewer bytes) are judged, so the answer
        is this search's best if that beats ``cut``, else None. The first that passes in the
        order above is the best, so leaving out what cannot beat ``cut`` changes no choice
        (on combined at 1M, most of an offender's same-rack partners find an exchange and
        lose to the first on bytes)."""
        del goal  # the table already holds the fall of the goal worked on
        if not self.recv_b[b]:
            return None
        gr = self._grid(a, b)
        ok_t, fall_t = table
        if gr is None or not ok_t.any():
            return None
        po, pi = self._band_cells(a, b, gr)
        # The count table and the destinations, on the cells the byte bands leave.
        eb_ok, ea_ok, r_d1, r_di, hasi = (
            gr.e_b >= 0,
            gr.e_a >= 0,
            gr.r_d1[po],
            gr.r_di[pi],
            gr.hasi[pi],
        )
        v_any = (r_di & r_d1) | (eb_ok & (~hasi | r_d1)) | (r_di & ea_ok) | (hasi & (eb_ok & ea_ok))
        keep = ok_t[gr.oc[po], gr.ic[pi]] & v_any
        po, pi = po[keep], pi[keep]
        c_fall = fall_t[gr.oc[po], gr.ic[pi]]
        c_bytes = gr.s1[po] + gr.s2[po] + gr.si[pi]
        if cut is not None:
            below = (-c_fall < cut[0]) | ((-c_fall == cut[0]) & (c_bytes < cut[1]))
            po, pi, c_fall, c_bytes = po[below], pi[below], c_fall[below], c_bytes[below]
        gr.po, gr.pi, gr.c_fall, gr.c_bytes = po, pi, c_fall, c_bytes
        for piece in _pieces(-gr.c_fall, gr.c_bytes):
            found = self._search_piece(a, b, gr, piece)
            if found is not None:
                return found
        return None

    def _band_cells(self, a: int, b: int, gr: Grid) -> tuple[np.ndarray, np.ndarray]:
        """The cells (out-set ``po``, in-replica ``pi``) that keep both brokers' byte bands
        (``_bband``), in cell order. The bands bound A's change of bytes (in-replica's size
        minus the out-set's) to an interval; B's in-replicas come sorted by size (none
        first, 0 bytes), so each out-set's candidates are one run of them, found by
        bisection with a margin and then checked exactly: the grid is not walked cell by
        cell where the bands bind (an offender at the bottom of its byte band trading with a
        partner at the top leaves few cells or none)."""
        lo_a, hi_a = self._band_window(a)
        lo_b, hi_b = self._band_window(b)
        lo, hi = max(lo_a, -hi_b), min(hi_a, -lo_b)  # A's change of bytes
        s_out = gr.s1 + gr.s2
        first = np.searchsorted(gr.si, s_out + lo, side="left")
        runs = np.maximum(np.searchsorted(gr.si, s_out + hi, side="right") - first, 0)
        po = np.repeat(np.arange(len(s_out)), runs)
        starts = np.cumsum(runs) - runs
        pi = np.arange(len(po)) - np.repeat(starts - first, runs)
        delta = gr.si[pi] - gr.s1[po] - gr.s2[po]  # change of A's bytes
        keep = self._bband(a, delta) & self._bband(b, -delta)
        return po[keep], pi[keep]

    def _band_window(self, b: int) -> tuple[float, float]:
        """Bounds on the change of broker b's bytes that ``_bband`` may accept, widened by a
        margin for rounding: a change outside them is refused, one inside is checked."""
        pl = self.pl
        lo, hi = float(pl.b_lo[b]), float(pl.b_hi[b])
        now = float(pl.b_load[b])
        slack = max(now - hi, 0.0) + max(lo - now, 0.0) + EPS * max(hi, 1.0)
        margin = 1e-6 * (abs(lo) + abs(hi) + abs(now) + 1.0)
        return lo - slack - now - margin, hi + slack - now + margin

    def _search_piece(
        self, a: int, b: int, gr: Grid, piece: np.ndarray
    ) -> tuple[float, float, list[tuple[int, int]]] | None:
        """The piece (whole groups of equal fall and bytes, inside the byte bands) expanded
        into its destination variants, checked in the order (fall, bytes, variant, cell) in
        chunks."""
        po, pi, hasi = gr.po, gr.pi, gr.hasi
        o, n = po[piece], pi[piece]
        hi_ = hasi[n]
        eb_ok, ea_ok = gr.e_b >= 0, gr.e_a >= 0
        v_ok = np.stack(
            (
                gr.r_di[n] & gr.r_d1[o],
                eb_ok & (~hi_ | gr.r_d1[o]),
                gr.r_di[n] & ea_ok,
                hi_ & (eb_ok & ea_ok),
            )
        )
        vv, kk = np.nonzero(v_ok)
        k = piece[kk]
        order = np.lexsort((k, vv, gr.c_bytes[k], -gr.c_fall[k]))
        vv, k = vv[order], k[order]
        for at in range(0, len(k), CHUNK):
            found = self._check_chunk(a, b, gr, k[at : at + CHUNK], vv[at : at + CHUNK])
            if found is not None:
                return found
        return None

    def _check_chunk(
        self, a: int, b: int, gr: Grid, kc: np.ndarray, vc: np.ndarray
    ) -> tuple[float, float, list[tuple[int, int]]] | None:
        """The directory check of candidates ``kc`` with variants ``vc``: the first that
        passes, as the exchange's (-fall, bytes, moves), or None."""
        pl = self.pl
        dirs_a, dirs_b = pl.dirs_of[a], pl.dirs_of[b]
        s1, s2, si, d1, d2, di = gr.s1, gr.s2, gr.si, gr.d1, gr.d2, gr.di
        o, n = gr.po[kc], gr.pi[kc]
        ka = np.where(vc < 2, np.where(gr.hasi[n], d1[o], -1), gr.e_a)
        kb = np.where(vc % 2 == 0, di[n], gr.e_b)
        da = -((d1[o, None] == dirs_a[None, :]) * s1[o, None])
        da = da - (d2[o, None] == dirs_a[None, :]) * s2[o, None]
        da = da + (ka[:, None] == dirs_a[None, :]) * si[n, None]
        dbm = (kb[:, None] == dirs_b[None, :]) * (s1[o] + s2[o])[:, None]
        dbm = dbm - (di[n, None] == dirs_b[None, :]) * si[n, None]
        got_a = ka[:, None] == dirs_a[None, :]
        got_b = kb[:, None] == dirs_b[None, :]
        good = self._dirs_ok(dirs_a, da, got_a) & self._dirs_ok(dirs_b, dbm, got_b)
        hit = np.flatnonzero(good)
        if not len(hit):
            return None
        h = int(hit[0])
        r = int(kc[h])
        ro, rn = int(gr.po[r]), int(gr.pi[r])
        moves = [(int(gr.o1[ro]), int(kb[h]))]
        if gr.has2[ro]:
            moves.append((int(gr.o2[ro]), int(kb[h])))
        if gr.hasi[rn]:
            moves.append((int(gr.ins[rn]), int(ka[h])))
        return (-float(gr.c_fall[r]), float(gr.c_bytes[r]), moves)

    def _bband(self, b: int, delta: np.ndarray) -> np.ndarray:
        """Broker b's byte band after adding ``delta`` bytes: inside, or no further out."""
        pl = self.pl
        lo, hi = float(pl.b_lo[b]), float(pl.b_hi[b])
        now = float(pl.b_load[b])
        after = now + delta
        tol = EPS * max(hi, 1.0)
        d_after = np.maximum(after - hi, 0) + np.maximum(lo - after, 0)
        d_before = max(now - hi, 0.0) + max(lo - now, 0.0)
        return np.asarray(d_after <= d_before + tol)

    def _dirs_ok(self, dirs: np.ndarray, delta: np.ndarray, got: np.ndarray) -> np.ndarray:
        """Every hosting dir of one broker after adding ``delta`` (candidates x dirs): no dir
        that receives a replica (``got``) ends above the capacity threshold, even if it loses
        more than it gets, and every Active dir ends inside its band (relative to the broker's
        Active mean after the exchange) or no further from it than before."""
        pl = self.pl
        load = pl.dir_load[dirs]
        tot = self.total[dirs]
        act = pl.active[dirs]
        hard = pl.hard[dirs]
        after = load + delta
        ok = ~(got & (after > hard + 0.5)).any(axis=-1)
        a_cap = float(tot[act].sum())
        if a_cap <= 0:
            return np.asarray(ok)
        a_now = float(load[act].sum())
        a_after = a_now + (delta * act).sum(axis=-1)
        u_now = a_now / a_cap
        u_after = a_after / a_cap
        db = self.db
        d_before = np.maximum(load - db * u_now * tot, 0) + np.maximum(
            band_floor(db, u_now) * tot - load, 0
        )
        ua = u_after[..., None]
        d_after = np.maximum(after - db * ua * tot, 0) + np.maximum(
            band_floor(db, ua) * tot - after, 0
        )
        tol = EPS * tot
        worse = act & (d_after > d_before + tol)
        ok &= ~worse.any(axis=-1)
        return np.asarray(ok)


def _pieces(key: np.ndarray, cost: np.ndarray) -> Iterator[np.ndarray]:
    """Positions 0..n-1 in the order (key, cost, position), lazily, in pieces of whole groups
    of equal (key, cost), ``CHUNK`` or so first and twice as many each time after: a partial
    selection per piece instead of one sort of everything, since the caller usually stops in
    the first piece (and growing pieces keep a long read to a few selections)."""
    size = CHUNK
    rest = np.arange(len(key))
    while len(rest):
        kr = key[rest]
        first = kr == kr.min()
        pos, rest = rest[first], rest[~first]
        while len(pos):
            c = cost[pos]
            if len(pos) > 2 * size:
                t = np.partition(c, size)[size]
                size *= 2
                head = c < t
                if not head.any():
                    head = c <= t
            else:
                head = np.ones(len(pos), bool)
            h = pos[head]
            yield h[np.lexsort((h, c[head]))]
            pos = pos[~head]
