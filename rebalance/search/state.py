"""The planner's state: where every replica is, the loads and counts every goal reads, the
goals' targets, and the one way to change them (``apply``), under the move budget.

Why a class of its own: the greedy's phases (``byte_phases``, ``count_phases``), the
destination search (``placement``), the exchanges (``exchange``) and the proposer rounds
(``propose``) all read and change the same figures; keeping them and their bookkeeping in
one place means a move is accounted for once, the same way, whoever makes it. The public
interface (``apply``, ``budget_allows``, ``budget_allows_two``, ``counts_in_band``,
``recv_broker``, the load and count arrays) is what exchanges and proposers use; names with
a leading underscore are the greedy's own caches. Not thread-safe; one instance per plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from spindle.rebalance.goals import (
    BrokerBytes,
    CountGoal,
    DiskBytes,
    LeaderCount,
    ReplicaCount,
    SoftGoal,
    soft_goals,
    unachievable,
)
from spindle.rebalance.goals.base import ALL
from spindle.rebalance.goals.rack import hosting_racks, rack_limits
from spindle.rebalance.goals.reach import rack_keeps
from spindle.rebalance.input.model import ACTIVE, STATES, Cluster, Goals
from spindle.rebalance.input.scope import Request, Scope
from spindle.rebalance.search.prepare import Prepared
from spindle.rebalance.search.propose import CountProposer, LocalProposer

#: The goals whose size-dependent bands (a byte band's top and floor, a directory's band)
#: the count phases' hot loops check on mirrored figures, written out for speed (``_dispose``'s
#: ``_Mirrors``, the exchanges' search, the proposer's batch): about a microsecond a check
#: where asking a goal costs ten. Their size-independent limits are asked of every goal
#: (``takes_one``, ``gives_one``); any other goal that vetoes count moves is asked through its
#: ``accepts`` (``asked``) before each such move, so a new goal needs no edit there.
MIRRORED: frozenset[type[SoftGoal]] = frozenset({BrokerBytes, DiskBytes, ReplicaCount, LeaderCount})


class PlannerState:
    """Mutable planning state over one cluster. Not thread-safe; one instance per plan.

    Why one class of 28 methods: they are the state's own jobs over one set of arrays --
    building it (``__init__`` and four set-up steps), changing it (``apply``, ``retarget``,
    the two undos, under the two budget checks), the partition rules every move must keep
    (``_cross_mask``, ``_may_join``, ``_may_join_many``, ``rack_open``, ``touched``), the
    goals' answers over it (``takes_one``, ``gives_one``, ``counts_in_band``,
    ``out_of_reach``, ``rack_keep``, ``recv_broker``, ``_max_room``), the small-replica
    pointers (``_smallest_left``, ``_first_small``) and the words of an unmet goal
    (``_name``, ``_state``, ``_why_nowhere``). Each reads or keeps consistent the same loads,
    counts and caches ``apply`` changes; split apart, every move would have to update several
    objects' copies by hand."""

    #: The soft goals' bands, each set by its goal (``SoftGoal.set_targets``): bytes per
    #: broker, and whole replica and leader counts.
    b_lo: np.ndarray
    b_hi: np.ndarray
    c_lo: int
    c_hi: int
    l_lo: int
    l_hi: int

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
        self._loads(ext)
        self._targets(ext)
        self._partition_rules()
        self._caches()

    def _loads(self, ext: np.ndarray) -> None:
        """Bytes per directory and per broker (all hosting dirs, and Active ones), capacity,
        and replica and leader counts per broker, as the snapshot has them."""
        prepared, n_b = self.p, self.c.n_brokers
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

    def _targets(self, ext: np.ndarray) -> None:
        """Cluster-wide targets: the soft goals' bands. Bytes and counts of replicas that
        must find a new home are part of the totals: they will land somewhere."""
        cluster, goals = self.c, self.g
        stuck_offline = ~self.hosting & ~self.s.evacuate
        rep_stuck = stuck_offline[cluster.rep_dir]
        placed_bytes = float(self.size_f[~rep_stuck].sum()) + float(ext[self.hosting].sum())
        self.host_b = self.b_cap > 0
        cap_sum = float(self.b_cap.sum())
        self.mean_util = placed_bytes / cap_sum if cap_sum > 0 else 0.0
        n_host = max(int(self.host_b.sum()), 1)
        #: Mean serving replicas and leaders per hosting broker: what the count bands centre on.
        self.mean_reps = int((~rep_stuck).sum()) / n_host
        self.mean_leaders = int((cluster.rep_leader & ~rep_stuck).sum()) / n_host
        #: The soft goals the greedy asks by name (the ranking of a destination, the count
        #: phases' arrays); each sets its own band below.
        self.broker_goal = BrokerBytes(goals)
        self.disk_goal = DiskBytes(goals)
        self.replica_goal = ReplicaCount(goals)
        self.leader_goal = LeaderCount(goals)
        #: Every soft goal (``goals.GOALS``), and those that veto a strict byte move and a
        #: strict count move (``SoftGoal.vetoes``; ``placement`` asks them all).
        self.soft: tuple[SoftGoal, ...] = soft_goals(goals)
        for goal in self.soft:
            goal.set_targets(self)
        self.byte_vetoes = tuple(g for g in self.soft if g.vetoes == "bytes")
        self.count_vetoes = self.soft
        #: The count goals in priority order: the exchanges trade over each of them.
        self.count_goals = tuple(g for g in self.soft if isinstance(g, CountGoal))
        #: The count-move vetoes whose size-dependent bands the count phases' hot loops do
        #: not mirror (``MIRRORED``): those loops ask each of them through ``accepts``.
        self.asked = tuple(g for g in self.count_vetoes if type(g) not in MIRRORED)

    def _partition_rules(self) -> None:
        """Racks, rack limits and the brokers of each partition's replicas (now and in the
        snapshot), for the partition rules every destination search checks."""
        cluster, n_b = self.c, self.c.n_brokers
        self.n_racks = hosting_racks(cluster, self.s)
        self.rack_limit = rack_limits(np.diff(cluster.part_start), self.n_racks)
        self.dirs_of = [np.flatnonzero(self.dir_b == b) for b in range(n_b)]
        self._closed_b = self.host_b & ~self.recv_broker()
        # Brokers of each partition's replicas, padded with -1: vectorised partition rules.
        rf = np.diff(cluster.part_start)
        self._slot = np.arange(cluster.n_replicas) - cluster.part_start[cluster.rep_part]
        self._members = np.full((cluster.n_partitions, max(int(rf.max(initial=0)), 1)), -1)
        self._members[cluster.rep_part, self._slot] = self.cur_b
        # The same in the snapshot: a broker that held the partition takes none of its replicas.
        self._members0 = self._members.copy()
        self._rack_of_b = cluster.broker_rack.astype(np.int64)
        # Per rack and partition, how many of its replicas are there, kept by ``apply``: the
        # rack rule's checks read one row for many replicas at once instead of comparing
        # and summing each partition's racks (a million-replica plan asks this ~10^6 times).
        self._prack = np.zeros((max(len(cluster.racks), 1), cluster.n_partitions), np.int32)
        np.add.at(self._prack, (self._rack_of_b[self.cur_b], cluster.rep_part), 1)
        #: Per rack: which directories are not on it.
        self._off_rack = [self.dir_rack != rk for rk in range(len(cluster.racks))]
        # Per broker, a version bumped by every move that changes a partition with a replica
        # there, moves one of its replicas or lands one on it (``touched``); ``rack_open``
        # caches by it.
        self._ver = [0] * n_b
        self._open: dict[int, tuple[int, dict[int, bool]]] = {}
        self._snap_by_b: tuple[np.ndarray, np.ndarray] | None = None
        #: Brokers by rack (order, cuts) and which host and may receive (``rack_room``).
        self._rack_cut: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _caches(self) -> None:
        """What the plan has done so far, Python mirrors of hot figures, the phases' own
        caches, and the profile's counters."""
        cluster = self.c
        self.neg_sorted = -self.size[self.p.order]
        self.n_moves = 0
        self.bytes_moved = 0
        self.capped = False
        self.unmet: list[dict[str, object]] = []
        self.hard_failures: list[str] = []
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
        self.proposer: CountProposer = self.p.proposer or LocalProposer(
            cluster, rack_limit=self.rack_limit
        )
        self._prop_s = 0.0
        self._dirs_of_l: list[list[int]] | None = None
        self._prop_rounds = 0
        self._prop_n = 0
        self._prop_applied = 0
        self._reach: dict[str, np.ndarray] | None = None
        self._keep: np.ndarray | None = None

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
        p = self._rep_part[r]
        self._ver[b0] += 1
        if b != b0:
            self._ver[b] += 1
            for m in self._members[p].tolist():
                if m >= 0 and m != b0:
                    self._ver[m] += 1
        self._members[p, self._slot[r]] = b
        rk0, rk = self._broker_rack[b0], self._broker_rack[b]
        if rk != rk0:
            self._prack[rk0, p] -= 1
            self._prack[rk, p] += 1
        self.moved[r] = True
        self.n_moves += 1
        self.bytes_moved += int(self.size[r])

    def retarget(self, r: int, d: int) -> None:
        """Send replica r, already moved off its snapshot broker, to directory d instead
        (still one move: ``simplify``)."""
        self.apply(r, d)
        self.n_moves -= 1
        self.bytes_moved -= int(self.size[r])

    def undo_intra(self, r: int) -> None:
        """Put replica r, moved between two directories of its broker, back where the
        snapshot has it, as if it had never moved (``simplify``)."""
        self.undo_move(r)

    def undo_move(self, r: int) -> None:
        """Put moved replica r back on its snapshot directory, as if it had never moved
        (``simplify``, ``cancel``); the caller has checked the directory may hold it."""
        home = int(self.c.rep_dir[r])
        self.apply(r, home)
        self.moved[r] = False
        self.n_moves -= 2
        self.bytes_moved -= 2 * int(self.size[r])

    def _cross_mask(self, r: int, *, capacity: bool = True) -> np.ndarray:
        """Directories on other brokers that may take replica r under the hard rules
        (``capacity=False``: all but the capacity threshold). Brokers that hold or held a
        replica of r's partition are excluded (see the module docstring)."""
        p = self._rep_part[r]
        lo, hi = self._part_start[p], self._part_start[p + 1]
        members = self.cur_b[lo:hi]
        held = self.c.rep_broker[lo:hi]
        # The few brokers' directories struck out one by one: cheaper than reading a
        # per-broker flag for each of thousands of directories on every search.
        ok = self.recv.copy()
        for b in {*members.tolist(), *held.tolist()}:
            ok[self.dirs_of[b]] = False
        if self.g.rack_aware and hi - lo > 1:
            # Plain Python over the few replicas of one partition beats numpy set operations.
            limit = self._rack_limit[p]
            seen: dict[int, int] = {}
            for i, b in enumerate(members.tolist()):
                if lo + i != r:
                    rk = self._broker_rack[b]
                    seen[rk] = seen.get(rk, 0) + 1
            for rk, n in seen.items():
                if n >= limit:
                    ok &= self._off_rack[rk]
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

    def touched(self, b: int) -> int:
        """Broker b's version: it changes whenever a move changes b's loads, counts, replicas
        or the partitions of its replicas, so a search over b alone may be remembered by it."""
        return self._ver[b]

    def rack_open(self, b: int, rack: int) -> bool:
        """Whether some unmoved replica of broker b may move onto a broker of ``rack`` under
        the rack limit (True without rack awareness). False lets a search skip b as a giver
        to that rack: every candidate of b would fail ``_may_join`` there (the other
        partition rules only refuse more), so the skip changes no choice. Cached per broker
        and rack until a move touches one of b's partitions; each search asks one rack, so
        only that one is computed."""
        if not self.g.rack_aware:
            return True
        hit = self._open.get(b)
        if hit is None or hit[0] != self._ver[b]:
            hit = (self._ver[b], {})
            self._open[b] = hit
        known = hit[1].get(rack)
        if known is not None:
            return known
        if self._snap_by_b is None:
            order = np.argsort(self.c.rep_broker, kind="stable")
            cuts = np.searchsorted(self.c.rep_broker[order], np.arange(self.c.n_brokers + 1))
            self._snap_by_b = (order, cuts)
        order, cuts = self._snap_by_b
        reps = order[cuts[b] : cuts[b + 1]]
        reps = reps[~self.moved[reps]]  # unmoved: still on b, where the snapshot put them
        parts = self.c.rep_part[reps]
        on = self._prack[rack][parts]
        if rack == self._broker_rack[b]:
            on -= 1  # the replica itself leaves b's rack
        out = bool((on < self.rack_limit[parts]).any())
        hit[1][rack] = out
        return out

    def out_of_reach(self, goal: str) -> np.ndarray:
        """Per broker: whether no plan obeying the hard rules brings it into the band of
        ``goal`` (a broker goal: bytes or counts), from ``goals.unachievable``, which
        reads only the snapshot, so it is computed once a plan."""
        if self._reach is None:
            found = unachievable(self.c, self.s, self.g)
            self._reach = {}
            for g in self.soft:
                if g.offends == "broker":
                    self._reach[g.name] = np.zeros(self.c.n_brokers, bool)
                    self._reach[g.name][list(found[g.name])] = True
        return self._reach[goal]

    def rack_keep(self) -> np.ndarray:
        """Per broker that may not receive: the bytes it keeps at least so that its rack's
        other brokers can stay in their byte bands (``goals.reach.rack_keeps``; from the
        snapshot, so computed once a plan)."""
        if self._keep is None:
            self._keep = rack_keeps(self.c, self.s, self.g)
        return self._keep

    def takes_one(self, *, leading: bool, b: int | None = None) -> Any:
        """Per broker (or broker ``b`` alone, a bool): whether it may take one more replica
        (a leading one: ``leading``) in a count move and keep every count-move veto's
        size-independent band (``SoftGoal.take_room``)."""
        at = ALL if b is None else b
        rooms = (g.take_room(self, leading=leading, at=at) for g in self.count_vetoes)
        return _every(rooms, self.c.n_brokers, b)

    def gives_one(self, *, leading: bool, b: int | None = None) -> Any:
        """Per broker (or broker ``b`` alone): whether it may lose one replica (a leading one:
        ``leading``) and keep every count-move veto's size-independent floor
        (``SoftGoal.give_room``)."""
        at = ALL if b is None else b
        rooms = (g.give_room(self, leading=leading, at=at) for g in self.count_vetoes)
        return _every(rooms, self.c.n_brokers, b)

    def recv_broker(self) -> np.ndarray:
        out = np.zeros(self.c.n_brokers, bool)
        out[self.dir_b[self.recv]] = True
        return out

    def _max_room(self) -> np.ndarray:
        """Per broker: the most bytes any of its receivable directories can still take under
        the capacity threshold (-inf: none)."""
        room = np.where(self.recv, self.hard - self.dir_load, -np.inf)
        out = np.full(self.c.n_brokers, -np.inf)
        np.maximum.at(out, self.dir_b, room)
        return out

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

    def _may_join_many(self, reps: np.ndarray, b: int) -> np.ndarray:
        """``_may_join`` for many replicas at once (one taker broker b). The rack rule first
        (where racks confine partitions it refuses most), the members only of the rest."""
        parts = self.c.rep_part[reps]
        if not self.g.rack_aware:
            ok: np.ndarray = ~(self._members[parts] == b).any(axis=1)
            ok &= ~(self._members0[parts] == b).any(axis=1)
            return ok
        rk = self._broker_rack[b]
        on_rack = self._prack[rk][parts]
        on_rack = on_rack - (self._rack_of_b[self.cur_b[reps]] == rk)
        ok = on_rack < self.rack_limit[parts]
        rest = parts[ok]
        ok[ok] = ~(self._members[rest] == b).any(axis=1) & ~(self._members0[rest] == b).any(axis=1)
        return ok

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


def _every(rooms: Iterator[Any], n_brokers: int, b: int | None) -> Any:
    """Whether every goal's answer (None: no limit) allows it: per broker, or for broker
    ``b`` alone (stopping at the first that refuses)."""
    if b is not None:
        return all(room is None or bool(room) for room in rooms)
    out = np.ones(n_brokers, bool)
    for room in rooms:
        if room is not None:
            out &= room
    return out
