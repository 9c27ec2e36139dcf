"""Hard goal (unless ``rack_aware`` is off): a partition's replicas spread over racks, at most
``max_per_rack`` on one rack as far as the racks hosting replicas allow (Cruise Control's
RackAwareGoal). Modes that fix racks bring every partition within it; the others may not
crowd a partition they touch that was not crowded before."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from spindle.rebalance.goals.base import Goal, Placed
from spindle.rebalance.goals.protocol import ExactModel
from spindle.rebalance.input.model import I64, Cluster, Goals
from spindle.rebalance.input.scope import Scope

if TYPE_CHECKING:
    from spindle.rebalance.goals.reach import Reach


def hosting_racks(cluster: Cluster, scope: Scope) -> int:
    """Racks that will still hold replicas: the "where racks allow" of rack awareness."""
    brokers = np.unique(cluster.dir_broker[scope.hosting])
    return len(np.unique(cluster.broker_rack[brokers])) if len(brokers) else 0


def rack_limits(replication: I64, n_racks: int) -> I64:
    """``max_per_rack`` for many partitions at once."""
    limits = np.maximum(1, -(-replication // max(n_racks, 1))).astype(np.int64)
    return limits


#: The last few ``rack_share`` answers, by the identity of the cluster and scope they were
#: computed for: a plan asks for the same cluster's several times (the greedy, the report's
#: figures, the bounds, the reachability check) and each answer costs a pass over every
#: replica (about 0.1 s at a million). Two entries: a plan and its later pass.
_SHARES: list[tuple[Cluster, Scope, Goals, np.ndarray]] = []


def rack_share(cluster: Cluster, scope: Scope, goals: Goals) -> np.ndarray:
    """Per broker: the mean utilisation its rack can reach under rack awareness, over the
    cluster's mean (1.0 everywhere unless the rule keeps some rack off the cluster mean).

    Why: with racks of unequal size the rule fixes how many bytes each rack holds (RF 3 on
    3 racks: a third each, whatever the plan), so a small rack's brokers can never come near
    the cluster mean. The broker byte band is then read around the mean the rack can reach
    instead: the plan balances brokers inside their rack, the goal says whether it did, and
    the lower bound counts that work (around the unreachable cluster mean the band was out
    of reach, so the bound counted none of the bytes the plan spent there).

    Each rack holds between ``need`` and ``can`` replicas of each partition (see
    ``achievable``; replica sizes are per partition, so the smallest and largest of a
    partition bound its bytes); its load lies in ``[lo_r, hi_r]`` (plus its external
    bytes). The level ``u`` with ``sum_r clip(u * cap_r, lo_r, hi_r) = placed`` (water
    filling, by bisection) gives each rack its reachable mean ``clip(u * cap_r, ...) /
    cap_r``. Used whenever some rack cannot reach the cluster mean itself: a rack pinned
    even slightly off it (RF 3 on 3 racks of unequal capacity) otherwise leaves its brokers
    almost no room inside the band, and count moves between them have nowhere to go; when
    every rack can reach the cluster mean, the band is the cluster's, as before."""
    for c, sc, g, share in _SHARES:
        if c is cluster and sc is scope and g == goals:
            return share
    share = _rack_share(cluster, scope, goals)
    share.flags.writeable = False
    _SHARES.insert(0, (cluster, scope, goals, share))
    del _SHARES[2:]
    return share


def _rack_share(cluster: Cluster, scope: Scope, goals: Goals) -> np.ndarray:
    """``rack_share``, computed."""
    n_b = cluster.n_brokers
    ones = np.ones(n_b)
    k = hosting_racks(cluster, scope)
    if not goals.rack_aware or k <= 1 or cluster.n_replicas == 0:
        return ones
    host = scope.hosting
    total = cluster.dir_total.astype(np.float64)
    b_cap = np.bincount(cluster.dir_broker, weights=total * host, minlength=n_b)
    ext = np.bincount(
        cluster.dir_broker, weights=np.where(host, cluster.dir_external(), 0), minlength=n_b
    )
    hb = b_cap > 0
    stuck = (~host & ~scope.evacuate)[cluster.rep_dir]
    placed = float(cluster.rep_size[~stuck].sum()) + float(ext.sum())
    if placed <= 0 or b_cap.sum() <= 0:
        return ones
    rf = np.diff(cluster.part_start)
    live = rf > 0
    starts = cluster.part_start[:-1][live]
    m = rack_limits(rf[live], k)
    size = np.where(stuck, 0, cluster.rep_size).astype(np.float64)
    small = np.minimum.reduceat(size, starts)
    large = np.maximum.reduceat(size, starts)
    lo_reps = float((np.maximum(0, rf[live] - m * (k - 1)) * small).sum())
    hi_reps = float((np.minimum(m, rf[live]) * large).sum())
    racks = np.unique(cluster.broker_rack[hb])
    rack_of = cluster.broker_rack
    cap_r = np.array([b_cap[hb & (rack_of == r)].sum() for r in racks])
    ext_r = np.array([ext[hb & (rack_of == r)].sum() for r in racks])
    lo_r, hi_r = lo_reps + ext_r, hi_reps + ext_r
    mean = placed / float(cap_r.sum())
    if np.all((lo_r <= mean * cap_r) & (hi_r >= mean * cap_r)):
        return ones
    a, b = 0.0, 2.0 * float((hi_r / cap_r).max()) + 2.0 * mean
    for _ in range(100):
        u = 0.5 * (a + b)
        if float(np.clip(u * cap_r, lo_r, hi_r).sum()) < placed:
            a = u
        else:
            b = u
    reach = np.clip(0.5 * (a + b) * cap_r, lo_r, hi_r) / cap_r
    out = ones.copy()
    for r, u_r in zip(racks.tolist(), reach.tolist(), strict=True):
        out[hb & (rack_of == r)] = u_r / mean
    return out


class Rack(Goal):
    name = "rack"
    hard = True
    steps = ("fixRacksS",)
    exact_unit = "partition"

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

    def excuses(self, rc: Reach, out: dict[str, dict[Any, str]]) -> None:
        """Racks whose brokers the rule holds out of their byte or replica bands."""
        rc.rack_excuses(out)

    def exact_rows(self, model: ExactModel, p: int) -> None:
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
                model.rows.add_merged(js, [1.0] * len(js), -model.inf, float(cap))


def _crowded(key: np.ndarray, n_rk: int, limits: np.ndarray) -> np.ndarray:
    """Partitions with more replicas on one rack than their limit; ``key`` is partition x
    ``n_rk`` + rack per replica."""
    uniq, counts = np.unique(key, return_counts=True)
    part = uniq // n_rk
    return np.unique(part[counts > limits[part]])
