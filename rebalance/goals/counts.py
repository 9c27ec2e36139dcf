"""Soft goals on counts: each broker's replica count, and its leader count, within the band
around the mean (Cruise Control's ReplicaDistributionGoal and LeaderReplicaDistributionGoal).

The two differ only in what is counted (every serving replica, or the leaders among them)
and in their balance factor, so they share one class; the count phases, the exchanges and
the proposer rounds read a count goal's ``of(state)`` instead of choosing arrays by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from spindle.rebalance.goals.bands import band_floor, count_band
from spindle.rebalance.goals.base import (
    ALL,
    DIR_UTIL_WEIGHT,
    UTIL_WEIGHT,
    Move,
    Placed,
    SoftGoal,
    Value,
    band_figures,
    broker_offenders,
)
from spindle.rebalance.goals.protocol import ExactModel, State
from spindle.rebalance.input.scope import Scope

if TYPE_CHECKING:
    from spindle.rebalance.goals.reach import Reach


def taker_score(count: Value, denom: int, util: Value) -> Value:
    """A count goal's score of a taking broker: fewer of the counted thing first (``denom``:
    the band's top, at least 1), byte fullness ``util`` after the move next. Lower is better.
    Written once: the stepwise search, the proposer rounds (numpy and, the same expression,
    Spark) and the driver's re-check all rank takers with it."""
    return count / denom + UTIL_WEIGHT * util


def dir_score(taker: Value, dutil: Value) -> Value:
    """A count move's destination directory: the taker's score, then the directory's own
    fullness ``dutil`` after the move."""
    return taker + DIR_UTIL_WEIGHT * dutil


class CountGoal(SoftGoal):
    """Per broker, how many serving replicas (or leaders) it holds, within the band."""

    #: Leaders only (else every serving replica).
    leaders: ClassVar[bool]
    vetoes = "counts"
    #: A byte move's destination that would push this count out of band ranks this much
    #: worse (counts rank byte moves but do not forbid them: the count phases even them out
    #: later with the smallest replicas, far cheaper than refusing the byte move).
    RANK_WEIGHT = 0.02
    #: Refusing nothing (an evacuation must go somewhere), this much.
    MISS_WEIGHT = 0.5

    def in_scope(self, scope: Scope) -> bool:
        return scope.balance_counts

    def factor(self) -> float:
        s = self.settings
        return s.leader_balance if self.leaders else s.replica_balance

    def band(self, mean: float) -> tuple[int, int]:
        """The band around ``mean`` as whole counts (see ``bands.count_band``)."""
        return count_band(self.factor(), mean)

    def of(self, st: State) -> tuple[np.ndarray, int, int]:
        """The planner's live counts of this goal per broker, and the band ``(lo, hi)``."""
        if self.leaders:
            return st.b_leaders, st.l_lo, st.l_hi
        return st.b_reps, st.c_lo, st.c_hi

    def set_targets(self, st: State) -> None:
        """The band around the mean count per hosting broker."""
        if self.leaders:
            st.l_lo, st.l_hi = self.band(st.mean_leaders)
        else:
            st.c_lo, st.c_hi = self.band(st.mean_reps)

    def take_room(self, st: State, *, leading: bool, at: Any = ALL) -> Any:
        """One more of the counted thing stays under the band's top (a follower is no
        leader: the leader count sets no limit on it)."""
        if self.leaders and not leading:
            return None
        count, _, hi = self.of(st)
        return count[at] + 1 <= hi

    def give_room(self, st: State, *, leading: bool, at: Any = ALL) -> Any:
        """One fewer stays at or above the band's floor."""
        if self.leaders and not leading:
            return None
        count, lo, _ = self.of(st)
        return count[at] - 1 >= lo

    def out_of_reach(self, rc: Reach, out: dict[Any, str]) -> None:
        """Brokers that may not receive, below the band's floor: they can only lose. Not
        for leaders when leadership moves without bytes (a closed broker still gains
        leaders then)."""
        if self.leaders and self.settings.leader_reorder:
            return
        rc.closed_counts(self, out)

    def exchange_delta(self, replicas: np.ndarray, leaders: np.ndarray) -> np.ndarray:
        """What an exchange moving ``replicas`` replicas of which ``leaders`` lead changes
        this goal's count by (``exchange._count_table``)."""
        return leaders if self.leaders else replicas

    def accepts(self, st: State, mv: Move) -> Any:
        """The taking broker may hold one more (for leaders: unless r is a follower)."""
        count, _, hi = self.of(st)
        ok = count[mv.b] + 1 <= hi
        if self.leaders:
            return ~np.bool_(st.lead[mv.r]) | ok
        return ok

    def _counts(self, placed: Placed) -> np.ndarray:
        lead = placed.cluster.rep_leader if placed.leader is None else placed.leader
        serving = placed.scope.hosting[placed.cur_dir]
        if self.leaders:
            serving = serving & lead
        return np.bincount(placed.cur_broker[serving], minlength=placed.cluster.n_brokers)

    def figures(self, placed: Placed) -> dict[str, Any]:
        counts = self._counts(placed)[placed.hb]
        return band_figures(counts.astype(float), self.factor(), integer=True)

    def violations(self, placed: Placed, *, limit: int) -> list[Any]:
        hb = placed.hb
        counts = self._counts(placed).astype(float)
        m = float(counts[hb].mean()) if hb.any() else 0.0
        f = self.factor()
        bad = np.flatnonzero(
            hb & ((counts > np.ceil(f * m)) | (counts < np.floor(band_floor(f, m))))
        )
        return broker_offenders(placed, bad, counts, limit)

    def exact_rows(self, model: ExactModel, b: int) -> None:
        """The replicas (leaders) ending on the broker's hosting dirs within the band."""
        if not model.scope.balance_counts:
            return
        cols = [j for d in model.dirs_of(b) for j in model.by_d[d]]
        if self.leaders:
            cols = [j for j in cols if model.x_lead[j]]
        mean = model.mean_leaders if self.leaders else model.mean_replicas
        model.band(cols, [1.0] * len(cols), *self.band(mean), model.w_count)


class ReplicaCount(CountGoal):
    name = "replicas"
    leaders = False
    #: One count step for both counts (leader moves can undo replica counts and the
    #: reverse, so they alternate inside it), then the exchanges.
    steps = ("countsS", "exchangeS")
    exact_rank = 1


class LeaderCount(CountGoal):
    name = "leaders"
    leaders = True
    #: None of its own: the replica count's steps work on it too.
    steps = ()
    exact_rank = 2
