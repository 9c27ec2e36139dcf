"""Where a replica may go and which replica leaves: the destination search and the
source picking every greedy phase shares.

Why separate from the phases: evacuation, capacity relief, byte balance, disk balance and
the count phases differ in which directory must give and how much, not in how a destination
is chosen or a replica picked ("best fit": the largest not above what is still needed). One
search keeps the hard rules (capacity threshold, partition and rack rules, see ``core``) in
one place, and the destination score in one place.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from spindle.rebalance.goals import CountGoal
from spindle.rebalance.goals.base import Move
from spindle.rebalance.goals.counts import dir_score, taker_score
from spindle.rebalance.goals.scoring import byte_dest_score, with_misses
from spindle.rebalance.search.state import PlannerState

#: How many candidate replicas of one directory are tried before giving up on it for a need.
TRIES = 24
#: How many replicas of one directory a search that skips those no rack with room may take
#: (``Placer.may_reach``) looks through at most, in each direction.
SCAN = 1024


class Placer(PlannerState):
    """The planner's state plus the destination search and source picking over it."""

    def dest_cross(
        self,
        r: int,
        *,
        strict: bool,
        only_broker: int = -1,
        goal: CountGoal | None = None,
        joined: bool = False,
    ) -> int:
        """``_dest_cross``, timed (the profile reports destination scoring separately)."""
        t0 = time.perf_counter()
        try:
            return self._dest_cross(
                r, strict=strict, only_broker=only_broker, goal=goal, joined=joined
            )
        finally:
            self._dest_s += time.perf_counter() - t0
            self._dest_n += 1

    def _dest_cross(
        self,
        r: int,
        *,
        strict: bool,
        only_broker: int,
        goal: CountGoal | None,
        joined: bool,
    ) -> int:
        """Best directory on another broker for r, or -1. ``strict``: the destination broker and
        directory stay inside their bands (and count bands), as balancing moves must; otherwise
        the bands only rank the choices (evacuations must go somewhere). ``goal``: the count
        goal a count move works on, which then ranks the takers (None: a byte move)."""
        if only_broker >= 0:
            # One broker's few dirs: check the partition rules once, not over every dir.
            # ``joined``: the caller checked the partition rules for this taker already.
            if not joined and (only_broker == self.cur_b[r] or not self._may_join(r, only_broker)):
                return -1
            cand = self.dirs_of[only_broker]
            cand = cand[self.recv[cand] & (self.dir_load[cand] <= self.hard[cand] - self.size_f[r])]
            if strict and goal is not None and len(cand):
                return self._dest_count_move(r, cand, only_broker, goal)
        else:
            cand = np.flatnonzero(self._cross_mask(r))
        if len(cand) == 0:
            return -1
        s = self.size_f[r]
        b = self.dir_b[cand]
        b_after = self.b_load[b] + s
        dir_after = self.dir_load[cand] + s
        mv = Move(r=r, s=s, cand=cand, b=b, b_after=b_after, dir_after=dir_after)
        ok = {g.name: g.accepts(self, mv) for g in self.soft}
        in_band, dir_in = ok[self.broker_goal.name], ok[self.disk_goal.name]
        reps_ok, lead_ok = ok[self.replica_goal.name], ok[self.leader_goal.name]
        util = b_after / self._b_cap_safe[b]
        dutil = dir_after / self.total[cand]
        if goal is None:
            score = byte_dest_score(util, dutil, reps_ok, lead_ok)
        else:
            count, _, hi_c = goal.of(self)
            score = dir_score(taker_score(count[b], max(hi_c, 1), util), dutil)
        if strict:
            # Every goal this kind of move must keep vetoes it: all(g.accepts(m) for g).
            vetoes = self.count_vetoes if goal is not None else self.byte_vetoes
            keep = ok[vetoes[0].name]
            for g in vetoes[1:]:
                keep = keep & ok[g.name]
            if not keep.any():
                return -1
            score = np.where(keep, score, np.inf)
        else:
            score = with_misses(score, in_band, dir_in, reps_ok, lead_ok)
        return int(cand[int(np.argmin(score))])

    def _dest_count_move(self, r: int, cand: np.ndarray, b: int, goal: CountGoal) -> int:
        """``dest_cross`` for a count move to one given broker b (the count phases' hot path):
        the broker-level bands are scalars, so they are checked once before any directory is
        scored; the score is computed exactly as ``dest_cross`` does, so the choice is too."""
        s = self.size_f[r]
        b_after = self.b_load[b] + s
        dir_after = self.dir_load[cand] + s
        mv = Move(r=r, s=s, cand=cand, b=b, b_after=b_after, dir_after=dir_after)
        # The goals on brokers are scalars here (one taker), checked before any directory.
        if not all(g.accepts(self, mv) for g in self.count_vetoes if g.offends == "broker"):
            return -1
        keep = np.ones(len(cand), bool)
        for g in self.count_vetoes:
            if g.offends != "broker":
                keep = keep & g.accepts(self, mv)
        if not keep.any():
            return -1
        util = b_after / self._b_cap_safe[b]
        dutil = dir_after / self.total[cand]
        count, _, hi_c = goal.of(self)
        score = np.where(keep, dir_score(taker_score(count[b], max(hi_c, 1), util), dutil), np.inf)
        return int(cand[int(np.argmin(score))])

    def dest_intra(self, r: int, *, strict: bool, rehome: bool = False) -> int:
        """``_dest_intra``, timed like ``dest_cross``."""
        t0 = time.perf_counter()
        try:
            return self._dest_intra(r, strict=strict, rehome=rehome)
        finally:
            self._dest_s += time.perf_counter() - t0
            self._dest_n += 1

    def _dest_intra(self, r: int, *, strict: bool, rehome: bool = False) -> int:
        """Best other directory on r's own broker, or -1. ``rehome``: r is in an offline
        directory and goes to one of ``scope.rehome``."""
        b = int(self.cur_b[r])
        if not (rehome or self.s.intra_ok[b]):
            return -1
        cand = self.dirs_of[b]
        s = self.size_f[r]
        after = self.dir_load[cand] + s
        recv = self.s.rehome[cand] if rehome else self.recv[cand]
        ok = recv & (cand != self.cur_d[r]) & (after <= self.hard[cand])
        if strict:
            add = 0.0 if self.active[int(self.cur_d[r])] else s
            ok &= after <= self.disk_goal.top(self, cand, add)
        if not ok.any():
            return -1
        # Only where ok: an offline directory's total is 0 (and it never receives).
        util = np.full(len(cand), np.inf)
        np.divide(after, self.total[cand], out=util, where=ok)
        return int(cand[int(np.argmin(util))])

    # ----------------------------------------------------------------- picking sources

    def _breaks_closed_counts(self, r: int) -> bool:
        """Whether moving r off its broker would take a broker that cannot receive (so can
        never win them back) below the replica or leader band it is still inside."""
        b0 = int(self.cur_b[r])
        if not self._closed_b[b0]:
            return False
        reps = int(self.b_reps[b0])
        if reps - 1 < self.c_lo <= reps:
            return True
        leads = int(self.b_leaders[b0])
        return bool(self.lead[r]) and leads - 1 < self.l_lo <= leads

    def shed(
        self,
        d: int,
        need: float,
        dest: Callable[[int], int],
        *,
        floor_room: float,
        soft: bool = False,
        joins: int = -1,
        reach: np.ndarray | None = None,
    ) -> int:
        """Move one replica off directory d: the largest not above ``need``, else the smallest
        above it if at most ``floor_room`` bytes may leave. ``dest(r) -> dir`` places it.
        ``soft``: a balancing move, which may not cost a closed broker its count bands.
        ``joins``: ``dest`` places only on this broker and checks no partition rules itself
        (``dest_cross(..., joined=True)``): candidates that may not join it are dropped here,
        in bulk, still counting as tried. ``reach``: ``dest`` keeps the taker inside its byte
        band, and this is each rack's most room under it (``rack_room``): candidates no rack
        with room may take are skipped without counting as tried (``may_reach``). Returns
        the replica moved, or -1."""
        lo, hi = int(self.p.dir_start[d]), int(self.p.dir_start[d + 1])
        if hi == lo:
            return -1
        guard = soft and bool(self._closed_b[int(self.dir_b[d])])
        neg = self.neg_sorted[lo:hi]
        start = lo + int(np.searchsorted(neg, -need, side="left"))
        # Best fit first: down from the largest replica not above ``need``; then up from the
        # smallest above it, while the broker may still lose that much.
        order = self.p.order
        if guard:
            r = self._shed_scan(d, range(start, hi), dest, cap=np.inf, joins=joins)
            if r < 0:
                r = self._shed_scan(
                    d, range(start - 1, lo - 1, -1), dest, cap=floor_room, joins=joins
                )
            return r
        r = self._shed_bulk(d, order[start:hi], dest, cap=np.inf, joins=joins, reach=reach)
        if r < 0:
            r = self._shed_bulk(
                d, order[lo:start][::-1], dest, cap=floor_room, joins=joins, reach=reach
            )
        return r

    def _shed_bulk(
        self,
        d: int,
        seq: np.ndarray,
        dest: Callable[[int], int],
        *,
        cap: float,
        joins: int,
        reach: np.ndarray | None = None,
    ) -> int:
        """``_shed_scan`` without the closed-broker guard, its per-candidate checks (moved,
        size cap, the partition rules of ``joins``, the racks' room ``reach``) over growing
        windows of ``seq`` as array operations: the same replicas tried in the same order,
        for a fraction of the interpreter time (a taker on another rack refuses most of a
        giver's replicas)."""
        tries, pos, width = 0, 0, 128
        # With ``reach``, skipped replicas cost no tries: the scan still stops after SCAN.
        end = len(seq) if reach is None else min(len(seq), SCAN)
        while pos < end and tries < TRIES:
            reps = seq[pos : min(pos + width, end)]
            pos, width = pos + width, min(2 * width, 1024)
            reps = reps[~self.moved[reps] & (self.cur_d[reps] == d)]
            big = np.flatnonzero(self.size_f[reps] > cap)
            if len(big):
                reps, pos = reps[: int(big[0])], len(seq)  # sizes only grow past the cap
            if reach is not None and len(reps):
                reps = reps[self.may_reach(reps, reach)]
            reps = reps[: TRIES - tries]
            tries += len(reps)
            if joins >= 0 and len(reps):
                reps = reps[(self.cur_b[reps] != joins) & self._may_join_many(reps, joins)]
            for r in reps.tolist():
                target = dest(r)
                if target >= 0 and self.budget_allows(r):
                    self.apply(r, target)
                    return int(r)
        return -1

    def _shed_scan(
        self, d: int, span: range, dest: Callable[[int], int], *, cap: float, joins: int
    ) -> int:
        """One direction of ``shed`` for a closed broker's directory: the replicas of
        directory d at the ``span`` positions of the candidate order (moved ones skipped),
        at most ``TRIES`` of them tried, stopping at the first larger than ``cap`` bytes
        (sizes only grow in the upward direction), skipping replicas whose leaving would
        cost the closed broker its count bands. Returns the replica moved, or -1."""
        order = self.p.order
        tries = 0
        for i in span:
            r = int(order[i])
            if self.moved[r] or self.cur_d[r] != d:
                continue
            if self.size_f[r] > cap:
                break
            if self._breaks_closed_counts(r):
                continue
            tries += 1
            if tries > TRIES:
                break
            if joins >= 0 and (joins == self.cur_b[r] or not self._may_join(r, joins)):
                continue
            target = dest(r)
            if target >= 0 and self.budget_allows(r):
                self.apply(r, target)
                return r
        return -1

    def _fullest_dirs(self, b: int, skip: set[int]) -> list[int]:
        dirs = [int(d) for d in self.dirs_of[b] if self.hosting[d] and int(d) not in skip]
        dirs.sort(key=lambda d: (-self.dir_load[d] / self.total[d], d))
        return dirs

    def _shed_broker(self, b: int, need: float, floor_room: float, *, only_broker: int) -> int:
        joined = only_broker >= 0  # shed checks the partition rules of only_broker
        # Any taker: skip the replicas no rack with byte room may take (strict destinations
        # keep takers inside their byte band). Why: where rack awareness confines partitions
        # and a rack has filled up, a giver's best fits are often all confined to it, and
        # ``TRIES`` spent on them left the giver stuck above its band with replicas further
        # down that other racks could take (combined, 14K replicas, seed 6: three brokers of
        # the smallest rack ended 1.40-1.55x their rack's mean, their rack-mates full).
        reach = None if joined else self.rack_room()
        for d in self._fullest_dirs(b, set()):
            r = self.shed(
                d,
                need,
                lambda r: self.dest_cross(r, strict=True, only_broker=only_broker, joined=joined),
                floor_room=floor_room,
                soft=True,
                joins=only_broker,
                reach=reach,
            )
            if r >= 0:
                return r
        return -1

    def rack_room(self, takers: np.ndarray | None = None) -> np.ndarray:
        """Per rack: the most bytes any of its brokers that may receive (and are among
        ``takers``, if given) can take and stay under its byte band's top (-inf: none)."""
        if self._rack_cut is None:
            # Brokers grouped by rack once (racks are few; a search asks this per move).
            order = np.argsort(self._rack_of_b, kind="stable")
            cuts = np.searchsorted(self._rack_of_b[order], np.arange(len(self.c.racks) + 1))
            self._rack_cut = (order, cuts, self.host_b & self.recv_broker())
        order, cuts, open_b = self._rack_cut
        ok = open_b if takers is None else open_b & takers
        vals = np.where(ok, self.b_hi - self.b_load, -np.inf)[order]
        room = np.full(len(self.c.racks), -np.inf)
        # One reduction over the racks with brokers (each runs to the next one's start).
        filled = cuts[:-1] < cuts[1:]
        if filled.any():
            room[filled] = np.maximum.reduceat(vals, cuts[:-1][filled])
        return room

    def may_reach(self, reps: np.ndarray, room: np.ndarray) -> np.ndarray:
        """Whether some rack with at least each replica's size of ``room`` may take it under
        the rack limit: what a destination that keeps its taker inside the byte band needs
        at the least, so a replica refused here would be refused by the search too."""
        size = self.size_f[reps]
        if not self.g.rack_aware:
            return np.asarray(size <= room.max(initial=-np.inf))
        own = self._rack_of_b[self.cur_b[reps]]
        # Its own rack first: a move inside a rack keeps the partition's rack counts.
        ok: np.ndarray = np.asarray(size <= room[own])
        if ok.all():
            return ok
        # Then any other rack with room whose limit the partition is under. Evaluated for
        # every replica (those already ok stay ok): cheaper than picking out the rest.
        smallest = float(size.min())
        racks = [(rk, v) for rk, v in enumerate(room.tolist()) if v >= smallest]
        if racks:
            parts = self.c.rep_part[reps]
            limit = self.rack_limit[parts]
            for rk, room_rk in racks:
                ok |= (own != rk) & (size <= room_rk) & (self._prack[rk][parts] < limit)
        return ok

    def _swap_off(self, d: int) -> int:
        """Last resort for a directory above the capacity threshold when no replica can simply
        leave it (few large replicas, little room anywhere): swap one of its replicas r with a
        smaller replica q of another directory e, r to e and q to d, when both then fit and
        both moves keep the partition and rack rules. Bounded: the 8 largest unmoved replicas
        of d, every directory that may take them, the 16 smallest unmoved replicas there.
        Returns r, or -1. Full mode only (the other modes promise no other moves)."""
        if not self.recv[d]:
            return -1
        b_d = int(self.dir_b[d])
        on_d = [int(r) for r in np.flatnonzero((self.cur_d == d) & ~self.moved)]
        on_d.sort(key=lambda r: (-int(self.size[r]), r))
        for r in on_d[:8]:
            s_r = float(self.size_f[r])
            p_r = self._rep_part[r]
            mask = (
                self._cross_mask(r, capacity=False) if self.s.cross_ok else np.zeros_like(self.recv)
            )
            if self.s.intra_ok[b_d]:
                mask = mask | (self.recv & (self.dir_b == b_d))
            mask[d] = False
            for e in np.flatnonzero(mask).tolist():
                b_e = int(self.dir_b[e])
                gap = float(self.dir_load[e]) + s_r - float(self.hard[e])  # q must free this
                on_e = np.flatnonzero((self.cur_d == e) & ~self.moved)
                on_e = on_e[np.lexsort((on_e, self.size[on_e]))][:16]
                for q in on_e.tolist():
                    s_q = float(self.size_f[q])
                    if s_q >= s_r or s_q < gap or self._rep_part[q] == p_r:
                        continue
                    if self.dir_load[d] - s_r + s_q > self.hard[d]:
                        break  # larger q only make d fuller
                    if b_e != b_d and not self._may_join(q, b_d):
                        continue
                    if not self.budget_allows_two(r, q):
                        return -1
                    self.apply(r, e)
                    self.apply(q, d)
                    return r
        return -1

    def make_room_for(self, r: int) -> int:
        """Last resort before refusing a plan: a directory that r may join except for room is
        made room in by moving up to three of its own replicas elsewhere (one step of a chain),
        then returned as r's destination; -1 if none works. Used only in full mode (the other
        modes promise to move nothing else) and only where the plan would otherwise fail a
        hard goal, so the extra moves buy a feasible plan."""
        s = self.size_f[r]
        mask = self._cross_mask(r, capacity=False) & (self.hard >= s)
        cand = np.flatnonzero(mask)
        if len(cand) == 0:
            return -1
        short = self.dir_load[cand] + s - self.hard[cand]
        for d in cand[np.argsort(short, kind="stable")][:8].tolist():
            for _ in range(3):
                need = float(self.dir_load[d] + s - self.hard[d])
                if need <= 0:
                    break
                b = int(self.dir_b[d])
                q = -1
                if self.s.intra_ok[b]:
                    q = self.shed(
                        d,
                        need,
                        lambda q: self.dest_intra(q, strict=False),
                        floor_room=float(self.dir_load[d]),
                    )
                if q < 0:
                    q = self.shed(
                        d,
                        need,
                        lambda q: self.dest_cross(q, strict=False),
                        floor_room=float(self.dir_load[d]),
                    )
                if q < 0:
                    break
            if self.dir_load[d] + s <= self.hard[d] and self._cross_mask(r)[d]:
                return int(d)
        return -1

    def _cross_dest(self, *, strict: bool) -> Callable[[int], int]:
        """Destination rule "best directory on another broker" (see ``dest_cross``)."""

        def dest(r: int) -> int:
            return self.dest_cross(r, strict=strict)

        return dest

    def _into(self, d: int) -> Callable[[int], int]:
        """Destination rule "directory d, if it stays under the capacity threshold"."""

        def dest(r: int) -> int:
            return d if self.dir_load[d] + self.size_f[r] <= self.hard[d] else -1

        return dest
