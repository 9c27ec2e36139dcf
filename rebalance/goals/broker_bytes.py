"""Soft goal: each broker's bytes over its capacity within the band around the cluster mean
(Cruise Control's DiskUsageDistributionGoal at broker level) -- or, where rack awareness
fixes a rack's bytes out of that band, around the mean its rack can reach
(``rack.rack_share``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from spindle.rebalance.goals.bands import band_floor
from spindle.rebalance.goals.base import Move, Placed, SoftGoal, band_figures, broker_offenders
from spindle.rebalance.goals.protocol import ExactModel, State
from spindle.rebalance.goals.rack import rack_share
from spindle.rebalance.input.model import Cluster, Goals
from spindle.rebalance.input.scope import Scope

if TYPE_CHECKING:
    from spindle.rebalance.goals.reach import Reach


class BrokerBytes(SoftGoal):
    name = "brokerUtilisation"
    steps = ("brokerBytesS",)
    exact_rank = 0
    #: A byte move's destination ranks by the taker's utilisation after the move.
    #: Refusing nothing (an evacuation must go somewhere), a taker pushed out of its band
    #: costs this much in the ranking: more than any in-band choice.
    MISS_WEIGHT = 10.0

    def in_scope(self, scope: Scope) -> bool:
        return scope.balance_brokers

    def band(
        self, mean: float | np.ndarray, cap: np.ndarray, hard: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per broker ``(lo, hi)`` bytes: the band around ``mean`` utilisation (one figure,
        or one per broker) scaled by its capacity, the top capped by its capacity threshold
        (a hard goal outranks a soft one) and the floor by the top."""
        bb = self.settings.broker_balance
        m: npt.NDArray[np.float64] = np.asarray(mean, dtype=np.float64)
        hi: np.ndarray = np.minimum(bb * m * cap, hard)
        lo: np.ndarray = np.minimum(band_floor(bb, m) * cap, hi)
        return lo, hi

    def set_targets(self, st: State) -> None:
        """The band around the mean utilisation each broker's rack can reach."""
        centre = st.mean_util * rack_share(st.c, st.s, self.settings)
        st.b_lo, st.b_hi = self.band(centre, st.b_cap, st.b_hard)

    def out_of_reach(self, rc: Reach, out: dict[Any, str]) -> None:
        """Brokers that may not receive, below the band's floor: they can only lose."""
        rc.closed_bytes(out)

    def accepts(self, st: State, mv: Move) -> Any:
        """The taking broker stays under its band's top."""
        return mv.b_after <= st.b_hi[mv.b]

    def _util(self, placed: Placed) -> tuple[float, np.ndarray]:
        """Cluster mean utilisation (bytes over capacity, Cruise Control's, not a mean of
        means) and each broker's."""
        b_load, b_cap = placed.b_load, placed.b_cap
        mean = float(b_load.sum() / b_cap.sum()) if b_cap.sum() else 0.0
        util = np.divide(b_load, b_cap, out=np.zeros(len(b_load)), where=placed.hb)
        return mean, util

    def _outside(self, placed: Placed) -> tuple[np.ndarray, np.ndarray]:
        """Brokers outside their band (around the mean their rack can reach), and each
        broker's utilisation over that mean."""
        c_mean, util = self._util(placed)
        centre = c_mean * rack_share(placed.cluster, placed.scope, self.settings)
        bb = self.settings.broker_balance
        bad = placed.hb & ((util > bb * centre + 1e-12) | (util < band_floor(bb, centre) - 1e-12))
        values = np.divide(util, centre, out=util.copy(), where=centre > 0)
        return bad, values

    def figures(self, placed: Placed) -> dict[str, Any]:
        mean, util = self._util(placed)
        out = band_figures(util[placed.hb], self.settings.broker_balance, integer=False, mean=mean)
        if len(util[placed.hb]):
            bad, _ = self._outside(placed)
            out["outOfBand"] = int(bad.sum())
            out["met"] = not bad.any()
        return out

    def violations(self, placed: Placed, *, limit: int) -> list[Any]:
        bad, values = self._outside(placed)
        return broker_offenders(placed, np.flatnonzero(bad), values, limit)

    def exact_rows(self, model: ExactModel, b: int) -> None:
        """The broker's hosting dirs' replica bytes within the band, less their external
        bytes (which no plan moves)."""
        if not model.scope.balance_brokers:
            return
        dirs = model.dirs_of(b)
        e = float(model.ext[dirs].sum())
        bb = self.settings.broker_balance
        centre = model.mean * float(model.rack_share[b])
        lo = band_floor(bb, centre) * model.b_cap[b] - e
        hi = bb * centre * model.b_cap[b] - e
        model.band([model.load_col[d] for d in dirs], [1.0] * len(dirs), lo, hi, model.w_bytes)


@dataclass(frozen=True, kw_only=True)
class StartLoads:
    """The snapshot's loads before any move and the byte band they imply: what the lower
    bounds (``report``) and the reachability check (``achievable``) start from. (The greedy
    keeps its own running copy, ``state.PlannerState``.) Bytes and counts of replicas that
    must find a new home are part of the totals: they will land somewhere; replicas stuck
    on an Offline dir that is not emptied are not."""

    total: np.ndarray
    rep_bytes: np.ndarray
    #: Per dir: replica and external bytes on hosting dirs (0 elsewhere).
    load: np.ndarray
    b_load: np.ndarray
    b_cap: np.ndarray
    b_hard: np.ndarray
    hb: np.ndarray
    #: Per replica: it stays where it is, off every count and total.
    stuck: np.ndarray
    placed: float
    mean: float
    lo_b: np.ndarray
    hi_b: np.ndarray

    @classmethod
    def of(cls, cluster: Cluster, scope: Scope, goals: Goals) -> StartLoads:
        host = scope.hosting
        total = cluster.dir_total.astype(np.float64)
        n_b = cluster.n_brokers
        d_b = cluster.dir_broker
        rep_bytes = np.bincount(cluster.rep_dir, weights=cluster.rep_size, minlength=cluster.n_dirs)
        load = np.where(host, rep_bytes + cluster.dir_external(), 0.0)
        b_cap = np.bincount(d_b, weights=total * host, minlength=n_b)
        b_hard = np.bincount(d_b, weights=goals.capacity_threshold * total * host, minlength=n_b)
        stuck = (~host & ~scope.evacuate)[cluster.rep_dir]
        placed = float(cluster.rep_size[~stuck].sum()) + float(cluster.dir_external()[host].sum())
        mean = placed / float(b_cap.sum()) if b_cap.sum() else 0.0
        lo_b, hi_b = BrokerBytes(goals).band(
            mean * rack_share(cluster, scope, goals), b_cap, b_hard
        )
        return cls(
            total=total,
            rep_bytes=rep_bytes,
            load=load,
            b_load=np.bincount(d_b, weights=load, minlength=n_b),
            b_cap=b_cap,
            b_hard=b_hard,
            hb=b_cap > 0,
            stuck=stuck,
            placed=placed,
            mean=mean,
            lo_b=lo_b,
            hi_b=hi_b,
        )
