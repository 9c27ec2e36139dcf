"""Hard goal: no directory ends above the capacity threshold (Cruise Control's
DiskCapacityGoal). A directory that receives a replica must end under it; modes that balance
disks bring every hosting directory under it, others leave a full one as they found it."""

from __future__ import annotations

import numpy as np
from spindle.rebalance.goals.base import Goal, Placed, dir_loads
from spindle.rebalance.goals.protocol import ExactModel
from spindle.rebalance.input.scope import Scope


class Capacity(Goal):
    name = "capacity"
    hard = True
    steps = ("relieveCapacityS",)
    exact_unit = "dir"

    def in_scope(self, scope: Scope) -> bool:
        """Every mode keeps a receiving directory under the threshold; only modes that
        balance disks also relieve directories that start above it."""
        return scope.balance_disks

    def limit(self, total: np.ndarray) -> np.ndarray:
        """Per directory, the most bytes it may hold."""
        return np.asarray(self.settings.capacity_threshold * total)

    def over(self, placed: Placed) -> np.ndarray:
        """Hosting directories above the threshold (half a byte of float slack)."""
        return np.asarray(placed.scope.hosting & (placed.load > self.limit(placed.total) + 0.5))

    def violations(self, placed: Placed, *, limit: int) -> list[str]:
        """Directories that receive a replica and end above the threshold."""
        c, scope, cur_dir = placed.cluster, placed.scope, placed.cur_dir
        moved = (placed.cur_broker != c.rep_broker) | (cur_dir != c.rep_dir)
        load = dir_loads(c, scope, cur_dir)
        cap = self.settings.capacity_threshold * c.dir_total
        received = np.zeros(c.n_dirs, bool)
        received[cur_dir[moved]] = True
        over = scope.hosting & received & (load > cap + 0.5)
        return [
            f"broker {c.broker_ids[c.dir_broker[d]]} dir {c.dir_path[d]} "
            f"receives replicas and ends above the capacity threshold"
            for d in np.flatnonzero(over)[:limit].tolist()
        ]

    def exact_rows(self, model: ExactModel, d: int) -> None:
        """Directory ``d``'s replica bytes (column ``load_col[d]``) under the threshold less
        its external bytes -- for every hosting dir in modes that balance disks, else only
        for dirs that may receive or start under it."""
        if model.scope.balance_disks or model.load0[d] <= model.hard[d] or model.recv[d]:
            model.rows.add_merged(
                [model.load_col[d]], [1.0], -model.inf, float(model.hard[d] - model.ext[d])
            )
