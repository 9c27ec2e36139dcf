"""The sequential core: a greedy that walks only the replicas it moves.

Why greedy and why this order: every byte moved is a byte copied over a network or a disk, so
the planner first computes how much must leave each broker and each directory (the bands of
the soft goals, the hard capacity limit, the directories that must be emptied) and then moves
the largest replica that does not overshoot what is still needed ("best fit"), from the
fullest directory of the giving broker to the emptiest directory of the taking one. Moving
across brokers that way also evens out the directories on both ends, so brokers and disks are
planned in one pass; what remains inside a broker is fixed by moves between its own disks,
which cost no network. Replica and leader counts are evened last with the smallest replicas,
mostly in rounds: a proposer (``propose``; Spark tasks in the real job) turns the live state
into a batch of candidate moves, this driver re-checks each against what earlier moves
changed and applies it or skips it, and the next round proposes again; the one-move-at-a-time
search finishes what the rounds leave.

Rules kept at every step (never checked only at the end):
  - a replica moves at most once (``moved``);
  - a destination directory is Active, in scope, and stays under the capacity threshold;
  - a destination broker holds no other replica of the partition, held none in the snapshot
    (Kafka names replicas by broker: replicas [2, 4, 3] after moving slot 1 from 2 to 4 and
    slot 0 from 1 to 2 is one copy to broker 4 and a reorder, not two moves), and its rack
    holds fewer than ``max_per_rack`` of them;
  - the replica keeps its position in the replica list, so order and leadership are kept.

Deterministic: every choice is an argmin/argmax over arrays in index order, so ties go to the
lowest index; the same snapshot gives the same moves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from spindle.rebalance.bands import band_floor, count_band
from spindle.rebalance.exchange import exchange_counts
from spindle.rebalance.model import ACTIVE, STATES, Cluster, Goals, SnapshotError
from spindle.rebalance.prepare import Prepared, hosting_racks, rack_limits
from spindle.rebalance.propose import (
    UTIL_WEIGHT,
    CountProposer,
    CountRound,
    LocalProposer,
    Proposals,
)
from spindle.rebalance.scope import Request, Scope

#: How many candidate replicas of one directory are tried before giving up on it for a need.
TRIES = 24
#: How much a destination directory's own fullness counts next to its broker's when ranking
#: destinations for byte moves: a tie-breaker (larger weights were measured: no gain).
DIR_WEIGHT = 1e-3
#: Proposer rounds per count phase at most (each round re-proposes from the live state).
MAX_ROUNDS = 8
#: Fewest count moves worth a proposer round; below, the stepwise search does them. A round
#: has a fixed cost (one Spark job, about half a second in local mode), the stepwise search
#: about 0.1 ms a move: this leans to Spark, which scales out, while sparing it the residues.
ROUND_MIN = 1024
#: Takers a proposal batch keeps per replica (the driver tries them best first).
PER_REPLICA = 8


@dataclass(kw_only=True)
class Outcome:
    """The core's result: where each replica ends, and what could not be done."""

    cur_broker: np.ndarray
    cur_dir: np.ndarray
    moved: np.ndarray
    #: Goals (hard or soft) that were not met, with why.
    unmet: list[dict[str, object]] = field(default_factory=list)
    #: Hard-goal failures: the plan must be refused.
    hard_failures: list[str] = field(default_factory=list)
    capped: bool = False
    n_moves: int = 0
    #: Which replica leads each partition after the plan (differs only with leader_reorder).
    leader: np.ndarray | None = None
    #: Seconds the driver spent per phase, and inside destination scoring (``dest_cross`` /
    #: ``dest_intra``) with how many destinations it scored: where the sequential time goes.
    profile: dict[str, float] = field(default_factory=dict)


class Planner:
    """Mutable planning state over one cluster. Not thread-safe; one instance per plan."""

    def __init__(
        self,
        cluster: Cluster,
        prepared: Prepared,
        scope: Scope,
        *,
        goals: Goals,
        request: Request,
    ) -> None:
        self.c = cluster
        self.p = prepared
        self.s = scope
        self.g = goals
        self.req = request
        n_b = cluster.n_brokers
        self.size = cluster.rep_size
        self.size_f = cluster.rep_size.astype(np.float64)
        self.cur_b = cluster.rep_broker.copy()
        self.cur_d = cluster.rep_dir.copy()
        self.moved = np.zeros(cluster.n_replicas, bool)
        self.lead = cluster.rep_leader.copy()  # changes only with goals.leader_reorder
        self.dir_b = cluster.dir_broker
        self.dir_rack = cluster.broker_rack[cluster.dir_broker]
        self.total = cluster.dir_total.astype(np.float64)
        self.hard = goals.capacity_threshold * self.total
        self.hosting = scope.hosting
        self.active = scope.hosting & (cluster.dir_state == ACTIVE)
        self.recv = scope.receivable.copy()

        ext = cluster.dir_external().astype(np.float64)
        self.dir_load: np.ndarray = np.where(self.hosting, prepared.dir_rep_bytes + ext, 0.0)
        self.b_load: np.ndarray = np.bincount(self.dir_b, weights=self.dir_load, minlength=n_b)
        self.b_cap: np.ndarray = np.bincount(
            self.dir_b, weights=self.total * self.hosting, minlength=n_b
        )
        self.b_hard: np.ndarray = np.bincount(
            self.dir_b, weights=self.hard * self.hosting, minlength=n_b
        )
        self.a_load: np.ndarray = np.bincount(
            self.dir_b, weights=self.dir_load * self.active, minlength=n_b
        )
        self.a_cap: np.ndarray = np.bincount(
            self.dir_b, weights=self.total * self.active, minlength=n_b
        )
        self.b_reps = np.bincount(
            self.dir_b, weights=prepared.dir_reps * self.hosting, minlength=n_b
        ).astype(np.int64)
        self.b_leaders = np.bincount(
            self.dir_b, weights=prepared.dir_leaders * self.hosting, minlength=n_b
        ).astype(np.int64)

        # Cluster-wide targets. Bytes and counts of replicas that must find a new home are
        # part of the totals: they will land somewhere.
        stuck_offline = ~self.hosting & ~scope.evacuate
        rep_stuck = stuck_offline[cluster.rep_dir]
        placed_bytes = float(self.size_f[~rep_stuck].sum()) + float(ext[self.hosting].sum())
        self.host_b = self.b_cap > 0
        cap_sum = float(self.b_cap.sum())
        self.mean_util = placed_bytes / cap_sum if cap_sum > 0 else 0.0
        bb = goals.broker_balance
        self.b_hi: np.ndarray = np.minimum(bb * self.mean_util * self.b_cap, self.b_hard)
        self.b_lo: np.ndarray = np.minimum(band_floor(bb, self.mean_util) * self.b_cap, self.b_hi)
        n_host = max(int(self.host_b.sum()), 1)
        mean_reps = int((~rep_stuck).sum()) / n_host
        mean_leaders = int((cluster.rep_leader & ~rep_stuck).sum()) / n_host
        self.c_lo, self.c_hi = count_band(goals.replica_balance, mean_reps)
        self.l_lo, self.l_hi = count_band(goals.leader_balance, mean_leaders)

        self.n_racks = hosting_racks(cluster, scope)
        self.rack_limit = rack_limits(np.diff(cluster.part_start), self.n_racks)
        self.dirs_of = [np.flatnonzero(self.dir_b == b) for b in range(n_b)]
        self.neg_sorted = -self.size[prepared.order]
        self.n_moves = 0
        self.bytes_moved = 0
        self.capped = False
        self.unmet: list[dict[str, object]] = []
        self.hard_failures: list[str] = []
        self._bad_b = np.zeros(n_b, bool)
        self._closed_b = self.host_b & ~self.recv_broker()
        # Brokers of each partition's replicas, padded with -1: vectorised partition rules.
        rf = np.diff(cluster.part_start)
        self._slot = np.arange(cluster.n_replicas) - cluster.part_start[cluster.rep_part]
        self._members = np.full((cluster.n_partitions, max(int(rf.max(initial=0)), 1)), -1)
        self._members[cluster.rep_part, self._slot] = self.cur_b
        # The same in the snapshot: a broker that held the partition takes none of its replicas.
        self._members0 = self._members.copy()
        self._rack_of_b = cluster.broker_rack.astype(np.int64)
        self._bad_rack = np.zeros(len(cluster.racks), bool)
        # Python lists for scalar look-ups in the hot loop (numpy scalar indexing is slow).
        self._rep_part = cluster.rep_part.tolist()
        self._rep_broker0 = cluster.rep_broker.tolist()
        self._part_start = cluster.part_start.tolist()
        self._rack_limit = self.rack_limit.tolist()
        self._broker_rack = cluster.broker_rack.tolist()
        self._a_cap_safe = np.where(self.a_cap > 0, self.a_cap, np.inf)
        self._b_cap_safe = np.where(self.b_cap > 0, self.b_cap, np.inf)
        self._lo_util = self.b_lo / self._b_cap_safe
        self._small: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros(1, np.int64))
        self._small_list: list[int] = []
        self._by_broker: np.ndarray | None = None
        self._small_ptr: list[int] = []
        self._dest_s = 0.0
        self._dest_n = 0
        self.proposer: CountProposer = prepared.proposer or LocalProposer(
            cluster, rack_limit=self.rack_limit
        )
        self._prop_s = 0.0
        self._dirs_of_l: list[list[int]] | None = None
        self._prop_rounds = 0
        self._prop_n = 0
        self._prop_applied = 0

    # ------------------------------------------------- bookkeeping (public: exchanges use it)

    def budget_allows(self, r: int) -> bool:
        """Whether moving replica ``r`` stays within ``--max-moves`` / ``--max-bytes``; a
        refusal marks the plan capped, so the summary can say the caps stopped it."""
        req = self.req
        if req.max_moves is not None and self.n_moves + 1 > req.max_moves:
            self.capped = True
            return False
        if req.max_bytes is not None and self.bytes_moved + int(self.size[r]) > req.max_bytes:
            self.capped = True
            return False
        return True

    def budget_allows_two(self, r: int, q: int) -> bool:
        """``budget_allows`` for two moves made together (a swap)."""
        req = self.req
        if req.max_moves is not None and self.n_moves + 2 > req.max_moves:
            self.capped = True
            return False
        both = self.bytes_moved + int(self.size[r]) + int(self.size[q])
        if req.max_bytes is not None and both > req.max_bytes:
            self.capped = True
            return False
        return True

    def apply(self, r: int, d: int) -> None:
        """Move replica ``r`` to directory ``d`` and update every load and count the goals
        read, so the next decision sees the cluster as it now is."""
        s = self.size_f[r]
        d0 = int(self.cur_d[r])
        b0 = int(self.cur_b[r])
        b = int(self.dir_b[d])
        leader = bool(self.lead[r])
        if self.hosting[d0]:
            self.dir_load[d0] -= s
            self.b_load[b0] -= s
            if self.active[d0]:
                self.a_load[b0] -= s
            self.b_reps[b0] -= 1
            self.b_leaders[b0] -= leader
        self.dir_load[d] += s
        self.b_load[b] += s
        self.a_load[b] += s
        self.b_reps[b] += 1
        self.b_leaders[b] += leader
        self.cur_d[r] = d
        self.cur_b[r] = b
        self._members[self._rep_part[r], self._slot[r]] = b
        self.moved[r] = True
        self.n_moves += 1
        self.bytes_moved += int(self.size[r])

    # ----------------------------------------------------------------- destinations

    def _cross_mask(self, r: int, *, capacity: bool = True) -> np.ndarray:
        """Directories on other brokers that may take replica r under the hard rules
        (``capacity=False``: all but the capacity threshold). Brokers that hold or held a
        replica of r's partition are excluded (see the module docstring)."""
        p = self._rep_part[r]
        lo, hi = self._part_start[p], self._part_start[p + 1]
        members = self.cur_b[lo:hi]
        held = self.c.rep_broker[lo:hi]
        self._bad_b[members] = True
        self._bad_b[held] = True
        ok = self.recv & ~self._bad_b[self.dir_b]
        self._bad_b[members] = False
        self._bad_b[held] = False
        if self.g.rack_aware and hi - lo > 1:
            # Plain Python over the few replicas of one partition beats numpy set operations.
            limit = self._rack_limit[p]
            seen: dict[int, int] = {}
            for i, b in enumerate(members.tolist()):
                if lo + i != r:
                    rk = self._broker_rack[b]
                    seen[rk] = seen.get(rk, 0) + 1
            full = [rk for rk, n in seen.items() if n >= limit]
            if full:
                self._bad_rack[full] = True
                ok &= ~self._bad_rack[self.dir_rack]
                self._bad_rack[full] = False
        if capacity:
            ok &= self.dir_load <= self.hard - self.size_f[r]
        return ok

    def _may_join(self, r: int, b: int) -> bool:
        """Whether broker b may take replica r under the partition rules (one replica per
        broker, none onto a broker that held the partition in the snapshot, rack limit);
        capacity is checked by the destination search."""
        p = self._rep_part[r]
        lo, hi = self._part_start[p], self._part_start[p + 1]
        members = self.cur_b[lo:hi].tolist()
        if b in members or b in self._rep_broker0[lo:hi]:
            return False
        if not self.g.rack_aware:
            return True
        rk = self._broker_rack[b]
        same = sum(1 for i, m in enumerate(members) if lo + i != r and self._broker_rack[m] == rk)
        return bool(same < self._rack_limit[p])

    def _dir_hi(self, d: np.ndarray, add: float) -> np.ndarray:
        """Upper band of directories d if ``add`` bytes land on their broker's Active dirs."""
        b = self.dir_b[d]
        u = (self.a_load[b] + add) / self._a_cap_safe[b]
        if self.s.balance_brokers:
            # A broker being filled ends at least at its lower band; judging its first
            # arrivals against today's (near-empty) mean would refuse them all.
            u = np.maximum(u, self._lo_util[b])
        return np.asarray(np.minimum(self.hard[d], self.g.disk_balance * u * self.total[d]))

    def dest_cross(
        self,
        r: int,
        *,
        strict: bool,
        only_broker: int = -1,
        goal: str = "bytes",
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
        goal: str,
        joined: bool,
    ) -> int:
        """Best directory on another broker for r, or -1. ``strict``: the destination broker and
        directory stay inside their bands (and count bands), as balancing moves must; otherwise
        the bands only rank the choices (evacuations must go somewhere)."""
        if only_broker >= 0:
            # One broker's few dirs: check the partition rules once, not over every dir.
            # ``joined``: the caller checked the partition rules for this taker already.
            if not joined and (only_broker == self.cur_b[r] or not self._may_join(r, only_broker)):
                return -1
            cand = self.dirs_of[only_broker]
            cand = cand[self.recv[cand] & (self.dir_load[cand] <= self.hard[cand] - self.size_f[r])]
            if strict and goal != "bytes" and len(cand):
                return self._dest_count_move(r, cand, only_broker, goal)
        else:
            cand = np.flatnonzero(self._cross_mask(r))
        if len(cand) == 0:
            return -1
        s = self.size_f[r]
        b = self.dir_b[cand]
        b_after = self.b_load[b] + s
        in_band = b_after <= self.b_hi[b]
        dir_after = self.dir_load[cand] + s
        dir_in = dir_after <= self._dir_hi(cand, s)
        reps_ok = self.b_reps[b] + 1 <= self.c_hi
        lead_ok = ~np.bool_(self.lead[r]) | (self.b_leaders[b] + 1 <= self.l_hi)
        util = b_after / self._b_cap_safe[b]
        dutil = dir_after / self.total[cand]
        if goal == "bytes":
            # Counts rank byte moves but do not forbid them: the count phase evens them later
            # with the smallest replicas, which costs far fewer bytes than refusing here.
            score = util + DIR_WEIGHT * dutil + 0.02 * ~reps_ok + 0.02 * ~lead_ok
        elif goal == "reps":
            score = self.b_reps[b] / max(self.c_hi, 1) + 1e-3 * util + 1e-6 * dutil
        else:
            score = self.b_leaders[b] / max(self.l_hi, 1) + 1e-3 * util + 1e-6 * dutil
        if strict:
            keep = in_band & dir_in
            if goal != "bytes":
                keep &= reps_ok & lead_ok
            if not keep.any():
                return -1
            score = np.where(keep, score, np.inf)
        else:
            score = score + 10.0 * ~in_band + 1.0 * ~dir_in + 0.5 * ~reps_ok + 0.5 * ~lead_ok
        return int(cand[int(np.argmin(score))])

    def _dest_count_move(self, r: int, cand: np.ndarray, b: int, goal: str) -> int:
        """``dest_cross`` for a count move to one given broker b (the count phases' hot path):
        the broker-level bands are scalars, so they are checked once before any directory is
        scored; the score is computed exactly as ``dest_cross`` does, so the choice is too."""
        s = self.size_f[r]
        b_after = self.b_load[b] + s
        if b_after > self.b_hi[b] or self.b_reps[b] + 1 > self.c_hi:
            return -1
        if self.lead[r] and self.b_leaders[b] + 1 > self.l_hi:
            return -1
        dir_after = self.dir_load[cand] + s
        keep = dir_after <= self._dir_hi(cand, s)
        if not keep.any():
            return -1
        util = b_after / self._b_cap_safe[b]
        dutil = dir_after / self.total[cand]
        if goal == "reps":
            base = self.b_reps[b] / max(self.c_hi, 1)
        else:
            base = self.b_leaders[b] / max(self.l_hi, 1)
        score = np.where(keep, base + 1e-3 * util + 1e-6 * dutil, np.inf)
        return int(cand[int(np.argmin(score))])

    def dest_intra(self, r: int, *, strict: bool) -> int:
        """``_dest_intra``, timed like ``dest_cross``."""
        t0 = time.perf_counter()
        try:
            return self._dest_intra(r, strict=strict)
        finally:
            self._dest_s += time.perf_counter() - t0
            self._dest_n += 1

    def _dest_intra(self, r: int, *, strict: bool) -> int:
        """Best other directory on r's own broker, or -1."""
        b = int(self.cur_b[r])
        if not self.s.intra_ok[b]:
            return -1
        cand = self.dirs_of[b]
        s = self.size_f[r]
        after = self.dir_load[cand] + s
        ok = self.recv[cand] & (cand != self.cur_d[r]) & (after <= self.hard[cand])
        if strict:
            add = 0.0 if self.active[int(self.cur_d[r])] else s
            ok &= after <= self._dir_hi(cand, add)
        if not ok.any():
            return -1
        util = np.where(ok, after / self.total[cand], np.inf)
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
    ) -> int:
        """Move one replica off directory d: the largest not above ``need``, else the smallest
        above it if at most ``floor_room`` bytes may leave. ``dest(r) -> dir`` places it.
        ``soft``: a balancing move, which may not cost a closed broker its count bands.
        Returns the replica moved, or -1."""
        lo, hi = int(self.p.dir_start[d]), int(self.p.dir_start[d + 1])
        if hi == lo:
            return -1
        guard = soft and bool(self._closed_b[int(self.dir_b[d])])
        neg = self.neg_sorted[lo:hi]
        start = lo + int(np.searchsorted(neg, -need, side="left"))
        # Best fit first: down from the largest replica not above ``need``; then up from the
        # smallest above it, while the broker may still lose that much.
        r = self._shed_scan(d, range(start, hi), dest, cap=np.inf, guard=guard)
        if r < 0:
            r = self._shed_scan(d, range(start - 1, lo - 1, -1), dest, cap=floor_room, guard=guard)
        return r

    def _shed_scan(
        self, d: int, span: range, dest: Callable[[int], int], *, cap: float, guard: bool
    ) -> int:
        """One direction of ``shed``: the replicas of directory d at the ``span`` positions of
        the candidate order (moved ones skipped), at most ``TRIES`` of them tried, stopping at
        the first larger than ``cap`` bytes (sizes only grow in the upward direction).
        ``guard``: skip replicas whose leaving would cost a closed broker its count bands.
        Returns the replica moved, or -1."""
        order = self.p.order
        tries = 0
        for i in span:
            r = int(order[i])
            if self.moved[r] or self.cur_d[r] != d:
                continue
            if self.size_f[r] > cap:
                break
            if guard and self._breaks_closed_counts(r):
                continue
            tries += 1
            if tries > TRIES:
                break
            target = dest(r)
            if target >= 0 and self.budget_allows(r):
                self.apply(r, target)
                return r
        return -1

    # ----------------------------------------------------------------- phases

    def evacuate(self) -> None:
        """Every replica on a directory that must be emptied gets a new home, largest first
        (first-fit decreasing packs best). Inside the broker when allowed and the broker is not
        over its band; else on another broker."""
        reps = np.flatnonzero(self.s.evacuate[self.cur_d])
        reps = reps[np.lexsort((reps, -self.size[reps]))]
        balance = self.s.balance_brokers
        for r in reps.tolist():
            d0 = int(self.cur_d[r])
            b0 = int(self.cur_b[r])
            target = -1
            if not self.s.must_leave_broker[d0] and self.s.intra_ok[b0]:
                fits = not balance or self.b_load[b0] + self.size_f[r] <= self.b_hi[b0]
                if fits:
                    target = self.dest_intra(r, strict=True)
                    if target < 0:
                        target = self.dest_intra(r, strict=False)
            if target < 0 and self.s.cross_ok:
                target = self.dest_cross(r, strict=False)
            if target < 0 and not self.s.must_leave_broker[d0] and self.s.intra_ok[b0]:
                target = self.dest_intra(r, strict=False)
            if target < 0 and self.s.mode == "full":
                target = self.make_room_for(r)
            if target < 0:
                self.hard_failures.append(
                    f"{self._name(r)} on broker {self.c.broker_ids[b0]} dir "
                    f"{self.c.dir_path[d0]} must move (dir {self._state(d0)}) but no directory "
                    f"can take it: {self._why_nowhere(r)}"
                )
                continue
            if not self.budget_allows(r):
                self.unmet.append({"goal": "evacuate", "why": "stopped by --max-moves/--max-bytes"})
                return
            self.apply(r, target)

    def fix_racks(self) -> None:
        """Partitions with two replicas on one rack (when racks allow) move the smallest
        non-leader replica of the crowded rack to a rack that has room."""
        for p in self.p.rack_violations.tolist():
            lo, hi = int(self.c.part_start[p]), int(self.c.part_start[p + 1])
            while True:
                racks = self.c.broker_rack[self.cur_b[lo:hi]]
                uniq, counts = np.unique(racks, return_counts=True)
                crowded = uniq[counts > self.rack_limit[p]]
                if len(crowded) == 0:
                    break
                on = [r for r in range(lo, hi) if racks[r - lo] == crowded[0] and not self.moved[r]]
                on.sort(key=lambda r: (bool(self.lead[r]), r))
                done = False
                for r in on:
                    target = self.dest_cross(r, strict=False)
                    if target >= 0 and self.budget_allows(r):
                        self.apply(r, target)
                        done = True
                        break
                if not done:
                    if not self.capped:
                        self.hard_failures.append(
                            f"{self._name(lo)}: replicas share rack "
                            f"{self.c.racks[int(crowded[0])]!r} and no broker on another rack "
                            "can take one"
                        )
                    break

    def _fullest_dirs(self, b: int, skip: set[int]) -> list[int]:
        dirs = [int(d) for d in self.dirs_of[b] if self.hosting[d] and int(d) not in skip]
        dirs.sort(key=lambda d: (-self.dir_load[d] / self.total[d], d))
        return dirs

    def balance_broker_bytes(self) -> None:
        """Brokers above their band give to brokers below it (or with room), then brokers below
        the band take from the fullest brokers."""
        stuck: set[int] = set()
        while not self.capped:
            excess = np.where(self.host_b, self.b_load - self.b_hi, 0.0)
            excess[list(stuck)] = 0.0
            b = int(np.argmax(excess / np.maximum(self.b_cap, 1.0)))
            if excess[b] <= 0:
                break
            floor_room = float(self.b_load[b] - self.b_lo[b])
            if self._shed_broker(b, float(excess[b]), floor_room, only_broker=-1) < 0:
                stuck.add(b)
        stuck.clear()
        while not self.capped:
            deficit = np.where(self.host_b & self.recv_broker(), self.b_lo - self.b_load, 0.0)
            deficit[list(stuck)] = 0.0
            b = int(np.argmax(deficit / np.maximum(self.b_cap, 1.0)))
            if deficit[b] <= 0:
                break
            moved = -1
            with np.errstate(invalid="ignore", divide="ignore"):
                util = np.where(self.host_b, self.b_load / self.b_cap, -np.inf)
            for donor in np.argsort(-util, kind="stable").tolist():
                slack = float(self.b_load[donor] - self.b_lo[donor])
                if donor == b or slack <= 0 or not self.host_b[donor]:
                    continue
                need = min(float(deficit[b]), slack)
                room = min(float(self.b_hi[b] - self.b_load[b]), slack)
                moved = self._shed_broker(donor, need, room, only_broker=b)
                if moved >= 0:
                    break
            if moved < 0:
                stuck.add(b)

    def recv_broker(self) -> np.ndarray:
        out = np.zeros(self.c.n_brokers, bool)
        out[self.dir_b[self.recv]] = True
        return out

    def _shed_broker(self, b: int, need: float, floor_room: float, *, only_broker: int) -> int:
        for d in self._fullest_dirs(b, set()):
            r = self.shed(
                d,
                need,
                lambda r: self.dest_cross(r, strict=True, only_broker=only_broker),
                floor_room=floor_room,
                soft=True,
            )
            if r >= 0:
                return r
        return -1

    def balance_disks(self) -> None:
        """Inside each broker: directories above their band (or the capacity threshold) give to
        the emptiest directories; directories below their band take from the fullest."""
        db = self.g.disk_balance
        for b in range(self.c.n_brokers):
            if not self.s.intra_ok[b] or self.a_cap[b] <= 0:
                self._relieve_across(b)
                self._shed_blocked(b)
                continue
            dirs = [int(d) for d in self.dirs_of[b] if self.hosting[d]]
            stuck: set[int] = set()
            while not self.capped:
                u = self.a_load[b] / self.a_cap[b]
                hi = {d: self._hi_one(d, u) for d in dirs}
                excess = {d: self.dir_load[d] - hi[d] for d in dirs if d not in stuck}
                d = max(excess, key=lambda k: (excess[k] / self.total[k], -k), default=-1)
                if d < 0 or excess[d] <= 0:
                    break
                lo = band_floor(db, u) * self.total[d] if self.active[d] else 0.0
                r = self.shed(
                    d,
                    float(excess[d]),
                    lambda r: self.dest_intra(r, strict=True),
                    floor_room=float(self.dir_load[d] - lo),
                )
                if r < 0 and self.dir_load[d] > self.hard[d] and self.s.cross_ok:
                    r = self.shed(
                        d,
                        float(self.dir_load[d] - self.hard[d]),
                        lambda r: self.dest_cross(r, strict=False),
                        floor_room=float(self.dir_load[d]),
                    )
                if r < 0:
                    stuck.add(d)
            stuck.clear()
            while not self.capped:
                u = self.a_load[b] / self.a_cap[b]
                deficit = {
                    d: band_floor(db, u) * self.total[d] - self.dir_load[d]
                    for d in dirs
                    if self.recv[d] and d not in stuck
                }
                d = max(deficit, key=lambda k: (deficit[k] / self.total[k], -k), default=-1)
                if d < 0 or deficit[d] <= 0:
                    break
                moved = -1
                for donor in self._fullest_dirs(b, {d}):
                    lo_donor = band_floor(db, u) * self.total[donor] if self.active[donor] else 0.0
                    slack = float(self.dir_load[donor] - lo_donor)
                    if slack <= 0:
                        continue
                    room = min(slack, float(self._hi_one(d, u) - self.dir_load[d]))
                    moved = self.shed(
                        donor,
                        min(float(deficit[d]), slack),
                        self._into(d),
                        floor_room=room,
                    )
                    if moved >= 0:
                        break
                if moved < 0:
                    stuck.add(d)

    def relieve_capacity(self) -> None:
        """Directories above the capacity threshold shed first, fullest first, before any
        balancing fills the free space they need (a large replica may fit in few places)."""
        over = np.flatnonzero(self.hosting & (self.dir_load > self.hard))
        over = over[np.argsort(-(self.dir_load[over] / self.total[over]), kind="stable")]
        for d in over.tolist():
            b = int(self.dir_b[d])
            while self.dir_load[d] > self.hard[d] and not self.capped:
                need = float(self.dir_load[d] - self.hard[d])
                r = -1
                if self.s.cross_ok and self.s.balance_brokers and self.b_load[b] > self.b_hi[b]:
                    # The broker must give bytes away anyway: one move serves both goals.
                    r = self.shed(
                        d,
                        need,
                        lambda r: self.dest_cross(r, strict=True),
                        floor_room=float(self.b_load[b] - self.b_lo[b]),
                    )
                if r < 0 and self.s.intra_ok[b]:
                    r = self.shed(
                        d, need, lambda r: self.dest_intra(r, strict=True), floor_room=need * 4
                    )
                    if r < 0:
                        r = self.shed(
                            d,
                            need,
                            lambda r: self.dest_intra(r, strict=False),
                            floor_room=float(self.dir_load[d]),
                        )
                if r < 0 and self.s.cross_ok:
                    r = self.shed(
                        d,
                        need,
                        lambda r: self.dest_cross(r, strict=False),
                        floor_room=float(self.dir_load[d]),
                    )
                if r < 0 and self.s.mode == "full":
                    r = self.shed(d, need, self.make_room_for, floor_room=float(self.dir_load[d]))
                if r < 0 and self.s.mode == "full":
                    r = self._swap_off(d)
                if r < 0:
                    break

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

    def _relieve_across(self, b: int) -> None:
        """A broker that cannot move replicas between its own disks (an Offline dir makes
        Kafka refuse AlterReplicaLogDirs) relieves a directory above the capacity threshold by
        sending replicas to other brokers."""
        if not self.s.cross_ok:
            return
        for d in self.dirs_of[b].tolist():
            while self.hosting[d] and self.dir_load[d] > self.hard[d] and not self.capped:
                r = self.shed(
                    d,
                    float(self.dir_load[d] - self.hard[d]),
                    lambda r: self.dest_cross(r, strict=False),
                    floor_room=float(self.dir_load[d]),
                )
                if r < 0:
                    break

    def _shed_blocked(self, b: int) -> None:
        """A broker that can only lose bytes (see ``_relieve_across``) brings its Active dirs
        above the disk band down by sending replicas to other brokers. Its Active mean falls as
        it sheds, so the band is recomputed after each move; it converges to the fixed point
        ``achievable.blocked_disk_mean`` describes. The broker does not go below its own byte
        band for it (when it starts inside it): that would trade one goal for another."""
        if not self.s.cross_ok or self.a_cap[b] <= 0:
            return
        db = self.g.disk_balance
        floor = float(self.b_lo[b]) if self.b_load[b] >= self.b_lo[b] else 0.0
        dirs = [int(d) for d in self.dirs_of[b] if self.active[d]]
        stuck: set[int] = set()
        while not self.capped:
            u = self.a_load[b] / self.a_cap[b]
            excess = {d: self.dir_load[d] - db * u * self.total[d] for d in dirs if d not in stuck}
            d = max(excess, key=lambda k: (excess[k] / self.total[k], -k), default=-1)
            if d < 0 or excess[d] <= 0:
                break
            room = float(self.b_load[b] - floor)
            r = -1
            for strict in (True, False):
                if room <= 0:
                    break
                r = self.shed(
                    d,
                    min(float(excess[d]), room),
                    self._cross_dest(strict=strict),
                    floor_room=room,
                    soft=True,
                )
                if r >= 0:
                    break
            if r < 0:
                stuck.add(d)

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

    def _hi_one(self, d: int, u: float) -> float:
        if not self.active[d]:
            return float(self.hard[d])
        return float(min(self.hard[d], self.g.disk_balance * u * self.total[d]))

    def balance_counts(self, *, leaders: bool) -> None:
        """Brokers above the replica (or leader) count band hand their smallest replicas to the
        brokers with the fewest, staying inside the byte bands; brokers below take likewise.

        The bulk runs in proposer rounds (``count_rounds``); what they leave (givers or takers
        that only a reshaping move can unblock) goes through the one-move-at-a-time search."""
        self.count_rounds(leaders=leaders)
        self._balance_counts_stepwise(leaders=leaders)

    def count_rounds(self, *, leaders: bool) -> None:
        """Count moves in rounds: the proposer (Spark or numpy, see ``propose``) returns a batch
        of (replica, taker) candidates from the live state, the driver applies those that still
        pass its scalar checks (``_dispose``), and the next round proposes from the new state.
        A phase ends when it is in band, when what is left or what a round applied is below
        ``ROUND_MIN`` moves (a round has a fixed cost, a Spark job; the stepwise search that
        follows finishes small remainders for less), or after ``MAX_ROUNDS``."""
        for phase in ("excess", "deficit"):
            for _ in range(MAX_ROUNDS):
                if self.capped:
                    return
                rnd = self._count_round(leaders=leaders, phase=phase)
                if rnd is None:
                    break
                t0 = time.perf_counter()
                batch = self.proposer.propose(rnd)
                self._prop_s += time.perf_counter() - t0
                self._prop_rounds += 1
                self._prop_n += len(batch)
                applied = self._dispose(batch, leaders=leaders, phase=phase)
                self._prop_applied += applied
                if applied < ROUND_MIN:
                    break

    def _count_round(self, *, leaders: bool, phase: str) -> CountRound | None:
        """The live state a round proposes from, or None when the phase has nothing to do.

        Excess: every broker above the band gives, up to twice its excess plus a margin of
        candidates; every broker that may take one more is a taker. Deficit: the brokers below
        the band take; the givers are the brokers with the most, down to the level at which
        they cover the total deficit (water-filling: the fullest give first, as the
        one-at-a-time search does), each proposing half as many again as it should give."""
        count = self.b_leaders if leaders else self.b_reps
        hi_c, lo_c = (self.l_hi, self.l_lo) if leaders else (self.c_hi, self.c_lo)
        host = self.host_b
        may_take = host & self.recv_broker() & (self.b_reps + 1 <= self.c_hi)
        may_give = host & (self.b_load - self.b_lo > 0)
        if leaders:
            may_give &= self.b_reps - 1 >= self.c_lo
        if phase == "excess":
            over = host & (count > hi_c)
            if int((count - hi_c)[over].sum()) < ROUND_MIN:
                return None
            givers = np.flatnonzero(over & may_give)
            quota = 2 * (count[givers] - hi_c) + 16
            takers = np.flatnonzero(may_take & ~over & (count + 1 <= hi_c))
        else:
            under = may_take & (count < lo_c)
            under &= self.b_hi - self.b_load >= 1e-3 * self.b_cap  # byte-full: reshape first
            if not under.any():
                return None
            takers = np.flatnonzero(under)
            need = int((lo_c - count[takers]).sum())
            if need < ROUND_MIN:
                return None
            givers = np.flatnonzero(may_give & ~under & (count - 1 >= lo_c))
            have = count[givers]
            level = lo_c
            for lv in np.unique(have)[::-1].tolist():
                if int(np.maximum(have - lv, 0).sum()) >= need:
                    level = max(int(lv), lo_c)
                    break
            keep = have > level
            givers, have = givers[keep], have[keep]
            quota = np.minimum(have - lo_c, (3 * (have - level) + 1) // 2 + 4)
        if not len(givers) or not len(takers):
            return None
        db = self.g.disk_balance
        # Each giver's candidates come from its smallest replicas: twice its quota, plus those
        # of its replicas already moved (they may sit among the smallest), plus a margin.
        gone = np.bincount(self.c.rep_broker[self.moved], minlength=self.c.n_brokers)
        window = 2 * quota + gone[givers] + 64
        return CountRound(
            leaders=leaders,
            rack_aware=self.g.rack_aware,
            moved=np.flatnonzero(self.moved).astype(np.int64),
            moved_broker=self.cur_b[self.moved].astype(np.int64),
            givers=givers.astype(np.int64),
            quota=quota.astype(np.int64),
            floor_room=(self.b_load - self.b_lo)[givers].astype(np.float64),
            window=window.astype(np.int64),
            takers=takers.astype(np.int64),
            count=count.astype(np.int64),
            b_load=self.b_load.astype(np.float64),
            b_hi=self.b_hi.astype(np.float64),
            b_cap=self._b_cap_safe.astype(np.float64),
            lead_room=self.b_leaders + 1 <= self.l_hi,
            max_room=self._max_room(),
            a_load=self.a_load.astype(np.float64),
            lo_factor=band_floor(db, 1.0) / np.maximum(self.a_cap, 1.0),
            dir_load=self.dir_load.astype(np.float64),
            dir_total=self.total,
            dir_active=self.active,
            dir_hosting=self.hosting,
            denom=max(hi_c, 1),
            per_replica=PER_REPLICA,
        )

    def _max_room(self) -> np.ndarray:
        """Per broker: the most bytes any of its receivable directories can still take under
        the capacity threshold (-inf: none)."""
        room = np.where(self.recv, self.hard - self.dir_load, -np.inf)
        out = np.full(self.c.n_brokers, -np.inf)
        np.maximum.at(out, self.dir_b, room)
        return out

    def _dispose(self, batch: Proposals, *, leaders: bool, phase: str) -> int:
        """Walk a batch in order; per replica, re-check the scalars that earlier moves may have
        changed (the giver still out of band and above its byte and directory floors, the
        taker still short and inside its bands, the partition rules) and try its proposed
        takers best first by the live score, placing it on the taker's best directory exactly
        as ``_dest_count_move`` would. Returns how many moves were applied.

        The figures read per proposal are mirrored in Python lists (a numpy scalar read costs
        several times a list read) and refreshed for the two brokers and two directories each
        applied move touches."""
        count = self.b_leaders if leaders else self.b_reps
        hi_c, lo_c = (self.l_hi, self.l_lo) if leaders else (self.c_hi, self.c_lo)
        denom = max(hi_c, 1)
        excess = phase == "excess"
        lo_k = band_floor(self.g.disk_balance, 1.0)
        db = self.g.disk_balance
        c_hi, l_hi, c_lo = self.c_hi, self.l_hi, self.c_lo
        by_brokers = self.s.balance_brokers
        cnt, reps, leads = count.tolist(), self.b_reps.tolist(), self.b_leaders.tolist()
        load, a_load, dl = self.b_load.tolist(), self.a_load.tolist(), self.dir_load.tolist()
        b_hi, b_lo = self.b_hi.tolist(), self.b_lo.tolist()
        cap, a_cap, a_cap_safe = (
            self._b_cap_safe.tolist(),
            self.a_cap.tolist(),
            self._a_cap_safe.tolist(),
        )
        lo_util, hard, total = self._lo_util.tolist(), self.hard.tolist(), self.total.tolist()
        active, recv = self.active.tolist(), self.recv.tolist()
        if self._dirs_of_l is None:
            self._dirs_of_l = [d.tolist() for d in self.dirs_of]
        dirs_of = self._dirs_of_l
        if not len(batch):
            return 0
        rid = batch.rid.tolist()
        tak = batch.taker.tolist()
        cuts = [0, *(np.flatnonzero(batch.rid[1:] != batch.rid[:-1]) + 1).tolist(), len(rid)]
        applied = 0
        for k in range(len(cuts) - 1):
            r = rid[cuts[k]]
            if self.moved[r]:
                continue
            g = int(self.cur_b[r])
            if (cnt[g] <= hi_c) if excess else (cnt[g] - 1 < lo_c):
                continue
            if leaders and reps[g] - 1 < c_lo:
                continue
            s = float(self.size_f[r])
            if s > load[g] - b_lo[g]:
                continue
            d0 = int(self.cur_d[r])
            if active[d0] and dl[d0] - s < lo_k / max(a_cap[g], 1.0) * (a_load[g] - s) * total[d0]:
                continue
            is_lead = bool(self.lead[r])
            takers = tak[cuts[k] : cuts[k + 1]]
            if len(takers) > 1:
                takers.sort(
                    key=lambda t: (cnt[t] / denom + UTIL_WEIGHT * ((load[t] + s) / cap[t]), t)
                )
            for t in takers:
                if not excess and cnt[t] >= lo_c:
                    continue
                t0 = time.perf_counter()
                self._dest_n += 1
                # ``_dest_count_move``'s scalar checks and directory choice, on the mirrors.
                b_after = load[t] + s
                target = -1
                if (
                    b_after <= b_hi[t]
                    and reps[t] + 1 <= c_hi
                    and not (is_lead and leads[t] + 1 > l_hi)
                    and self._may_join(r, t)
                ):
                    u = (a_load[t] + s) / a_cap_safe[t]
                    if by_brokers:
                        u = max(u, lo_util[t])
                    base = (leads[t] / max(l_hi, 1)) if leaders else (reps[t] / max(c_hi, 1))
                    base += 1e-3 * (b_after / cap[t])
                    best = np.inf
                    for d in dirs_of[t]:
                        if not recv[d] or not dl[d] <= hard[d] - s:
                            continue
                        after = dl[d] + s
                        if after > min(hard[d], db * u * total[d]):
                            continue
                        score = base + 1e-6 * (after / total[d])
                        if score < best:
                            target, best = d, score
                self._dest_s += time.perf_counter() - t0
                if target < 0:
                    continue
                if not self.budget_allows(r):
                    return applied
                self.apply(r, target)
                applied += 1
                for b in (g, t):
                    cnt[b], reps[b], leads[b] = (
                        int(count[b]),
                        int(self.b_reps[b]),
                        int(self.b_leaders[b]),
                    )
                    load[b], a_load[b] = float(self.b_load[b]), float(self.a_load[b])
                for d in (d0, target):
                    dl[d] = float(self.dir_load[d])
                break
        return applied

    def _balance_counts_stepwise(self, *, leaders: bool) -> None:
        """One move at a time: the most out-of-band broker gives (or takes) one replica, with
        reshaping moves (``_refill``/``_vent``) where byte bands block a count move."""
        goal = "leaders" if leaders else "reps"
        count = self.b_leaders if leaders else self.b_reps
        hi_c, lo_c = (self.l_hi, self.l_lo) if leaders else (self.c_hi, self.c_lo)
        recv_b = self.recv_broker()
        # Candidates per broker, smallest first: one sort per phase, moved ones skipped later.
        pick = ~self.moved & self.hosting[self.cur_d]
        if leaders:
            pick &= self.lead
        # Unmoved replicas are where the snapshot put them, so one sort of the snapshot by
        # (broker, size, index) serves every phase: filtering it keeps the order.
        if self._by_broker is None:
            c = self.c
            self._by_broker = np.lexsort((np.arange(c.n_replicas), self.size, c.rep_broker))
        cand = self._by_broker[pick[self._by_broker]]
        starts = np.searchsorted(self.cur_b[cand], np.arange(self.c.n_brokers + 1))
        self._small = (cand, starts)
        self._small_list = cand.tolist()
        self._small_ptr = starts.tolist()  # first candidate of each broker not yet moved
        stuck: set[int] = set()
        reshaped: dict[int, int] = {}
        for phase in ("excess", "deficit"):
            stuck.clear()
            while not self.capped:
                if phase == "excess":
                    over = np.where(self.host_b, count - hi_c, 0)
                else:
                    over = np.where(self.host_b & recv_b, lo_c - count, 0)
                over[list(stuck)] = 0
                b = int(np.argmax(over))
                if over[b] <= 0:
                    break
                if phase == "excess":
                    ok = self._give_small(b, goal, only_broker=-1, leaders=leaders)
                else:
                    ok = False
                    # Donors: most replicas first, among brokers with byte room to give one.
                    donors: list[int] = []
                    for donor in np.argsort(-count, kind="stable").tolist():
                        if count[donor] - 1 < lo_c or len(donors) == 6:
                            break
                        smallest = self._smallest_left(donor)
                        if donor != b and 0 < smallest <= self.b_load[donor] - self.b_lo[donor]:
                            donors.append(donor)
                    if self.b_hi[b] - self.b_load[b] < 1e-3 * self.b_cap[b]:
                        donors = []  # byte-full: make room first (below)
                    for donor in donors:
                        if count[donor] - 1 < lo_c:
                            break
                        if donor == b:
                            continue
                        if self._give_small(
                            donor, goal, only_broker=b, leaders=leaders, tries=TRIES
                        ):
                            ok = True
                            break
                if (
                    not ok
                    and reshaped.get(b, 0) < 16 + int(over[b]) // 4
                    and self.s.balance_brokers
                ):
                    # Byte-bound: a broker at the bottom of its byte band cannot give, one at
                    # the top cannot take. One larger replica in (or out) makes room for many
                    # small ones the other way.
                    reshaped[b] = reshaped.get(b, 0) + 1
                    ok = self._refill(b, count, lo_c) if phase == "excess" else self._vent(b)
                if not ok:
                    stuck.add(b)

    def counts_in_band(self) -> bool:
        """Whether every hosting broker's replica and leader counts are inside their bands
        (brokers that may not receive are judged only from above: they can only lose)."""
        recv_b = self.recv_broker()
        for count, hi_c, lo_c in (
            (self.b_reps, self.c_hi, self.c_lo),
            (self.b_leaders, self.l_hi, self.l_lo),
        ):
            if ((count > hi_c) & self.host_b).any():
                return False
            if ((count < lo_c) & self.host_b & recv_b).any():
                return False
        return True

    def _smallest_left(self, b: int) -> float:
        """Size of broker b's smallest unmoved candidate in the count phase (0: none)."""
        r = self._first_small(b)
        return float(self.size_f[r]) if r >= 0 else 0.0

    def _first_small(self, b: int) -> int:
        """Broker b's smallest candidate not yet moved, or -1; skips moved ones for good."""
        _, starts = self._small
        i, end = self._small_ptr[b], int(starts[b + 1])
        lst = self._small_list
        while i < end and self.moved[lst[i]]:
            i += 1
        self._small_ptr[b] = i
        return lst[i] if i < end else -1

    def _refill(self, b: int, count: np.ndarray, lo_c: int) -> bool:
        room = float(self.b_hi[b] - self.b_load[b])
        if room <= 0:
            return False
        with np.errstate(invalid="ignore", divide="ignore"):
            util = np.where(self.host_b, self.b_load / self.b_cap, -np.inf)
        for donor in np.argsort(-util, kind="stable").tolist()[:8]:
            slack = float(self.b_load[donor] - self.b_lo[donor])
            if donor == b or slack <= 0 or count[donor] - 1 < lo_c:
                continue
            need = min(0.5 * room, slack)
            if self._shed_broker(donor, need, min(room, slack), only_broker=b) >= 0:
                return True
        return False

    def _vent(self, b: int) -> bool:
        slack = float(self.b_load[b] - self.b_lo[b])
        if slack <= 0:
            return False
        return self._shed_broker(b, 0.5 * slack, slack, only_broker=-1) >= 0

    def _give_small(
        self, b: int, goal: str, *, only_broker: int, leaders: bool, tries: int = TRIES
    ) -> bool:
        """Move broker b's smallest replica that may go (to ``only_broker`` if >= 0).

        The cheap per-candidate checks (moved already, would drop its dir below the band, may
        not join the taker, leader the taker cannot take) run over windows of candidates as
        array operations; only the survivors, in the same order, pay for a destination search.
        Same choices as checking one by one, a fraction of the interpreter time."""
        if leaders and self.b_reps[b] - 1 < self.c_lo:
            return False
        cand_all, starts = self._small
        self._first_small(b)
        floor_room = float(self.b_load[b] - self.b_lo[b])
        lo_factor = band_floor(self.g.disk_balance, 1.0) / max(float(self.a_cap[b]), 1.0)
        a_load = float(self.a_load[b])
        attempts = 0
        i, end = self._small_ptr[b], int(starts[b + 1])
        width = 16
        while i < end:
            win = cand_all[i : min(i + width, end)]
            i += len(win)
            width = min(width * 2, 512)
            sz = self.size_f[win]
            cut = int(np.searchsorted(sz, floor_room, side="right"))
            last = cut < len(win)
            win, sz = win[:cut], sz[:cut]
            d0 = self.cur_d[win]
            ok = ~self.moved[win]
            ok &= ~(
                self.active[d0]
                & (self.dir_load[d0] - sz < lo_factor * (a_load - sz) * self.total[d0])
            )
            if only_broker >= 0:
                ok &= self._may_join_many(win, only_broker)
                if self.b_leaders[only_broker] + 1 > self.l_hi:
                    ok &= ~self.lead[win]
            for r in win[ok].tolist():
                attempts += 1
                if attempts > tries:
                    return False
                target = self.dest_cross(
                    r, strict=True, only_broker=only_broker, goal=goal, joined=True
                )
                if target >= 0 and self.budget_allows(r):
                    self.apply(r, target)
                    return True
            if last:
                return False
        return False

    def _may_join_many(self, reps: np.ndarray, b: int) -> np.ndarray:
        """``_may_join`` for many replicas at once (one taker broker b)."""
        parts = self.c.rep_part[reps]
        members = self._members[parts]
        ok: np.ndarray = ~(members == b).any(axis=1) & ~(self._members0[parts] == b).any(axis=1)
        if self.g.rack_aware:
            rk = self._broker_rack[b]
            on_rack = (np.where(members >= 0, self._rack_of_b[members], -1) == rk).sum(axis=1)
            on_rack -= self._rack_of_b[self.cur_b[reps]] == rk
            ok &= on_rack < self.rack_limit[parts]
        return ok

    def reorder_leaders(self) -> None:
        """Zero-byte leader balance (opt-in): a broker above the leader band hands leadership
        of a partition to a follower on a broker below it, and a broker below the band takes
        leadership from the most-leading broker among its partitions' leaders."""
        part_start = self._part_start
        for phase in ("excess", "deficit"):
            order = np.argsort(-self.b_leaders if phase == "excess" else self.b_leaders)
            for b in order.tolist():
                if not self.host_b[b]:
                    continue
                if phase == "excess" and self.b_leaders[b] <= self.l_hi:
                    continue
                if phase == "deficit" and self.b_leaders[b] >= self.l_lo:
                    continue
                want_lead = phase == "deficit"
                mine = np.flatnonzero(
                    (self.cur_b == b) & (self.lead != want_lead) & self.hosting[self.cur_d]
                )
                for r in mine.tolist():
                    if phase == "excess" and self.b_leaders[b] <= self.l_hi:
                        break
                    if phase == "deficit" and self.b_leaders[b] >= self.l_lo:
                        break
                    p = self._rep_part[r]
                    best, best_key = -1, 0
                    for r2 in range(part_start[p], part_start[p + 1]):
                        if r2 == r or not self.hosting[self.cur_d[r2]]:
                            continue
                        b2 = int(self.cur_b[r2])
                        if phase == "excess":
                            ok = not self.lead[r2] and self.b_leaders[b2] + 1 <= self.l_hi
                            key = -int(self.b_leaders[b2])
                        else:
                            ok = bool(self.lead[r2]) and self.b_leaders[b2] - 1 >= self.l_lo
                            key = int(self.b_leaders[b2])
                        if ok and (best < 0 or key > best_key):
                            best, best_key = r2, key
                    if best < 0:
                        continue
                    giver, taker = (r, best) if phase == "excess" else (best, r)
                    self.lead[giver], self.lead[taker] = False, True
                    self.b_leaders[int(self.cur_b[giver])] -= 1
                    self.b_leaders[int(self.cur_b[taker])] += 1

    # ----------------------------------------------------------------- driver

    def run(self) -> Outcome:
        prof: dict[str, float] = {}
        mark = time.perf_counter()

        def lap(name: str) -> None:
            nonlocal mark
            now = time.perf_counter()
            prof[name] = prof.get(name, 0.0) + now - mark
            mark = now

        self.evacuate()
        lap("evacuateS")
        if self.s.fix_racks and not self.capped:
            self.fix_racks()
        lap("fixRacksS")
        if self.s.balance_disks and not self.capped:
            self.relieve_capacity()
        lap("relieveCapacityS")
        if self.s.balance_brokers and self.s.cross_ok and not self.capped:
            self.balance_broker_bytes()
        lap("brokerBytesS")
        if self.s.balance_disks and not self.capped:
            self.balance_disks()
        lap("diskBytesS")
        if self.s.balance_counts and self.s.cross_ok and not self.capped:
            # Leader moves can push a replica count out again (and the reverse): two rounds.
            for _ in range(3):
                self.balance_counts(leaders=False)
                if self.g.leader_reorder:
                    self.reorder_leaders()
                self.balance_counts(leaders=True)
                if self.counts_in_band():
                    break
        lap("countsS")
        exchange_counts(self)  # only when counts are in scope and still out of band
        lap("exchangeS")
        if self.s.balance_disks and not self.capped:
            self.balance_disks()
        lap("diskBytesS")
        if self.capped:
            self.unmet.append(
                {"goal": "caps", "why": "--max-moves/--max-bytes reached; planning stopped"}
            )
        self._check_capacity()
        prof["destScoringS"] = self._dest_s
        prof["destScoringCalls"] = float(self._dest_n)
        prof["proposeS"] = self._prop_s
        prof["proposeRounds"] = float(self._prop_rounds)
        prof["proposals"] = float(self._prop_n)
        prof["proposalsApplied"] = float(self._prop_applied)
        return Outcome(
            cur_broker=self.cur_b,
            cur_dir=self.cur_d,
            moved=self.moved,
            unmet=self.unmet,
            hard_failures=self.hard_failures,
            capped=self.capped,
            n_moves=self.n_moves,
            leader=self.lead,
            profile=prof,
        )

    def _check_capacity(self) -> None:
        over = np.flatnonzero(self.hosting & (self.dir_load > self.hard + 0.5))
        fixes = self.s.balance_disks
        for d in over.tolist():
            what = (
                f"broker {self.c.broker_ids[self.dir_b[d]]} dir {self.c.dir_path[d]} ends at "
                f"{self.dir_load[d] / self.total[d]:.3f} of its size, above the capacity "
                f"threshold {self.g.capacity_threshold}"
            )
            if fixes and not self.capped:
                self.hard_failures.append(what + "; no replica could be moved off it")
            else:
                self.unmet.append(
                    {"goal": "capacity", "why": what + f" (not in {self.s.mode}'s scope)"}
                )

    # ----------------------------------------------------------------- names

    def _name(self, r: int) -> str:
        p = int(self.c.rep_part[r])
        return f"{self.c.part_topic[p]}-{int(self.c.part_num[p])}"

    def _state(self, d: int) -> str:
        state = STATES[int(self.c.dir_state[d])]
        return f"{state}, to be emptied" if self.s.evacuate[d] else state

    def _why_nowhere(self, r: int) -> str:
        """Which hard rule leaves replica r without a destination (for the refusal message)."""
        p = self._rep_part[r]
        lo, hi = self._part_start[p], self._part_start[p + 1]
        members = set(self.cur_b[lo:hi].tolist()) | set(self._rep_broker0[lo:hi])
        others = self.recv & ~np.isin(self.dir_b, list(members))
        if not self.s.must_leave_broker[int(self.cur_d[r])] and self.s.intra_ok[self.cur_b[r]]:
            others |= self.recv & (self.dir_b == self.cur_b[r])
        if not others.any():
            return (
                "every broker that may receive replicas holds or held one of this partition "
                "(one replica per broker; one that held it in the snapshot takes no other)"
            )
        if (
            not (others & self._cross_mask(r)).any()
            and not (others & (self.dir_load <= self.hard - self.size_f[r])).any()
        ):
            return "no directory has room under the capacity threshold"
        return (
            "the brokers with room are on racks that already hold this partition (rack awareness)"
        )


def plan_core(
    cluster: Cluster, prepared: Prepared, scope: Scope, *, goals: Goals, request: Request
) -> Outcome:
    """Run the greedy; raise nothing (the caller turns hard failures into a refused plan)."""
    if cluster.n_replicas and prepared.order.shape[0] != cluster.n_replicas:
        raise SnapshotError("prepared order does not cover every replica")
    return Planner(cluster, prepared, scope, goals=goals, request=request).run()
