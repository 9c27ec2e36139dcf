"""The greedy's count phases: replica and leader counts into their bands with the smallest
replicas, mostly in proposer rounds ("the proposer proposes, the driver disposes", see
``propose``), then one move at a time for what the rounds leave; and the zero-byte
leader reordering (on by default; ``Goals.leader_reorder``).

Each phase is a function over the planner (``placement.Placer``); the rounds' constants live
here so a test may lower ``ROUND_MIN`` to exercise rounds on a small cluster.
"""

from __future__ import annotations

import time

import numpy as np
from spindle.rebalance.goals import CountGoal
from spindle.rebalance.goals.bands import band_floor
from spindle.rebalance.goals.counts import dir_score, taker_score
from spindle.rebalance.search.chains import refill_one
from spindle.rebalance.search.placement import TRIES, Placer
from spindle.rebalance.search.propose import CountRound, Proposals

#: Proposer rounds per count phase at most (each round re-proposes from the live state). A
#: guard, not the usual stop: rounds end once one applies fewer than ``ROUND_MIN`` moves. On
#: ``combined`` 1M a phase takes 10-19 rounds to get there, each still applying 1.5-7.5K
#: moves at ~0.1 ms a move, where the stepwise search costs 0.25-0.4 ms; at 8 the stepwise
#: search was left 53K moves (16.5 s), at 32 it gets 15K (6 s).
MAX_ROUNDS = 32
#: Fewest count moves worth a proposer round; below, the stepwise search does them. A round
#: has a fixed cost (one Spark job, about half a second in local mode), the stepwise search
#: about 0.1 ms a move: this leans to Spark, which scales out, while sparing it the residues.
ROUND_MIN = 1024
#: Takers a proposal batch keeps per replica (the driver tries them best first).
PER_REPLICA = 8


def balance_counts(pl: Placer, *, leaders: bool) -> None:
    """Brokers above the replica (or leader) count band hand their smallest replicas to the
    brokers with the fewest, staying inside the byte bands; brokers below the band take
    likewise.

    The bulk runs in proposer rounds (``count_rounds``); what they leave (givers or takers
    that only a reshaping move can unblock) goes through the one-move-at-a-time search.
    Where the hard rules hold some brokers out of the band (``PlannerState.out_of_reach``),
    the others go first, rounds and search both, then all of them: both draw on the same
    room. On ``combined`` (14K replicas, seed 6) the rack held above the band gave first,
    filled the middle rack's brokers to the top of their band and used up the partitions
    through which the middle rack could pass replicas on to the third rack, leaving it 195
    replicas over its band, while a held broker's goal stays unmet whatever it gives."""
    goal = pl.leader_goal if leaders else pl.replica_goal
    if (pl.out_of_reach(goal.name) & pl.host_b).any():
        count_rounds(pl, leaders=leaders, held=False)
        _balance_counts_stepwise(pl, leaders=leaders, held=False)
    count_rounds(pl, leaders=leaders, held=True)
    _balance_counts_stepwise(pl, leaders=leaders, held=True)


def count_rounds(pl: Placer, *, leaders: bool, held: bool = True) -> None:
    """Count moves in rounds: the proposer (Spark or numpy, see ``propose``) returns a batch
    of (replica, taker) candidates from the live state, the driver applies those that still
    pass its scalar checks (``_dispose``), and the next round proposes from the new state.
    A phase ends when it is in band, when what is left or what a round applied is below
    ``ROUND_MIN`` moves (a round has a fixed cost, a Spark job; the stepwise search that
    follows finishes small remainders for less), or after ``MAX_ROUNDS``. ``held``: the
    brokers held out of the band give (or take) too."""
    for phase in ("excess", "deficit"):
        for _ in range(MAX_ROUNDS):
            if pl.capped:
                return
            rnd = _count_round(pl, leaders=leaders, phase=phase, held=held)
            if rnd is None:
                break
            t0 = time.perf_counter()
            batch = pl.proposer.propose(rnd)
            pl._prop_s += time.perf_counter() - t0
            pl._prop_rounds += 1
            pl._prop_n += len(batch)
            applied = _dispose(pl, batch, leaders=leaders, phase=phase)
            pl._prop_applied += applied
            if applied < ROUND_MIN:
                break


def _count_round(pl: Placer, *, leaders: bool, phase: str, held: bool) -> CountRound | None:
    """The live state a round proposes from, or None when the phase has nothing to do.
    ``held``: brokers whose band is out of reach (``PlannerState.out_of_reach``) give (or
    take) too; without, only the others (see ``balance_counts``).

    Excess: every broker above the band gives, up to twice its excess plus a margin of
    candidates; every broker that may take one more is a taker. Deficit: the brokers below
    the band take; the givers are the brokers with the most, down to the level at which
    they cover the total deficit (water-filling: the fullest give first, as the
    one-at-a-time search does), each proposing half as many again as it should give."""
    goal = pl.leader_goal if leaders else pl.replica_goal
    count, lo_c, hi_c = goal.of(pl)
    host = pl.host_b
    # Takers and givers by every goal's size-independent limits (``takes_one``,
    # ``gives_one``: the count bands); the byte floor's slack as the proposer reads it.
    may_take = host & pl.recv_broker() & pl.takes_one(leading=leaders)
    may_give = host & (pl.b_load - pl.b_lo > 0) & pl.gives_one(leading=leaders)
    tier = host if held else host & ~pl.out_of_reach(goal.name)
    if phase == "excess":
        over = host & (count > hi_c)
        takers = np.flatnonzero(may_take & ~over & (count + 1 <= hi_c))
        over &= tier
        if int((count - hi_c)[over].sum()) < ROUND_MIN:
            return None
        givers = np.flatnonzero(over & may_give)
        quota = 2 * (count[givers] - hi_c) + 16
    else:
        under = may_take & (count < lo_c)
        under &= pl.b_hi - pl.b_load >= 1e-3 * pl.b_cap  # byte-full: reshape first
        takers = np.flatnonzero(under & tier)
        if not len(takers):
            return None
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
    db = pl.g.disk_balance
    # Each giver's candidates come from its smallest replicas: twice its quota, plus those
    # of its replicas already moved (they may sit among the smallest), plus a margin.
    gone = np.bincount(pl.c.rep_broker[pl.moved], minlength=pl.c.n_brokers)
    window = 2 * quota + gone[givers] + 64
    return CountRound(
        leaders=leaders,
        rack_aware=pl.g.rack_aware,
        moved=np.flatnonzero(pl.moved).astype(np.int64),
        moved_broker=pl.cur_b[pl.moved].astype(np.int64),
        givers=givers.astype(np.int64),
        quota=quota.astype(np.int64),
        floor_room=(pl.b_load - pl.b_lo)[givers].astype(np.float64),
        window=window.astype(np.int64),
        takers=takers.astype(np.int64),
        count=count.astype(np.int64),
        b_load=pl.b_load.astype(np.float64),
        b_hi=pl.b_hi.astype(np.float64),
        b_cap=pl._b_cap_safe.astype(np.float64),
        lead_room=pl.takes_one(leading=True),
        max_room=pl._max_room(),
        a_load=pl.a_load.astype(np.float64),
        lo_factor=band_floor(db, 1.0) / np.maximum(pl.a_cap, 1.0),
        dir_load=pl.dir_load.astype(np.float64),
        dir_total=pl.total,
        dir_active=pl.active,
        dir_hosting=pl.hosting,
        denom=max(hi_c, 1),
        per_replica=PER_REPLICA,
    )


def _dispose(pl: Placer, batch: Proposals, *, leaders: bool, phase: str) -> int:
    """Walk a batch in order; per replica, re-check the scalars that earlier moves may have
    changed (the giver still out of band and above its byte and directory floors, the
    taker still short and inside its bands, the partition rules) and try its proposed
    takers best first by the live score, placing it on the taker's best directory exactly
    as ``_dest_count_move`` would. Returns how many moves were applied."""
    m = _Mirrors(pl, leaders=leaders, excess=phase == "excess")
    if not len(batch):
        return 0
    tak = batch.taker.tolist()
    cuts = np.flatnonzero(np.concatenate(([True], batch.rid[1:] != batch.rid[:-1])))
    heads = batch.rid[cuts]
    ends = [*cuts[1:].tolist(), len(tak)]
    # Each replica's broker, directory, size and leadership, read once for the batch: they
    # change only when it moves, and a moved replica is skipped.
    rs, gs, ds = heads.tolist(), pl.cur_b[heads].tolist(), pl.cur_d[heads].tolist()
    ss, ls = pl.size_f[heads].tolist(), pl.lead[heads].tolist()
    applied = 0
    for k, lo in enumerate(cuts.tolist()):
        # Most replicas' proposed takers have all filled up since the round proposed them:
        # skip those before the other (side-effect free) checks; ``taker`` would refuse.
        takers = tak[lo : ends[k]]
        if not any(map((m.open_lead if ls[k] else m.open_).__getitem__, takers)):
            continue
        r, g, d0, s = rs[k], gs[k], ds[k], ss[k]
        if pl.moved[r] or not m.may_give(g, d0, s):
            continue
        t, target = m.taker(r, takers, s, ls[k])
        if target < 0:
            continue
        if not pl.budget_allows(r):
            return applied
        pl.apply(r, target)
        applied += 1
        m.refresh((g, t), (d0, target))
    return applied


class _Mirrors:
    """The figures ``_dispose`` reads per proposal, mirrored in Python lists (a numpy scalar
    read costs several times a list read) and refreshed for the two brokers and two
    directories each applied move touches."""

    def __init__(self, pl: Placer, *, leaders: bool, excess: bool) -> None:
        self.pl, self.leaders, self.excess = pl, leaders, excess
        goal = pl.leader_goal if leaders else pl.replica_goal
        self.goal = goal
        self.count, self.lo_c, self.hi_c = goal.of(pl)
        self.denom = max(self.hi_c, 1)
        self.lo_k = band_floor(pl.g.disk_balance, 1.0)
        self.db = pl.g.disk_balance
        self.by_brokers = pl.s.balance_brokers
        self.cnt, self.reps, self.leads = (
            self.count.tolist(),
            pl.b_reps.tolist(),
            pl.b_leaders.tolist(),
        )
        self.load, self.a_load, self.dl = (
            pl.b_load.tolist(),
            pl.a_load.tolist(),
            pl.dir_load.tolist(),
        )
        self.b_hi, self.b_lo = pl.b_hi.tolist(), pl.b_lo.tolist()
        self.cap, self.a_cap, self.a_cap_safe = (
            pl._b_cap_safe.tolist(),
            pl.a_cap.tolist(),
            pl._a_cap_safe.tolist(),
        )
        self.lo_util, self.hard, self.total = (
            pl._lo_util.tolist(),
            pl.hard.tolist(),
            pl.total.tolist(),
        )
        self.active, self.recv = pl.active.tolist(), pl.recv.tolist()
        if pl._dirs_of_l is None:
            pl._dirs_of_l = [d.tolist() for d in pl.dirs_of]
        self.dirs_of = pl._dirs_of_l
        # Every goal's size-independent limits (``takes_one``, ``gives_one``), per broker,
        # refreshed with the counts.
        self.takes, self.takes_lead = (
            pl.takes_one(leading=False).tolist(),
            pl.takes_one(leading=True).tolist(),
        )
        self.gives = pl.gives_one(leading=leaders).tolist()
        n_b = len(self.cnt)
        self.open_, self.open_lead = [False] * n_b, [False] * n_b
        for b in range(n_b):
            self._reopen(b)

    def _reopen(self, t: int) -> None:
        """Whether taker t passes ``taker``'s checks that do not depend on the replica's
        size (``open_``), and for a leading replica (``open_lead``)."""
        wants = self.excess or self.cnt[t] < self.lo_c
        self.open_[t] = wants and self.takes[t]
        self.open_lead[t] = wants and self.takes_lead[t]

    def may_give(self, g: int, d0: int, s: float) -> bool:
        """Whether a replica of ``s`` bytes on broker g, directory d0, may still leave: g
        out of band (or above the floor, for deficits), its replica count above the floor
        for a leader move, and the replica's leaving keeps g above its byte floor and d0
        above its disk floor."""
        cnt, load, a_load = self.cnt, self.load, self.a_load
        if (cnt[g] <= self.hi_c) if self.excess else (cnt[g] - 1 < self.lo_c):
            return False
        if not self.gives[g]:
            return False
        if s > load[g] - self.b_lo[g]:
            return False
        floor_k = self.lo_k / max(self.a_cap[g], 1.0)
        return not (
            self.active[d0] and self.dl[d0] - s < floor_k * (a_load[g] - s) * self.total[d0]
        )

    def taker(self, r: int, takers: list[int], s: float, is_lead: bool) -> tuple[int, int]:
        """The first of r's proposed takers (r: ``s`` bytes, leading or not), best first by
        the live score, with a directory that may take r (``_dest_count_move``'s scalar
        checks and choice, on the mirrors): (taker, directory), or (-1, -1)."""
        pl, cnt, load, cap, denom = self.pl, self.cnt, self.load, self.cap, self.denom
        b_hi, a_load = self.b_hi, self.a_load
        dl, hard, total, recv, db = self.dl, self.hard, self.total, self.recv, self.db
        # The scalar checks first (they do not depend on the order), then the survivors by
        # the live score: the same first taker that passes, without sorting stale proposals.
        # ``open_``: the worked goal still wants the taker and every goal's size-independent
        # limit lets it take one more; then the byte band's top (``BrokerBytes.accepts``).
        open_ = self.open_lead if is_lead else self.open_
        takers = [t for t in takers if open_[t] and load[t] + s <= b_hi[t]]
        takers.sort(key=lambda t: (taker_score(cnt[t], denom, (load[t] + s) / cap[t]), t))
        if pl.asked:
            return self._asking(r, takers)
        for t in takers:
            t0 = time.perf_counter()
            pl._dest_n += 1
            b_after = load[t] + s
            target = -1
            if pl._may_join(r, t):
                u = (a_load[t] + s) / self.a_cap_safe[t]
                if self.by_brokers:
                    u = max(u, self.lo_util[t])
                base = taker_score(cnt[t], denom, b_after / cap[t])
                best = np.inf
                for d in self.dirs_of[t]:
                    if not recv[d] or not dl[d] <= hard[d] - s:
                        continue
                    after = dl[d] + s
                    if after > min(hard[d], db * u * total[d]):
                        continue
                    score = dir_score(base, after / total[d])
                    if score < best:
                        target, best = d, score
            pl._dest_s += time.perf_counter() - t0
            if target >= 0:
                return t, target
        return -1, -1

    def _asking(self, r: int, takers: list[int]) -> tuple[int, int]:
        """``taker``'s choice where some goal is not mirrored (``PlannerState.asked``): the
        destination search that asks every goal, the same choice for the mirrored ones."""
        for t in takers:
            target = self.pl.dest_cross(r, strict=True, only_broker=t, goal=self.goal)
            if target >= 0:
                return t, target
        return -1, -1

    def refresh(self, brokers: tuple[int, int], dirs: tuple[int, int]) -> None:
        pl = self.pl
        for b in brokers:
            self.cnt[b], self.reps[b], self.leads[b] = (
                int(self.count[b]),
                int(pl.b_reps[b]),
                int(pl.b_leaders[b]),
            )
            self.load[b], self.a_load[b] = float(pl.b_load[b]), float(pl.a_load[b])
            self.takes[b] = pl.takes_one(leading=False, b=b)
            self.takes_lead[b] = pl.takes_one(leading=True, b=b)
            self.gives[b] = pl.gives_one(leading=self.leaders, b=b)
            self._reopen(b)
        for d in dirs:
            self.dl[d] = float(pl.dir_load[d])


def _balance_counts_stepwise(pl: Placer, *, leaders: bool, held: bool) -> None:
    """One move at a time: the most out-of-band broker gives (or takes) one replica, with
    reshaping moves (``_refill``/``_vent``) where byte bands block a count move. ``held``:
    the brokers held out of the band give (or take) too."""
    goal = pl.leader_goal if leaders else pl.replica_goal
    count, lo_c, hi_c = goal.of(pl)
    recv_b = pl.recv_broker()
    _index_small(pl, leaders=leaders)
    stuck: set[int] = set()
    reshaped: dict[int, int] = {}
    # Brokers a refill sent a larger replica to: they do not donate one in turn (two
    # brokers both over the count band would otherwise trade large replicas back and forth,
    # each refill undoing the other's count and moving bytes for nothing).
    refilled: set[int] = set()
    # Brokers whose band no plan reaches under the hard rules (``achievable``): plain count
    # moves may still bring them closer, but no reshaping moves bytes for them (a rack
    # that confines a partition's replicas would trade large replicas inside it for nothing).
    out_of_reach = set(np.flatnonzero(pl.out_of_reach(goal.name)).tolist())
    for phase in ("excess", "deficit"):
        stuck.clear()
        while not pl.capped:
            if phase == "excess":
                over = np.where(pl.host_b, count - hi_c, 0)
            else:
                over = np.where(pl.host_b & recv_b, lo_c - count, 0)
            if not held:
                over[list(out_of_reach)] = 0
            over[list(stuck)] = 0
            b = int(np.argmax(over))
            if over[b] <= 0:
                break
            if phase == "excess":
                ok = _give_small(pl, b, goal, only_broker=-1, leaders=leaders)
            else:
                ok = _take_small(pl, b, goal, leaders=leaders)
            reshape = b not in out_of_reach and pl.s.balance_brokers
            if not ok and reshape and reshaped.get(b, 0) < 16 + int(over[b]) // 4:
                # Byte-bound: a broker at the bottom of its byte band cannot give, one at
                # the top cannot take. One larger replica in (or out) makes room for many
                # small ones the other way.
                reshaped[b] = reshaped.get(b, 0) + 1
                ok = _refill(pl, b, count, lo_c, refilled) if phase == "excess" else _vent(pl, b)
            if not ok:
                stuck.add(b)


def _index_small(pl: Placer, *, leaders: bool) -> None:
    """Candidates per broker, smallest first (leaders only, for leader counts): one sort per
    phase, moved ones skipped later (``_first_small``)."""
    pick = ~pl.moved & pl.hosting[pl.cur_d]
    if leaders:
        pick &= pl.lead
    # Unmoved replicas are where the snapshot put them, so one sort of the snapshot by
    # (broker, size, index) serves every phase: filtering it keeps the order.
    if pl._by_broker is None:
        c = pl.c
        pl._by_broker = np.lexsort((np.arange(c.n_replicas), pl.size, c.rep_broker))
    cand = pl._by_broker[pick[pl._by_broker]]
    starts = np.searchsorted(pl.cur_b[cand], np.arange(pl.c.n_brokers + 1))
    pl._small = (cand, starts)
    pl._small_list = cand.tolist()
    pl._small_ptr = starts.tolist()  # first candidate of each broker not yet moved


def _take_small(pl: Placer, b: int, goal: CountGoal, *, leaders: bool) -> bool:
    """Broker b, below the band, takes one small replica from one of the (up to six) brokers
    with the most, among those with byte room to give one."""
    count, lo_c, _ = goal.of(pl)
    donors: list[int] = []
    for donor in np.argsort(-count, kind="stable").tolist():
        if count[donor] - 1 < lo_c or len(donors) == 6:
            break
        smallest = pl._smallest_left(donor)
        if donor != b and 0 < smallest <= pl.b_load[donor] - pl.b_lo[donor]:
            donors.append(donor)
    if pl.b_hi[b] - pl.b_load[b] < 1e-3 * pl.b_cap[b]:
        return False  # byte-full: make room first (the caller reshapes)
    for donor in donors:
        if count[donor] - 1 < lo_c:
            break
        if donor == b or not pl.rack_open(donor, pl._broker_rack[b]):
            continue
        if _give_small(pl, donor, goal, only_broker=b, leaders=leaders, tries=TRIES):
            return True
    return False


def _refill(pl: Placer, b: int, count: np.ndarray, lo_c: int, refilled: set[int]) -> bool:
    """Broker b, over the count band but at the bottom of its byte band, takes one larger
    replica from one of the fullest brokers (not one refilled itself), to give small ones."""
    room = float(pl.b_hi[b] - pl.b_load[b])
    if room <= 0:
        return False
    with np.errstate(invalid="ignore", divide="ignore"):
        util = np.where(pl.host_b, pl.b_load / pl.b_cap, -np.inf)
    for donor in np.argsort(-util, kind="stable").tolist()[:8]:
        slack = float(pl.b_load[donor] - pl.b_lo[donor])
        if donor == b or slack <= 0 or count[donor] - 1 < lo_c or donor in refilled:
            continue
        if not pl.rack_open(donor, pl._broker_rack[b]):
            continue
        need = min(0.5 * room, slack)
        if pl._shed_broker(donor, need, min(room, slack), only_broker=b) >= 0:
            refilled.add(b)
            return True
    # The fullest brokers may all sit on a rack whose replicas cannot join b's (racks of
    # unequal size): then b's rack-mates with bytes to spare (``chains.refill_one``).
    if refill_one(pl, b, 0.5 * room, lo_c, pl.c_hi, skip=refilled) > 0:
        refilled.add(b)
        return True
    return False


def _vent(pl: Placer, b: int) -> bool:
    slack = float(pl.b_load[b] - pl.b_lo[b])
    if slack <= 0:
        return False
    return pl._shed_broker(b, 0.5 * slack, slack, only_broker=-1) >= 0


def _count_reach(pl: Placer, goal: CountGoal, *, leaders: bool) -> np.ndarray:
    """Per rack, the most bytes a broker of it may take in a count move (``rack_room``
    over the brokers with room under the count bands, as ``dest_cross``'s count move
    needs): a giver to any taker skips the replicas no such rack may take. Why: where rack
    awareness confines partitions and the giver's rack is full, its smallest replicas are
    all confined to it, and ``tries`` spent on them left it over the band."""
    del goal  # one of the count vetoes ``takes_one`` asks
    return pl.rack_room(pl.takes_one(leading=leaders))


def _give_small(
    pl: Placer, b: int, goal: CountGoal, *, only_broker: int, leaders: bool, tries: int = TRIES
) -> bool:
    """Move broker b's smallest replica that may go (to ``only_broker`` if >= 0).

    The cheap per-candidate checks (moved already, would drop its dir below the band, may
    not join the taker, leader the taker cannot take) run over windows of candidates as
    array operations; only the survivors, in the same order, pay for a destination search.
    Same choices as checking one by one, a fraction of the interpreter time. To any taker,
    the replicas no rack with a taker may take are skipped without counting as tried
    (``_count_reach``), unless every rack has a taker with room for any replica b may give."""
    if not pl.gives_one(leading=leaders, b=b):
        return False
    reach = None
    if only_broker < 0:
        reach = _count_reach(pl, goal, leaders=leaders)
        if reach.min() >= float(pl.b_load[b] - pl.b_lo[b]):
            reach = None  # it would skip nothing: every candidate fits every rack's room
    return _give_scan(pl, b, goal, only_broker=only_broker, tries=tries, reach=reach) > 0


def _give_scan(
    pl: Placer,
    b: int,
    goal: CountGoal,
    *,
    only_broker: int,
    tries: int,
    reach: np.ndarray | None,
) -> int:
    """``_give_small``'s search: 1 when it moved a replica, 0 when none may go, -1 when it
    gave up after ``tries`` destination searches."""
    cand_all, starts = pl._small
    pl._first_small(b)
    floor_room = float(pl.b_load[b] - pl.b_lo[b])
    lo_factor = band_floor(pl.g.disk_balance, 1.0) / max(float(pl.a_cap[b]), 1.0)
    a_load = float(pl.a_load[b])
    attempts = 0
    i, end = pl._small_ptr[b], int(starts[b + 1])
    width = 128
    while i < end:
        win = cand_all[i : min(i + width, end)]
        i += len(win)
        width = min(width * 2, 512)
        sz = pl.size_f[win]
        cut = int(np.searchsorted(sz, floor_room, side="right"))
        last = cut < len(win)
        win, sz = win[:cut], sz[:cut]
        d0 = pl.cur_d[win]
        ok = ~pl.moved[win]
        ok &= ~(pl.active[d0] & (pl.dir_load[d0] - sz < lo_factor * (a_load - sz) * pl.total[d0]))
        if only_broker >= 0:
            ok &= pl._may_join_many(win, only_broker)
            if pl.b_leaders[only_broker] + 1 > pl.l_hi:
                ok &= ~pl.lead[win]
        elif reach is not None and ok.any():
            ok[ok] = pl.may_reach(win[ok], reach)
        for r in win[ok].tolist():
            attempts += 1
            if attempts > tries:
                return -1
            target = pl.dest_cross(r, strict=True, only_broker=only_broker, goal=goal, joined=True)
            if target >= 0 and pl.budget_allows(r):
                pl.apply(r, target)
                return 1
        if last:
            return 0
    return 0


def reorder_leaders(pl: Placer) -> None:
    """Zero-byte leader balance (on by default): a broker above the leader band hands leadership
    of a partition to a follower on a broker below it, and a broker below the band takes
    leadership from the most-leading broker among its partitions' leaders."""
    # Brokers do not change here, only leadership: each broker's serving replicas (index
    # order) are grouped once instead of scanning every replica per broker.
    serving = np.flatnonzero(pl.hosting[pl.cur_d])
    by_b = serving[np.argsort(pl.cur_b[serving], kind="stable")]
    cuts = np.searchsorted(pl.cur_b[by_b], np.arange(pl.c.n_brokers + 1))
    for phase in ("excess", "deficit"):
        excess = phase == "excess"
        order = np.argsort(-pl.b_leaders if excess else pl.b_leaders)
        for b in order.tolist():
            if not pl.host_b[b] or _leaders_in_band(pl, b, excess=excess):
                continue
            want_lead = not excess
            mine = by_b[cuts[b] : cuts[b + 1]]
            mine = mine[pl.lead[mine] != want_lead]
            for r in mine.tolist():
                if _leaders_in_band(pl, b, excess=excess):
                    break
                best = _lead_partner(pl, r, excess=excess)
                if best < 0:
                    continue
                giver, taker = (r, best) if excess else (best, r)
                pl.lead[giver], pl.lead[taker] = False, True
                pl.b_leaders[int(pl.cur_b[giver])] -= 1
                pl.b_leaders[int(pl.cur_b[taker])] += 1


def _leaders_in_band(pl: Placer, b: int, *, excess: bool) -> bool:
    """Broker b is not above the leader band (excess phase) or not below it (deficit)."""
    if excess:
        return bool(pl.b_leaders[b] <= pl.l_hi)
    return bool(pl.b_leaders[b] >= pl.l_lo)


def _lead_partner(pl: Placer, r: int, *, excess: bool) -> int:
    """The replica of r's partition to trade leadership with: in the excess phase a
    follower on the broker with the fewest leaders that may take one more, in the deficit
    phase the leader on the broker with the most that may lose one; -1 if none."""
    p = pl._rep_part[r]
    best, best_key = -1, 0
    for r2 in range(pl._part_start[p], pl._part_start[p + 1]):
        if r2 == r or not pl.hosting[pl.cur_d[r2]]:
            continue
        b2 = int(pl.cur_b[r2])
        if excess:
            ok = not pl.lead[r2] and pl.b_leaders[b2] + 1 <= pl.l_hi
            key = -int(pl.b_leaders[b2])
        else:
            ok = bool(pl.lead[r2]) and pl.b_leaders[b2] - 1 >= pl.l_lo
            key = int(pl.b_leaders[b2])
        if ok and (best < 0 or key > best_key):
            best, best_key = r2, key
    return best
