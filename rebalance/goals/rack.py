"""Hard goal (unless ``rack_aware`` is off): a partition's replicas spread over racks, at most
``max_per_rack`` on one rack as far as the racks hosting replicas allow (Cruise Control's
RackAwareGoal). Modes that fix racks bring every partition within it; the others may not
crowd a partition they touch that was not crowded before."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from spindle.rebalance.goals.base import Goal, Placed
from spindle.rebalance.model import I64, Cluster
from spindle.rebalance.scope import Scope

if TYPE_CHECKING:
    from spindle.rebalance.exact import Model


def hosting_racks(cluster: Cluster, scope: Scope) -> int:
    """Racks that will still hold replicas: the "where racks allow" of rack awareness."""
    brokers = np.unique(cluster.dir_broker[scope.hosting])
    return len(np.unique(cluster.broker_rack[brokers])) if len(brokers) else 0


def rack_limits(replication: I64, n_racks: int) -> I64:
    """``max_per_rack`` for many partitions at once."""
    limits = np.maximum(1, -(-replication // max(n_racks, 1))).astype(np.int64)
    return limits


class Rack(Goal):
    name = "rack"
    hard = True

    def in_scope(self, scope: Scope) -> bool:
        return bool(self.settings.rack_aware)

    def violations(self, placed: Placed, *, limit: int) -> list[str]:
        c, scope = placed.cluster, placed.scope
        if not self.settings.rack_aware:
            return []
        moved = (placed.cur_broker != c.rep_broker) | (placed.cur_dir != c.rep_dir)
        limits = rack_limits(np.diff(c.part_start), hosting_racks(c, scope))
        n_rk = len(c.racks) + 1
        crowded = _crowded(
            c.rep_part.astype(np.int64) * n_rk + c.broker_rack[placed.cur_broker], n_rk, limits
        )
        if scope.fix_racks:
            found = crowded
        else:
            touched = np.unique(c.rep_part[moved])
            was = _crowded(
                c.rep_part.astype(np.int64) * n_rk + c.broker_rack[c.rep_broker], n_rk, limits
            )
            found = np.setdiff1d(np.intersect1d(crowded, touched), was)
        return [
            f"partition {c.part_topic[p]}-{int(c.part_num[p])} has replicas "
            "sharing a rack although racks allow otherwise"
            for p in found[:limit].tolist()
        ]

    def exact_rows(self, model: Model, p: int) -> None:
        """Partition ``p``: at most its rack limit on each rack, less the replicas that stay
        put off the model (on Offline dirs)."""
        if not self.settings.rack_aware or not model.keep_rack[p]:
            return
        cols, fixed_b = model.partition(p)
        rack_of_b = model.cluster.broker_rack
        per_rack: dict[int, list[int]] = {}
        for j in cols:
            per_rack.setdefault(int(rack_of_b[model.xb[j]]), []).append(j)
        fixed_racks = [int(rack_of_b[b]) for b in fixed_b]
        for rk, js in per_rack.items():
            cap = int(model.limits[p]) - fixed_racks.count(rk)
            if len(js) > cap:
                model.rows.add(js, [1.0] * len(js), -model.inf, float(cap))


def _crowded(key: np.ndarray, n_rk: int, limits: np.ndarray) -> np.ndarray:
    """Partitions with more replicas on one rack than their limit; ``key`` is partition x
    ``n_rk`` + rack per replica."""
    uniq, counts = np.unique(key, return_counts=True)
    part = uniq // n_rk
    return np.unique(part[counts > limits[part]])
