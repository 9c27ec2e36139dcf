"""Soft goal: each Active directory's utilisation within the band around its broker's mean
utilisation over Active directories (Cruise Control's IntraBrokerDiskUsageDistributionGoal)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from spindle.rebalance.goals.bands import band_floor
from spindle.rebalance.goals.base import BLOCKED, GENERIC, Move, Placed, SoftGoal
from spindle.rebalance.goals.protocol import ExactModel, State
from spindle.rebalance.input.model import ACTIVE
from spindle.rebalance.input.scope import Scope

if TYPE_CHECKING:
    from spindle.rebalance.goals.reach import Reach


class DiskBytes(SoftGoal):
    name = "diskUtilisationOverBrokerMean"
    steps = ("diskBytesS",)
    exact_rank = 3
    offends = "dir"
    #: A byte move's destination directory's own fullness: a tie-breaker next to its
    #: broker's (larger weights were measured: no gain).
    RANK_WEIGHT = 1e-3
    #: Refusing nothing, a directory pushed out of its band costs this much in the ranking.
    MISS_WEIGHT = 1.0

    def in_scope(self, scope: Scope) -> bool:
        return scope.balance_disks

    def out_of_reach(self, rc: Reach, out: dict[Any, str]) -> None:
        """Directories of brokers that move nothing between their disks, which no shedding
        brings into the band (``reach.Reach.blocked_disks``)."""
        rc.disks_out_of_reach(out)

    def top(self, st: State, d: np.ndarray, add: float, b: Any = None) -> np.ndarray:
        """The band's top of directories ``d`` (capped by the capacity threshold) if ``add``
        bytes land on their broker's Active dirs. ``b``: their brokers, when the caller
        has them (one broker, or one per directory)."""
        if b is None:
            b = st.dir_b[d]
        u = (st.a_load[b] + add) / st._a_cap_safe[b]
        if st.s.balance_brokers:
            # A broker being filled ends at least at its lower band; judging its first
            # arrivals against today's (near-empty) mean would refuse them all.
            u = np.maximum(u, st._lo_util[b])
        return np.asarray(np.minimum(st.hard[d], self.settings.disk_balance * u * st.total[d]))

    def top_one(self, st: State, d: int, u: float) -> float:
        """``top`` of one directory at its broker's Active mean ``u`` (a directory that is not
        Active has only the capacity threshold above it)."""
        if not st.active[d]:
            return float(st.hard[d])
        return float(min(st.hard[d], self.settings.disk_balance * u * st.total[d]))

    def accepts(self, st: State, mv: Move) -> Any:
        """Each candidate directory stays under its band's top after the move."""
        return mv.dir_after <= self.top(st, mv.cand, mv.s, mv.b)

    def _mean(self, placed: Placed) -> tuple[np.ndarray, np.ndarray]:
        """Active dirs, and each dir's broker's mean utilisation over its Active dirs."""
        c, load, total = placed.cluster, placed.load, placed.total
        n_b = c.n_brokers
        active = placed.scope.hosting & (c.dir_state == ACTIVE)
        a_load = np.bincount(c.dir_broker, weights=load * active, minlength=n_b)
        a_cap = np.bincount(c.dir_broker, weights=total * active, minlength=n_b)
        a_mean = np.divide(a_load, a_cap, out=np.zeros(n_b), where=a_cap > 0)[c.dir_broker]
        return active, a_mean

    def _out(self, active: np.ndarray, mean: np.ndarray, ratio: np.ndarray) -> np.ndarray:
        db = self.settings.disk_balance
        return np.asarray(
            active & (mean > 0) & ((ratio > db + 1e-9) | (ratio < band_floor(db, 1.0) - 1e-9))
        )

    def figures(self, placed: Placed) -> dict[str, Any]:
        active, a_mean = self._mean(placed)
        n_d = placed.cluster.n_dirs
        d_util = np.divide(placed.load, placed.total, out=np.zeros(n_d), where=placed.total > 0)
        ratio = np.divide(d_util, a_mean, out=np.ones(n_d), where=a_mean > 0)
        disk_out = self._out(active, a_mean, ratio)
        return {
            "max": round(float(ratio[active].max()), 6) if active.any() else 0.0,
            "min": round(float(ratio[active].min()), 6) if active.any() else 0.0,
            "outOfBand": int(disk_out.sum()),
            "met": not disk_out.any(),
        }

    def violations(self, placed: Placed, *, limit: int) -> list[Any]:
        c = placed.cluster
        active, mean = self._mean(placed)
        ratio = np.divide(
            placed.load / np.maximum(placed.total, 1), mean, out=np.ones(c.n_dirs), where=mean > 0
        )
        offline_b = placed.offline_brokers()
        db = self.settings.disk_balance
        out: list[dict[str, Any]] = []
        for d in np.flatnonzero(self._out(active, mean, ratio))[:limit].tolist():
            b = int(c.dir_broker[d])
            why = BLOCKED if offline_b[b] else GENERIC
            if not offline_b[b] and ratio[d] > db:
                on = c.rep_size[placed.cur_dir == d]
                if 0 < len(on) <= 3:
                    why = (
                        f"holds {len(on)} replica(s), the smallest of {int(on.min())} bytes; "
                        "moving it would leave this disk below its band or overfill another"
                    )
            out.append(
                {
                    "broker": int(c.broker_ids[b]),
                    "path": c.dir_path[d],
                    "utilisationOverBrokerMean": round(float(ratio[d]), 4),
                    "why": why,
                }
            )
        return out

    def exact_rows(self, model: ExactModel, b: int) -> None:
        """Per Active dir: (L_d + ext_d) / T_d within f x (Active load) / a_cap, multiplied
        out: a_cap * (L_d + ext_d) - f * T_d * (sum of L + ext over Active dirs); none for
        the model's ``excused_dirs``."""
        if not model.scope.balance_disks:
            return
        total, ext = model.total, model.ext
        act = [d for d in model.dirs_of(b) if model.active[d]]
        a_cap = float(total[act].sum())
        e_act = float(ext[act].sum())
        db = self.settings.disk_balance
        for d in act:
            if d in model.excused_dirs:
                continue
            for f, upper in ((db, True), (band_floor(db, 1.0), False)):
                cols_d = [model.load_col[dd] for dd in act]
                vals_d = [(a_cap if dd == d else 0.0) - f * total[d] for dd in act]
                const = a_cap * ext[d] - f * total[d] * e_act
                model.one_sided(cols_d, vals_d, -const, upper=upper)
