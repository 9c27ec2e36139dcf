"""Soft goal: each broker's bytes over its capacity within the band around the cluster mean
(Cruise Control's DiskUsageDistributionGoal at broker level)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from spindle.rebalance.bands import band_floor
from spindle.rebalance.goals.base import Placed, SoftGoal, band_figures, broker_offenders
from spindle.rebalance.scope import Scope

if TYPE_CHECKING:
    from spindle.rebalance.exact import Model


class BrokerBytes(SoftGoal):
    name = "brokerUtilisation"
    #: A byte move's destination ranks by the taker's utilisation after the move.
    #: Refusing nothing (an evacuation must go somewhere), a taker pushed out of its band
    #: costs this much in the ranking: more than any in-band choice.
    MISS_WEIGHT = 10.0

    def in_scope(self, scope: Scope) -> bool:
        return scope.balance_brokers

    def band(self, mean: float, cap: np.ndarray, hard: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per broker ``(lo, hi)`` bytes: the band around ``mean`` utilisation scaled by its
        capacity, the top capped by its capacity threshold (a hard goal outranks a soft one)
        and the floor by the top."""
        bb = self.settings.broker_balance
        hi: np.ndarray = np.minimum(bb * mean * cap, hard)
        lo: np.ndarray = np.minimum(band_floor(bb, mean) * cap, hi)
        return lo, hi

    def _util(self, placed: Placed) -> tuple[float, np.ndarray]:
        """Cluster mean utilisation (bytes over capacity, Cruise Control's, not a mean of
        means) and each broker's."""
        b_load, b_cap = placed.b_load, placed.b_cap
        mean = float(b_load.sum() / b_cap.sum()) if b_cap.sum() else 0.0
        util = np.divide(b_load, b_cap, out=np.zeros(len(b_load)), where=placed.hb)
        return mean, util

    def figures(self, placed: Placed) -> dict[str, Any]:
        mean, util = self._util(placed)
        return band_figures(util[placed.hb], self.settings.broker_balance, integer=False, mean=mean)

    def violations(self, placed: Placed, *, limit: int) -> list[Any]:
        c_mean, util = self._util(placed)
        bb = self.settings.broker_balance
        bad = np.flatnonzero(
            placed.hb & ((util > bb * c_mean + 1e-12) | (util < band_floor(bb, c_mean) - 1e-12))
        )
        values = util / c_mean if c_mean else util
        return broker_offenders(placed, bad, values, limit)

    def exact_rows(self, model: Model, b: int) -> None:
        """The broker's hosting dirs' replica bytes within the band, less their external
        bytes (which no plan moves)."""
        if not model.scope.balance_brokers:
            return
        dirs = model.dirs_of(b)
        e = float(model.ext[dirs].sum())
        bb = self.settings.broker_balance
        lo = band_floor(bb, model.mean) * model.b_cap[b] - e
        hi = bb * model.mean * model.b_cap[b] - e
        model.band([model.load_col[d] for d in dirs], [1.0] * len(dirs), lo, hi, model.w_bytes)
