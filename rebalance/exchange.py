"""Exchanges: count moves that keep bytes where the byte bands want them.

Why: the count phases move one replica at a time. On mid-size clusters that stops short in
two ways. A broker above the leader band often sits inside its byte band with no room to
lose a leader's bytes, and the brokers with room for a leader are full; a broker above the
replica band is often at the bottom of its byte band, so any replica it gives takes it below.
Trading fixes both: a leader for a follower of about the same size moves one leader each way
and leaves bytes and replica counts as they were; two small replicas for one of about their
total size moves one replica count each way and leaves bytes as they were.

What one exchange is: between a giving broker A and a taking broker B, one or two unmoved
replicas go from A to one directory of B, and none or one unmoved replica goes from B to one
directory of A. Every candidate (out-set x in-set x destination directories) is judged with
array operations over the few brokers involved, against the same figures the summary uses:

  - hard rules: destination Active and receivable, under the capacity threshold; partition
    rules (one replica per broker, rack limit) for every replica that changes broker; every
    replica moves at most once;
  - no band gets worse: each of the two brokers' byte band and every Active directory of both
    (their band follows the broker's mean, which the exchange shifts) ends inside its band or
    no further from it than before;
  - counts: neither broker's replica or leader count ends further outside its band, and
    the two brokers' violation of the goal being worked on falls.

Among the candidates that pass, the largest fall of the violation wins, then the fewest bytes
moved, ties to the lowest index (deterministic). Brokers of one rack trade without touching
rack limits, so when racks are uneven same-rack partners are always among those tried.

Offenders are the brokers out of a count band except those the hard rules hold there
(``_violation``): a rack that rack awareness keeps above the replica band keeps it whatever
its brokers trade, and searching trades for each of its brokers made this phase most of a
1M-replica plan on racks of unequal size (unequal-racks: 354K offender searches, 8.3K
exchanges, ~20K replicas moved, the goal out of reach before and after).

Cost is bounded whatever the cluster's size: each search sees at most POOL2 pairs and 2 x POOL
singles out of A and 2 x POOL + 1 ins from B, per offender at most 2 x PARTNERS partners are
searched, and the phase runs at most 8 x brokers + the starting count violation (of the
offenders) offender searches (each exchange lowers that violation; a failed search parks its
offender).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from spindle.rebalance.bands import band_floor
from spindle.rebalance.goals import CountGoal
from spindle.rebalance.goals.rack import hosting_racks, rack_limits

if TYPE_CHECKING:
    from spindle.rebalance.core import Planner

#: Smallest unmoved replicas of each kind (leader, follower) per broker taken as singles.
POOL = 96
#: Smallest unmoved replicas per broker combined two at a time (POOL2 * (POOL2 - 1) / 2 pairs).
POOL2 = 24
#: Partner brokers tried for one offender (plus as many of its own rack).
PARTNERS = 6
#: Candidates whose directories are checked at once, best first.
CHUNK = 1024
#: Relative tolerance when comparing a band distance with the one before.
EPS = 1e-9


_EMPTY = np.zeros(0)


@dataclass(kw_only=True)
class _Grid:
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
    v_any: np.ndarray = field(default_factory=lambda: _EMPTY)
    po: np.ndarray = field(default_factory=lambda: _EMPTY)
    pi: np.ndarray = field(default_factory=lambda: _EMPTY)
    c_fall: np.ndarray = field(default_factory=lambda: _EMPTY)
    c_bytes: np.ndarray = field(default_factory=lambda: _EMPTY)


def exchange_counts(pl: Planner) -> int:
    """Even out replica and leader counts with exchanges; returns how many were made. Does
    nothing unless the mode balances counts across brokers, the caps have not stopped
    planning, and some broker whose band is within reach is still out of it."""
    if not (pl.s.balance_counts and pl.s.cross_ok) or pl.capped or pl.counts_in_band():
        return 0
    if not any(_violation(pl, g)[0].any() for g in (pl.replica_goal, pl.leader_goal)):
        return 0
    return _Exchanger(pl).run()


def _violation(pl: Planner, goal: CountGoal) -> tuple[np.ndarray, np.ndarray]:
    """Per broker: how far its count is outside the band (below counts only where it may
    receive; a broker that cannot receive can only lose), and whether it is *held* there:
    its band is out of reach under the hard rules (``PlannerState.out_of_reach``) and it
    misses it on the side they hold it, its rack's mean count beyond the band on that side
    too (rack awareness keeps the rack's replicas there, see ``achievable``). Held brokers
    are not offenders here: exchanges inside such a rack only move which of its brokers
    misses the band, two or three replicas moved per count, bytes spent for a band no plan
    meets (the stepwise count phase moves no reshaping bytes for those either). A broker
    of that rack out of band on the other side (above the band in a rack held below it)
    is still an offender: its rack-mates can take from it."""
    cnt, lo, hi = goal.of(pl)
    over = np.maximum(cnt - hi, 0)
    under = np.where(pl.recv_broker(), np.maximum(lo - cnt, 0), 0)
    held = np.zeros(len(cnt), bool)
    far = pl.out_of_reach(goal.name) & pl.host_b
    if far.any():
        rack = pl.c.broker_rack
        host = np.flatnonzero(pl.host_b)
        n = np.bincount(rack[host], minlength=len(pl.c.racks))
        tot = np.bincount(rack[host], weights=cnt[host], minlength=len(pl.c.racks))
        mean = (tot / np.maximum(n, 1))[rack]
        held = far & (((mean > hi) & (over > 0)) | ((mean < lo) & (under > 0)))
    return np.where(pl.host_b & ~held, over + under, 0), held


class _Exchanger:
    def __init__(self, pl: Planner) -> None:
        self.pl = pl
        c = pl.c
        self.c = c
        self.total = c.dir_total.astype(np.float64)
        self.db = pl.g.disk_balance
        self.rack = c.broker_rack.astype(np.int64)
        self.rf = np.diff(c.part_start)
        self.limit = rack_limits(self.rf, hosting_racks(c, pl.s))
        self.recv_b = pl.recv_broker()
        # Replicas per broker, smallest first (snapshot order breaks ties): filtered per use.
        order = np.lexsort((np.arange(c.n_replicas), pl.size_f, pl.cur_b))
        starts = np.searchsorted(pl.cur_b[order], np.arange(c.n_brokers + 1))
        self.by_b = [order[starts[b] : starts[b + 1]] for b in range(c.n_brokers)]
        slot = np.arange(c.n_replicas) - c.part_start[c.rep_part]
        self.members = np.full((c.n_partitions, max(int(self.rf.max(initial=0)), 1)), -1)
        self.members[c.rep_part, slot] = pl.cur_b
        self.members0 = np.full_like(self.members, -1)
        self.members0[c.rep_part, slot] = c.rep_broker
        self.slot = slot
        self.made = 0
        self._last_tried: set[int] = set()
        #: Per broker: its unmoved serving leaders and followers, smallest first (``_pool``).
        self._avail: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        #: ``_count_table`` by its inputs (the goal, both brokers' replica and leader counts;
        #: the bands do not change while exchanging): most searches repeat a few of them.
        self._tables: dict[tuple[object, ...], tuple[np.ndarray, np.ndarray]] = {}
        #: Searches that found no exchange, by goal, giver, taker and the two versions.
        self._failed: set[tuple[str, int, int, int, int]] = set()
        #: Per count goal, the brokers held out of its band (``_violation``), as of the last
        #: offender scan.
        self._held: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------ state

    def _viol(self, goal: CountGoal) -> np.ndarray:
        """``_violation``: the offenders this phase works on, by how far out of band; the
        brokers held out of band are kept for the count table (``_count_table``)."""
        v, self._held[goal.name] = _violation(self.pl, goal)
        return v

    def _pool(self, b: int, other: int) -> np.ndarray:
        """Broker b's unmoved serving replicas that may join broker ``other``: the POOL
        smallest leaders and the POOL smallest followers, smallest first. The partition rules
        are checked over growing prefixes of each kind, not over all of b's replicas."""
        pl = self.pl
        kinds = self._avail.get(b)
        if kinds is None:
            reps = self.by_b[b]
            reps = reps[~pl.moved[reps] & pl.s.hosting[pl.cur_d[reps]] & (pl.cur_b[reps] == b)]
            lead = pl.lead[reps]
            kinds = (reps[lead], reps[~lead])
            self._avail[b] = kinds
        if not pl.rack_open(b)[self.rack[other]]:
            return kinds[0][:0]  # none may join ``other``'s rack (``PlannerState.rack_open``)
        picked = []
        for reps in kinds:
            got: list[np.ndarray] = []
            n, at, width = 0, 0, 2 * POOL
            while n < POOL and at < len(reps):
                win = reps[at : at + width]
                ok = win[self._may_join(win, other)]
                got.append(ok)
                n += len(ok)
                at += len(win)
                width *= 2
            picked.append(np.concatenate(got)[:POOL] if got else reps[:0])
        out = np.concatenate(picked)
        return out[np.lexsort((out, pl.size_f[out]))]

    def _may_join(self, reps: np.ndarray, b: int) -> np.ndarray:
        """Whether each replica may move to broker b: b holds no replica of its partition now
        and held none in the snapshot (Kafka names replicas by broker, so "moving" onto a
        broker that had the partition is a reorder of the list, not a move), and b's rack
        stays within the partition's rack limit."""
        parts = self.c.rep_part[reps]
        mem = self.members[parts]
        ok: np.ndarray = ~(mem == b).any(axis=1) & ~(self.members0[parts] == b).any(axis=1)
        if self.pl.g.rack_aware:
            rk = self.rack[b]
            on = (np.where(mem >= 0, self.rack[np.maximum(mem, 0)], -1) == rk).sum(axis=1)
            on -= self.rack[self.pl.cur_b[reps]] == rk
            ok &= on < self.limit[parts]
        return ok

    def _apply(self, r: int, d: int) -> None:
        self._avail.pop(int(self.pl.cur_b[r]), None)  # r leaves its broker's pool for good
        self.pl.apply(r, d)
        self.members[int(self.c.rep_part[r]), int(self.slot[r])] = int(self.pl.dir_b[d])

    # ------------------------------------------------------------------ driver

    def run(self) -> int:
        pl = self.pl
        stuck: dict[tuple[CountGoal, int], set[int]] = {}
        goals = (pl.replica_goal, pl.leader_goal)
        budget = 8 * self.c.n_brokers + int(self._viol(goals[0]).sum() + self._viol(goals[1]).sum())
        while budget > 0 and not pl.capped:
            budget -= 1
            best: tuple[int, CountGoal | None, int] = (0, None, -1)
            for goal in goals:
                v = self._viol(goal)
                vl = v.tolist()
                for b in np.argsort(-v, kind="stable").tolist():
                    if vl[b] <= 0:
                        break
                    if (goal, b) not in stuck:
                        if vl[b] > best[0]:
                            best = (int(vl[b]), goal, b)
                        break
            if best[2] < 0:
                break
            _, found, b = best
            assert found is not None  # b >= 0 came with its goal
            touched = self._fix(found, b)
            if touched:
                self.made += 1
                # An offender that found no exchange is tried again once a broker it tried
                # as a partner has changed.
                for key in [k for k, tried in stuck.items() if tried & touched]:
                    del stuck[key]
            else:
                stuck[found, b] = self._last_tried
        return self.made

    def _fix(self, goal: CountGoal, b: int) -> set[int]:
        """One exchange that lowers broker b's violation of ``goal``: the two brokers it
        touched, or an empty set (then ``_last_tried`` holds the brokers tried)."""
        pl = self.pl
        cnt, lo, hi = goal.of(pl)
        over = bool(cnt[b] > hi)
        hosts = np.flatnonzero(pl.host_b)
        if over:
            # Partners that could take one more and stay in band: may receive, fewest first.
            hosts = hosts[self.recv_b[hosts] & (cnt[hosts] + 1 <= hi)]
            hosts = hosts[np.argsort(cnt[hosts], kind="stable")]
        else:
            # Partners that could give one and stay in band, most first.
            hosts = hosts[cnt[hosts] - 1 >= lo]
            hosts = hosts[np.argsort(-cnt[hosts], kind="stable")]
        hosts = hosts[hosts != b]
        cand = hosts.tolist()[:PARTNERS]
        same = hosts[self.rack[hosts] == self.rack[b]].tolist()
        # Same-rack partners too (they trade without touching rack limits), the PARTNERS
        # nearest by count among those the count rules let trade with b (on a large cluster
        # a rack holds dozens of brokers, and each partner tried is a full candidate
        # search). Where rack awareness confines partitions to their racks, those are the
        # only partners that can trade at all, and the nearest by count are often ones the
        # count rules rule out (a broker below the replica band may not give a replica
        # without one back, so one holding only leaders gains a leader only from a broker
        # with replicas to spare).
        tried = cand + self._same_rack(b, [x for x in same if x not in cand], goal, over=over)
        self._last_tried = {b, *tried}
        best: tuple[float, float, int, int, list[tuple[int, int]]] | None = None
        for partner in tried:
            giver, taker = (b, partner) if over else (partner, b)
            # The count rules bound what this pair can do: skip the search when no class of
            # exchange is allowed, or when none could fall as far as the best found already
            # (a partner wins only by a larger fall, or an equal one with fewer bytes).
            table = self._count_table(giver, taker, goal)
            bound = int(table[1][table[0]].max(initial=0))
            if bound <= 0 or (best is not None and bound < -best[0]):
                continue
            # A search reads only the two brokers (their replicas, partitions, loads and
            # counts): one that found nothing finds nothing again until either changes.
            key = (goal.name, giver, taker, pl.touched(giver), pl.touched(taker))
            if key in self._failed:
                continue
            found = self._best_exchange(giver, taker, goal, table)
            if found is None:
                self._failed.add(key)
            if found is not None and (best is None or found[:2] < best[:2]):
                best = (found[0], found[1], giver, taker, found[2])
        if best is None:
            return set()
        if not self._commit(best[4]):
            return set()
        return {best[2], best[3]}

    def _same_rack(self, b: int, same: list[int], goal: CountGoal, *, over: bool) -> list[int]:
        """The first PARTNERS of ``same`` whose count table with b allows an exchange."""
        out: list[int] = []
        for x in same:
            if self._count_table(*((b, x) if over else (x, b)), goal)[0].any():
                out.append(x)
                if len(out) == PARTNERS:
                    break
        return out

    def _commit(self, moves: list[tuple[int, int]]) -> bool:
        pl = self.pl
        if len(moves) == 1 and not pl.budget_allows(moves[0][0]):
            return False
        if len(moves) == 2 and not pl.budget_allows_two(moves[0][0], moves[1][0]):
            return False
        for r, d in moves:
            self._apply(r, d)
        return True

    # ------------------------------------------------------------------ search

    def _count_table(self, a: int, b: int, goal: CountGoal) -> tuple[np.ndarray, np.ndarray]:
        """The count rules of an exchange from A = a to B = b by class: rows are out-sets
        ((replicas - 1) * 3 + leaders; row 2, one replica and two leaders, cannot occur),
        columns in-replicas (none, follower, leader). Returns (allowed, fall of ``goal``):
        neither broker's violation of either goal may grow, unless the broker is held out of
        that goal's band (``_violation``: the rack's shortfall, not the broker, is what no
        plan can change, and the exchange moves a count between two brokers of one rack or
        towards the side the rack lacks), and the pair's violation of the goal worked on
        must fall. Why the exception: where rack awareness holds a whole rack below the
        replica band, a broker of it that holds only leaders gains a leader only from a
        rack-mate, which is below that band too."""
        pl = self.pl
        held = [self._held[g.name] for g in (pl.replica_goal, pl.leader_goal)]
        key = (
            goal.name,
            int(pl.b_reps[a]),
            int(pl.b_leaders[a]),
            int(pl.b_reps[b]),
            int(pl.b_leaders[b]),
            bool(held[0][a]),
            bool(held[0][b]),
            bool(held[1][a]),
            bool(held[1][b]),
        )
        hit = self._tables.get(key)
        if hit is not None:
            return hit
        cls_o = np.arange(6)
        n_o_t, l_o_t = (1 + cls_o // 3)[:, None], (cls_o % 3)[:, None]
        n_i_t = (np.arange(3) > 0)[None, :].astype(np.int64)
        l_i_t = (np.arange(3) == 2)[None, :].astype(np.int64)
        fall: dict[str, np.ndarray] = {}
        ok_t = np.ones((6, 3), bool)
        ok_t[2] = False
        for g, d_o, d_i in ((pl.replica_goal, n_o_t, n_i_t), (pl.leader_goal, l_o_t, l_i_t)):
            cnt, lo, hi = g.of(pl)
            va, vb = self._cviol(cnt[a], hi, lo, a), self._cviol(cnt[b], hi, lo, b)
            wa = self._cviol(cnt[a] - d_o + d_i, hi, lo, a)
            wb = self._cviol(cnt[b] + d_o - d_i, hi, lo, b)
            h = self._held[g.name]
            ok_t &= ((wa <= va) | bool(h[a])) & ((wb <= vb) | bool(h[b]))
            fall[g.name] = va + vb - wa - wb
        ok_t &= fall[goal.name] > 0
        self._tables[key] = (ok_t, fall[goal.name])
        return ok_t, fall[goal.name]

    def _best_exchange(
        self, a: int, b: int, goal: CountGoal, table: tuple[np.ndarray, np.ndarray]
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
        piece nearly always holds the winner."""
        del goal  # the table already holds the fall of the goal worked on
        if not self.recv_b[b]:
            return None
        gr = self._grid(a, b)
        ok_t, fall_t = table
        if gr is None or not ok_t.any():
            return None
        cell_ok = ok_t[gr.oc[:, None], gr.ic[None, :]] & gr.v_any
        cell = np.flatnonzero(cell_ok)
        if len(cell) == 0:
            return None
        n_in = len(gr.ins)
        gr.po, gr.pi = cell // n_in, cell % n_in
        gr.c_fall = fall_t[gr.oc[gr.po], gr.ic[gr.pi]]
        gr.c_bytes = gr.s1[gr.po] + gr.s2[gr.po] + gr.si[gr.pi]
        for piece in _pieces(-gr.c_fall, gr.c_bytes):
            found = self._search_piece(a, b, gr, piece)
            if found is not None:
                return found
        return None

    def _grid(self, a: int, b: int) -> _Grid | None:
        """The out-sets of A (singles, then pairs of the POOL2 smallest: three moves, so not
        under caps), B's in-replicas (none first), their sizes, count classes and destination
        variants; None when A has nothing to give."""
        pl = self.pl
        out_pool = self._pool(a, b)
        in_pool = self._pool(b, a) if self.recv_b[a] else np.zeros(0, np.int64)
        caps = pl.req.max_moves is not None or pl.req.max_bytes is not None
        o1 = out_pool
        o2 = np.full(len(o1), -1)
        if not caps and len(out_pool) > 1:
            small = out_pool[:POOL2]
            i, j = np.triu_indices(len(small), 1)
            o1 = np.concatenate([o1, small[i]])
            o2 = np.concatenate([o2, small[j]])
        if len(o1) == 0:
            return None
        ins = np.concatenate([[-1], in_pool]).astype(np.int64)
        s = pl.size_f
        has2, hasi = o2 >= 0, ins >= 0
        q2, qi = np.maximum(o2, 0), np.maximum(ins, 0)
        # Count classes: out-set (replicas - 1) * 3 + leaders; in-replica none/follower/leader.
        l_o = pl.lead[o1].astype(np.int64) + (has2 & pl.lead[q2])
        gr = _Grid(
            o1=o1,
            o2=o2,
            ins=ins,
            has2=has2,
            hasi=hasi,
            s1=s[o1],
            s2=np.where(has2, s[q2], 0.0),
            si=np.where(hasi, s[qi], 0.0),
            oc=has2.astype(np.int64) * 3 + l_o,
            ic=hasi.astype(np.int64) + (hasi & pl.lead[qi]),
            d1=pl.cur_d[o1],
            d2=np.where(has2, pl.cur_d[q2], -1),
            di=np.where(hasi, pl.cur_d[qi], -1),
            e_a=self._emptiest(a),
            e_b=self._emptiest(b),
        )
        # Destinations: on B, the in-replica's dir or B's emptiest receivable dir; on A, the
        # first out-replica's dir or A's emptiest receivable dir. Variants in order:
        # (A: own dir, B: own dir), (own, emptiest), (emptiest, own), (emptiest, emptiest); a
        # plain move (no in-replica) has only B's dir to choose.
        gr.r_d1 = pl.recv[gr.d1]
        gr.r_di = hasi & pl.recv[np.maximum(gr.di, 0)]
        eb_ok, ea_ok, r_d1, r_di = gr.e_b >= 0, gr.e_a >= 0, gr.r_d1, gr.r_di
        v_any = (r_di[None, :] & r_d1[:, None]) | (eb_ok & (~hasi[None, :] | r_d1[:, None]))
        v_any |= r_di[None, :] & ea_ok
        v_any |= hasi[None, :] & (eb_ok & ea_ok)
        gr.v_any = v_any
        return gr

    def _search_piece(
        self, a: int, b: int, gr: _Grid, piece: np.ndarray
    ) -> tuple[float, float, list[tuple[int, int]]] | None:
        """Byte bands, then the piece (whole groups of equal fall and bytes) expanded into its
        destination variants, checked in the order (fall, bytes, variant, cell) in chunks."""
        po, pi, hasi = gr.po, gr.pi, gr.hasi
        o, n = po[piece], pi[piece]
        delta = gr.si[n] - gr.s1[o] - gr.s2[o]  # change of A's bytes
        piece = piece[self._bband(a, delta) & self._bband(b, -delta)]
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
        self, a: int, b: int, gr: _Grid, kc: np.ndarray, vc: np.ndarray
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

    def _emptiest(self, b: int) -> int:
        """Broker b's receivable dir with the lowest utilisation, or -1."""
        pl = self.pl
        dirs = pl.dirs_of[b]
        dirs = dirs[pl.recv[dirs]]
        if len(dirs) == 0:
            return -1
        return int(dirs[int(np.argmin(pl.dir_load[dirs] / self.total[dirs]))])

    @staticmethod
    def _cviol(cnt: object, hi: int, lo: int, b: int) -> np.ndarray:
        """How far counts are outside [lo, hi]. Below counts for every broker here: one that
        may not receive must not be taken below a band it is inside (it could never get back),
        and one already below must not sink further."""
        c = np.asarray(cnt)
        del b
        return np.asarray(np.maximum(c - hi, 0) + np.maximum(lo - c, 0))

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
