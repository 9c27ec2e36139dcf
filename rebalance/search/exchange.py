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
The search itself (``exchange_search``) judges byte bands first, and for every partner after
the first only the candidates that beat the best exchange found so far.

Offenders are the brokers out of a count band except those the hard rules hold there
(``_violation``): a rack that rack awareness keeps above the replica band keeps it whatever
its brokers trade, and searching trades for each of its brokers made this phase most of a
1M-replica plan on racks of unequal size (unequal-racks: 354K offender searches, 8.3K
exchanges, ~20K replicas moved, the goal out of reach before and after). Held brokers are
partners, though: one held above the band may take what an offender above it must give
(``_held_partners``), its growth no loss, since no plan meets its band anyway.

Cost is bounded whatever the cluster's size: each search sees at most POOL2 pairs and 2 x POOL
singles out of A and 2 x POOL + 1 ins from B, per offender at most 3 x PARTNERS partners are
searched, and the phase runs at most 8 x brokers + the starting count violation (of the
offenders) offender searches (each exchange lowers that violation; a failed search parks its
offender).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from spindle.rebalance.goals import CountGoal
from spindle.rebalance.goals.base import Move
from spindle.rebalance.search.exchange_search import ExchangeSearch, Grid

if TYPE_CHECKING:
    from spindle.rebalance.search.core import Planner

#: Smallest unmoved replicas of each kind (leader, follower) per broker taken as singles.
POOL = 96
#: Smallest unmoved replicas per broker combined two at a time (POOL2 * (POOL2 - 1) / 2 pairs).
POOL2 = 24
#: Partner brokers tried for one offender (plus as many of its own rack).
PARTNERS = 6


def exchange_counts(pl: Planner) -> int:
    """Even out replica and leader counts with exchanges; returns how many were made. Does
    nothing unless the mode balances counts across brokers, the caps have not stopped
    planning, and some broker whose band is within reach is still out of it."""
    if not (pl.s.balance_counts and pl.s.cross_ok) or pl.capped or pl.counts_in_band():
        return 0
    if not any(_violation(pl, g)[0].any() for g in pl.count_goals):
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


class _Exchanger(ExchangeSearch):
    def __init__(self, pl: Planner) -> None:
        self.pl = pl
        c = pl.c
        self.c = c
        self.total = c.dir_total.astype(np.float64)
        self.db = pl.g.disk_balance
        self.rack = c.broker_rack.astype(np.int64)
        self.recv_b = pl.recv_broker()
        # Replicas per broker, smallest first (snapshot order breaks ties): filtered per use.
        order = np.lexsort((np.arange(c.n_replicas), pl.size_f, pl.cur_b))
        starts = np.searchsorted(pl.cur_b[order], np.arange(c.n_brokers + 1))
        self.by_b = [order[starts[b] : starts[b + 1]] for b in range(c.n_brokers)]
        self.made = 0
        self._last_tried: set[int] = set()
        #: Per broker: its unmoved serving leaders and followers, smallest first (``_pool``).
        self._avail: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        #: ``_count_table`` by its inputs (the goal, both brokers' replica and leader counts;
        #: the bands do not change while exchanging): most searches repeat a few of them.
        self._tables: dict[tuple[object, ...], tuple[np.ndarray, np.ndarray]] = {}
        #: Searches that found no exchange, by goal, giver, taker, the two versions and
        #: whether each is held out of a band.
        self._failed: set[tuple[object, ...]] = set()
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
        if not pl.rack_open(b, int(self.rack[other])):
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
        stays within the partition's rack limit (``PlannerState._may_join_many``)."""
        return self.pl._may_join_many(reps, b)

    def _apply(self, r: int, d: int) -> None:
        self._avail.pop(int(self.pl.cur_b[r]), None)  # r leaves its broker's pool for good
        self.pl.apply(r, d)

    # ------------------------------------------------------------------ driver

    def run(self) -> int:
        pl = self.pl
        stuck: dict[tuple[CountGoal, int], set[int]] = {}
        goals = pl.count_goals
        budget = 8 * self.c.n_brokers + int(sum(self._viol(g).sum() for g in goals))
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
        tried += self._held_partners(b, set(tried), goal, over=over)
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
            # counts) and whether each is held out of a band (the count table's exception):
            # one that found nothing finds nothing again until one of those changes.
            key = (
                goal.name,
                giver,
                taker,
                pl.touched(giver),
                pl.touched(taker),
                *self._held_flags(giver, taker),
            )
            if key in self._failed:
                continue
            # Only what beats the best so far matters (``_best_exchange``'s cutoff); a search
            # so cut that finds nothing may have found something above the cut.
            cut = None if best is None else best[:2]
            found = self._best_exchange(giver, taker, goal, table, cut)
            if found is None and cut is None:
                self._failed.add(key)
            if found is not None and (best is None or found[:2] < best[:2]):
                best = (found[0], found[1], giver, taker, found[2])
        if best is None:
            return set()
        if not self._commit(best[4]):
            return set()
        return {best[2], best[3]}

    def _held_flags(self, a: int, b: int) -> tuple[bool, ...]:
        """Whether a and b are held out of the replica and the leader band (``_violation``)."""
        pl = self.pl
        return tuple(bool(self._held[g.name][x]) for g in pl.count_goals for x in (a, b))

    def _held_partners(self, b: int, tried: set[int], goal: CountGoal, *, over: bool) -> list[int]:
        """The PARTNERS brokers nearest the band among those held out of it on the far side
        (above it, for an offender above; below, for one below) whose count table with b
        allows an exchange, that are not in ``tried``. Why: their goal is out of reach
        whatever they hold (the count table lets their violation grow), and where racks
        confine partitions they may be the only brokers left that can take what b must give:
        on ``combined`` (14K replicas, seed 6) the middle rack ended 164 replicas over its
        band's top with every rack-mate at the top and the third rack unable to take any of
        its partitions, while the rack held above the band could take them."""
        cnt, lo, hi = goal.of(self.pl)
        held = self._held[goal.name] & self.pl.host_b
        side = (cnt > hi) if over else (cnt < lo)
        if over:
            held &= self.recv_b
        hosts = np.flatnonzero(held & side)
        hosts = hosts[np.argsort(cnt[hosts] if over else -cnt[hosts], kind="stable")]
        return self._same_rack(
            b, [x for x in hosts.tolist() if x != b and x not in tried], goal, over=over
        )

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
        if pl.asked and not all(self._asked_accept(r, d) for r, d in moves):
            return False
        for r, d in moves:
            self._apply(r, d)
        return True

    def _asked_accept(self, r: int, d: int) -> bool:
        """Whether every goal the search does not mirror (``PlannerState.asked``) accepts
        r's move to directory d, judged on the state before the exchange: the search keeps
        the mirrored goals' bands for the exchange as a whole; another goal sees its moves
        one by one."""
        pl = self.pl
        b, s = int(pl.dir_b[d]), float(pl.size_f[r])
        cand = np.array([d])
        mv = Move(
            r=r, s=s, cand=cand, b=b, b_after=pl.b_load[b] + s, dir_after=pl.dir_load[cand] + s
        )
        return all(bool(np.all(g.accepts(pl, mv))) for g in pl.asked)

    # ------------------------------------------------------------------ search

    def _count_table(self, a: int, b: int, goal: CountGoal) -> tuple[np.ndarray, np.ndarray]:
        """The count rules of an exchange from A = a to B = b by class: rows are out-sets
        ((replicas - 1) * 3 + leaders; row 2, one replica and two leaders, cannot occur),
        columns in-replicas (none, follower, leader). Returns (allowed, fall of ``goal``):
        neither broker's violation of either goal may grow, unless the broker is held out of
        that goal's band (``_violation``: the rack's shortfall, not the broker, is what no
        plan can change, and the exchange moves a count between two brokers of one rack or
        towards the side the rack lacks), and the pair's violation of the goal worked on
        must fall, a held broker's growth not counted against it. Why the exception: where
        rack awareness holds a whole rack below the replica band, a broker of it that holds
        only leaders gains a leader only from a rack-mate, which is below that band too; and
        a rack held above the band may be the only place an offender's replicas can go."""
        pl = self.pl
        key = (
            goal.name,
            int(pl.b_reps[a]),
            int(pl.b_leaders[a]),
            int(pl.b_reps[b]),
            int(pl.b_leaders[b]),
            *self._held_flags(a, b),
            *(int(g.of(pl)[0][x]) for g in pl.count_goals for x in (a, b)),
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
        for g in pl.count_goals:
            d_o, d_i = g.exchange_delta(n_o_t, l_o_t), g.exchange_delta(n_i_t, l_i_t)
            cnt, lo, hi = g.of(pl)
            va, vb = self._cviol(cnt[a], hi, lo, a), self._cviol(cnt[b], hi, lo, b)
            wa = self._cviol(cnt[a] - d_o + d_i, hi, lo, a)
            wb = self._cviol(cnt[b] + d_o - d_i, hi, lo, b)
            h = self._held[g.name]
            ok_t &= ((wa <= va) | bool(h[a])) & ((wb <= vb) | bool(h[b]))
            # A held broker's growth is no loss (no plan meets its band): it does not
            # cancel the other's fall.
            fa, fb = va - wa, vb - wb
            fall[g.name] = (np.maximum(fa, 0) if h[a] else fa) + (np.maximum(fb, 0) if h[b] else fb)
        ok_t &= fall[goal.name] > 0
        self._tables[key] = (ok_t, fall[goal.name])
        return ok_t, fall[goal.name]

    def _grid(self, a: int, b: int) -> Grid | None:
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
        gr = Grid(
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
        return gr

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
