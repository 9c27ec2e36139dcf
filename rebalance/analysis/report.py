"""Everything computed about a placement rather than for it: the reassignment JSON, the balance
figures, the lower bounds on bytes moved, and an independent check of the hard rules.

Independent on purpose: these functions recompute loads from the final replica positions and
share no state with the greedy, so a bookkeeping slip in the core shows up here (and in the
tests) instead of in a cluster.

Reassignment JSON, as ``kafka-reassign-partitions --execute`` reads it (Kafka KIP-113)::

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3],
                                   "log_dirs": ["/data-0", "any", "any"]}]}

``log_dirs`` names a directory for every replica the plan moves and says ``"any"`` for the
others: the tool sends AlterReplicaLogDirs only for named directories, so replicas that stay
put (including ones on an Offline directory, which would answer KAFKA_STORAGE_ERROR) are not
touched.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from spindle.rebalance.analysis.achievable import unachievable
from spindle.rebalance.analysis.bound_lp import lp_bound
from spindle.rebalance.goals import BrokerBytes, Capacity, DiskBytes, hard_goals, soft_goals
from spindle.rebalance.goals.bands import band_floor
from spindle.rebalance.goals.base import Placed, dir_loads
from spindle.rebalance.goals.broker_bytes import StartLoads
from spindle.rebalance.input.model import ACTIVE, OFFLINE, STATES, Cluster, Goals
from spindle.rebalance.input.scope import Scope


def build_plan(
    cluster: Cluster,
    cur_broker: np.ndarray,
    cur_dir: np.ndarray,
    leader: np.ndarray | None = None,
) -> dict[str, Any]:
    """Reassignment JSON listing only partitions with a replica on another broker or dir (or,
    with ``leader`` differing from the snapshot's, a new preferred leader, listed first),
    sorted by (topic, partition) so the same placement gives the same bytes.

    A listed partition whose leading replica moves to another broker lists it first too:
    when the reassignment removes the old leader, Kafka elects the first live replica of the
    new list, so that is where leadership ends (``build_election`` then leaves it alone)."""
    changed = (cur_broker != cluster.rep_broker) | (cur_dir != cluster.rep_dir)
    touched = changed.copy()
    lead = cluster.rep_leader if leader is None else leader
    reordered = lead != cluster.rep_leader
    touched |= reordered
    lead_moves = lead & (cur_broker != cluster.rep_broker)
    parts = np.unique(cluster.rep_part[touched])
    lo_p, hi_p = cluster.part_start[parts], cluster.part_start[parts + 1]
    # Array operations, not a Python loop over slices of each partition: per listed
    # partition its first leading replica when the leader is listed first (a leader
    # reordered or moving to another broker, and some replica leads), else -1.
    lead_rows = np.flatnonzero(lead)
    at = np.searchsorted(lead_rows, lo_p)
    first_lead = lead_rows[np.minimum(at, len(lead_rows) - 1)] if len(lead_rows) else lo_p
    has_lead = (at < len(lead_rows)) & (first_lead < hi_p)
    cs = np.concatenate(([0], np.cumsum(reordered | lead_moves)))
    firsts = np.where(has_lead & (cs[hi_p] > cs[lo_p]), first_lead, -1).tolist()
    # The listed partitions' replicas, partition after partition.
    n = hi_p - lo_p
    rows = np.repeat(lo_p - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
    broker = cluster.broker_ids[cur_broker[rows]].tolist()
    path = cluster.dir_path
    dirs = [
        path[d] if c else "any"
        for d, c in zip(cur_dir[rows].tolist(), changed[rows].tolist(), strict=True)
    ]
    topic, num = cluster.part_topic, cluster.part_num
    entries = []
    off = 0
    for p, lo, hi, first in zip(parts.tolist(), lo_p.tolist(), hi_p.tolist(), firsts, strict=True):
        order = list(range(off, off + hi - lo))
        if first >= 0:
            f = off + first - lo
            order = [f] + [i for i in order if i != f]
        off += hi - lo
        entries.append(
            {
                "topic": topic[p],
                "partition": int(num[p]),
                "replicas": [broker[i] for i in order],
                "log_dirs": [dirs[i] for i in order],
            }
        )
    entries.sort(key=lambda e: (e["topic"], e["partition"]))
    return {"version": 1, "partitions": entries}


def build_election(cluster: Cluster, leader: np.ndarray | None) -> dict[str, Any]:
    """The partitions whose preferred leader the plan changes, as
    ``kafka-leader-election --election-type preferred --path-to-json-file`` reads them::

        {"partitions": [{"topic": "t", "partition": 0}]}

    Only these: a preferred election over every partition would also move the leaders of
    partitions the plan left alone whose leader is not first in its list today (the plan
    counted them where they are)."""
    if leader is None:
        return {"partitions": []}
    parts = np.unique(cluster.rep_part[leader != cluster.rep_leader])
    entries = [
        {"topic": cluster.part_topic[p], "partition": int(cluster.part_num[p])}
        for p in parts.tolist()
    ]
    entries.sort(key=lambda e: (str(e["topic"]), int(e["partition"])))
    return {"partitions": entries}


def figures(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    cur_broker: np.ndarray,
    cur_dir: np.ndarray,
    leader: np.ndarray | None = None,
) -> dict[str, Any]:
    """Balance figures of a placement and which soft goals it meets. Only hosting directories
    and brokers that keep at least one count; replicas stranded on Offline dirs are left out
    of counts (they serve nothing)."""
    placed = Placed.of(cluster, scope, goals, cur_broker, cur_dir, leader)
    host = scope.hosting
    b_load, b_cap = placed.b_load, placed.b_cap
    mean = float(b_load.sum() / b_cap.sum()) if b_cap.sum() else 0.0
    out: dict[str, Any] = {"meanUtilisation": round(mean, 6)}
    for goal in soft_goals(goals):
        out[goal.name] = goal.figures(placed)
    d_util = np.divide(
        placed.load, placed.total, out=np.zeros(cluster.n_dirs), where=placed.total > 0
    )
    out["dirsOverCapacityThreshold"] = int(Capacity(goals).over(placed).sum())
    out["maxDirUtilisation"] = round(float(d_util[host].max()), 6) if host.any() else 0.0
    return out


_INV_PHI = (5**0.5 - 1) / 2


def _golden_min(f: Any, lo: np.ndarray, hi: np.ndarray, steps: int) -> np.ndarray:
    """Minimum of convex functions f (vectorised over brokers) on [lo, hi], from above: a
    golden-section search, one evaluation per step (a ternary search takes two per step and
    cuts less: 103 evaluations where this takes 46 for the same ~2e-9 of the interval)."""
    a, b = lo.copy(), hi.copy()
    c, d = b - _INV_PHI * (b - a), a + _INV_PHI * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(steps):
        left = fc <= fd  # the minimum is in [a, d]: d becomes c; else in [c, b]: c becomes d
        b, a = np.where(left, d, b), np.where(left, a, c)
        x = np.where(left, b - _INV_PHI * (b - a), a + _INV_PHI * (b - a))
        fx = f(x)
        c, d = np.where(left, x, d), np.where(left, c, x)
        fc, fd = np.where(left, fx, fd), np.where(left, fc, fx)
    return np.asarray(np.minimum.reduce([fc, fd, f(lo), f(hi)]), np.float64)


def _golden_max(f: Any, lo: float, hi: float, steps: int) -> float:
    """The largest value f (concave, scalar) takes at the points a golden-section search
    for its maximum on [lo, hi] evaluates."""
    a, b = lo, hi
    c, d = b - _INV_PHI * (b - a), a + _INV_PHI * (b - a)
    fc, fd = f(c), f(d)
    best = max(fc, fd)
    for _ in range(steps):
        if fc >= fd:
            b, d, fd = d, c, fc
            c = b - _INV_PHI * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + _INV_PHI * (b - a)
            fd = f(d)
        best = max(best, fc, fd)
    return float(best)


def lower_bounds(cluster: Cluster, scope: Scope, goals: Goals) -> dict[str, float]:
    """Bytes any plan meeting the mode's goals must move, at least.

    ``forced``: every replica on a directory that must be emptied moves. Balance (full mode):
    for broker b ending with load L' inside its band, bytes leaving its hosting dirs X and
    entering Y satisfy X >= excess_b(L') (what sits above the directories' upper bands),
    Y >= deficit_b(L') (what is missing below the lower bands) and Y - X = L' - L_b. Summing
    the per-broker minimum over L' of the implied bound on X (and, separately, on Y) bounds
    the total; both functions are convex in L', so a golden-section search finds the minimum. The
    directory bands use the broker mean of Active dirs, bounded from the safe side because
    Cordoned dirs can only lose bytes.
    """
    bd = _BoundFigures(cluster, scope, goals)
    out: dict[str, float] = {"forced": bd.forced}
    if scope.mode == "full":
        out.update(_balance_bounds(bd))
    elif scope.mode == "intra-broker":
        n_b = cluster.n_brokers
        per_b_forced = np.bincount(
            cluster.dir_broker, weights=bd.rep_bytes * scope.evacuate, minlength=n_b
        )
        e, f = bd.parts(bd.b_load + per_b_forced)
        out["bytes"] = float(np.maximum(per_b_forced + e, f).sum())
        out["crossBroker"] = 0.0
    elif scope.mode == "add-brokers":
        recv_b, hb = _recv_b(cluster, scope), bd.hb
        give = float(np.maximum(bd.b_load - bd.hi_b, 0)[hb & ~recv_b].sum())
        take = float(np.maximum(bd.lo_b - bd.b_load, 0)[hb & recv_b].sum())
        out["bytes"] = out["crossBroker"] = max(give, take)
    else:
        out["bytes"] = bd.forced
        must = float(bd.rep_bytes[scope.must_leave_broker].sum())
        out["crossBroker"] = must
    return {k: round(v, 1) for k, v in out.items()}


class _BoundFigures:
    """What the lower bounds start from: the snapshot's loads, the byte bands, and per
    broker the bytes a final load forces off (or onto) its directories (``parts``)."""

    def __init__(self, cluster: Cluster, scope: Scope, goals: Goals) -> None:
        self.cluster, self.scope, self.goals = cluster, scope, goals
        host = scope.hosting
        st = StartLoads.of(cluster, scope, goals)
        self.total = total = st.total
        self.rep_bytes = st.rep_bytes
        self.forced = float(self.rep_bytes[scope.evacuate].sum())
        self.load = load = st.load
        n_b = cluster.n_brokers
        self.db = goals.disk_balance
        self.hard = goals.capacity_threshold * total
        self.active = active = host & (cluster.dir_state == ACTIVE)
        self.b_load = st.b_load
        self.placed = st.placed
        self.hb = st.hb
        # A band no plan reaches under the hard rules (``achievable``) bounds nothing: a
        # plan meeting every achievable goal may leave that broker or directory anywhere
        # up to its capacity threshold, so counting its band would overstate the bound.
        self.impossible = impossible = unachievable(cluster, scope, goals)
        loose_b = np.zeros(n_b, bool)
        loose_b[list(impossible[BrokerBytes.name])] = True
        self.lo_b = np.where(loose_b, 0.0, st.lo_b)
        self.hi_b = np.where(loose_b, st.b_hard, st.hi_b)
        self.loose_d = np.zeros(cluster.n_dirs, bool)
        self.loose_d[list(impossible[DiskBytes.name])] = True
        self.a_cap = np.bincount(cluster.dir_broker, weights=total * active, minlength=n_b)
        self.cordoned = np.bincount(
            cluster.dir_broker, weights=load * (host & ~active), minlength=n_b
        )

    def parts(self, lp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per broker ending at load ``lp``: bytes above its directories' upper bands, and
        bytes missing below their lower bands (the Active mean bounded from the safe side:
        Cordoned dirs can only lose bytes)."""
        n_b, a_cap, db, hard, total = (
            self.cluster.n_brokers,
            self.a_cap,
            self.db,
            self.hard,
            self.total,
        )
        active, host, load = self.active, self.scope.hosting, self.load
        u_hi = np.divide(lp, a_cap, out=np.zeros(n_b), where=a_cap > 0)
        u_lo = np.divide(
            np.maximum(lp - self.cordoned, 0), a_cap, out=np.zeros(n_b), where=a_cap > 0
        )
        d_b = self.cluster.dir_broker
        banded = active & ~self.loose_d
        hi_d = np.where(banded, np.minimum(hard, db * u_hi[d_b] * total), hard)
        lo_d = np.where(banded & self.scope.receivable, band_floor(db, u_lo[d_b]) * total, 0.0)
        e = np.bincount(d_b, weights=np.where(host, np.maximum(load - hi_d, 0), 0), minlength=n_b)
        f = np.bincount(d_b, weights=np.where(host, np.maximum(lo_d - load, 0), 0), minlength=n_b)
        return e, f


def _balance_bounds(bd: _BoundFigures) -> dict[str, float]:
    """Full mode: the balance bound (Lagrangian over the brokers' coupled final loads) and
    the cross-broker bound."""
    n_b, b_load, hb, forced = bd.cluster.n_brokers, bd.b_load, bd.hb, bd.forced

    def x_bound(lp: np.ndarray) -> np.ndarray:
        e, f = bd.parts(lp)
        return np.asarray(np.maximum.reduce([e, f - lp + b_load, b_load - lp, np.zeros(n_b)]))

    def y_bound(lp: np.ndarray) -> np.ndarray:
        e, f = bd.parts(lp)
        return np.asarray(np.maximum.reduce([f, e + lp - b_load, lp - b_load, np.zeros(n_b)]))

    lo = np.where(hb, bd.lo_b, 0.0)
    hi = np.where(hb, bd.hi_b, 0.0)
    # The brokers' final loads are coupled: sum(L' - L) = forced bytes. Minimising each
    # broker alone ignores that (every broker would pick its most convenient end of the
    # band); a Lagrange multiplier on the coupling keeps the bound valid (weak duality:
    # any multiplier gives a lower bound) and much tighter, so the best one is searched.
    floating = float(forced)

    def dual(bound: Any, lam: float) -> float:
        inner = _golden_min(lambda lp: bound(lp) + lam * (lp - b_load), lo, hi, steps=42)
        return float(inner.sum()) - lam * floating

    def best(bound: Any) -> float:
        # Every multiplier's dual value bounds the bytes (weak duality), so the best one
        # evaluated is used, and the one at 0 (each broker alone) beside it.
        return max(_golden_max(lambda lam: dual(bound, lam), -2.0, 2.0, 34), dual(bound, 0.0))

    # The searches stop within ~1e-9 of a band's width of the minimum (from above); a
    # millionth of the placed bytes keeps the bound on the safe side of that.
    slack = 1e-6 * bd.placed
    out: dict[str, float] = {}
    out["balance"] = max(forced, forced + best(x_bound) - slack, best(y_bound) - slack)
    out["crossBroker"] = max(
        float(np.maximum(b_load - bd.hi_b, 0)[hb].sum()),
        float(np.maximum(bd.lo_b - b_load, 0)[hb & _recv_b(bd.cluster, bd.scope)].sum()),
    )
    # The linear program adds the count goals (and reads the directory bands exactly).
    lp = lp_bound(bd.cluster, bd.scope, bd.goals, bd.impossible)
    if lp is not None:
        out["lp"] = lp
    out["bytes"] = max(forced, out["balance"], lp or 0.0)
    return out


def _recv_b(cluster: Cluster, scope: Scope) -> np.ndarray:
    out = np.zeros(cluster.n_brokers, bool)
    out[cluster.dir_broker[scope.receivable]] = True
    return out


def hard_violations(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    cur_broker: np.ndarray,
    cur_dir: np.ndarray,
    *,
    check_capacity: bool = True,
) -> list[str]:
    """Hard rules broken by the moves of a placement (pre-existing states that no move touched
    are judged by the caller). Empty means the plan may be executed."""
    problems: list[str] = []
    moved = (cur_broker != cluster.rep_broker) | (cur_dir != cluster.rep_dir)
    if (cluster.dir_broker[cur_dir] != cur_broker).any():
        problems.append("a replica's directory is not on its broker")
    # fix-offline: a replica of an offline directory re-homed on its own broker is fine.
    rehomed = scope.rehome[cur_dir] & (cur_broker == cluster.rep_broker)
    bad_dest = moved & ~scope.receivable[cur_dir] & ~(rehomed & ~scope.hosting[cluster.rep_dir])
    for r in np.flatnonzero(bad_dest)[:5].tolist():
        d = int(cur_dir[r])
        problems.append(
            f"replica {r} placed on broker {cluster.broker_ids[cluster.dir_broker[d]]} dir "
            f"{cluster.dir_path[d]} ({STATES[int(cluster.dir_state[d])]}, not receivable)"
        )
    left = scope.evacuate[cur_dir]
    if left.any():
        problems.append(f"{int(left.sum())} replicas remain on directories that must be emptied")
    # One replica per broker per partition: each partition's brokers as a row, sorted (a
    # partition has a few replicas; sorting rows is cheaper than a set over all of them).
    rows = _brokers_by_partition(cluster, cur_broker)
    rows.sort(axis=1)
    if ((rows[:, 1:] == rows[:, :-1]) & (rows[:, 1:] >= 0)).any():
        problems.append("a broker holds two replicas of one partition")
    # No replica moves onto a broker that held its partition in the snapshot: Kafka names
    # replicas by broker, so it would run that as a reorder and fewer copies than planned.
    cross = np.flatnonzero(cur_broker != cluster.rep_broker)
    if len(cross):
        held = _brokers_by_partition(cluster, cluster.rep_broker)[cluster.rep_part[cross]]
        onto = (held == cur_broker[cross][:, None]).any(axis=1)
        for r in cross[onto][:5].tolist():
            p = int(cluster.rep_part[r])
            problems.append(
                f"partition {cluster.part_topic[p]}-{int(cluster.part_num[p])}: a replica moves "
                f"onto broker {cluster.broker_ids[cur_broker[r]]}, which held the partition"
            )
    placed = Placed.of(cluster, scope, goals, cur_broker, cur_dir)
    for goal in hard_goals(goals):
        if check_capacity or not isinstance(goal, Capacity):
            problems.extend(goal.violations(placed, limit=5))
    offline_dest = moved & (cluster.dir_state[cur_dir] == OFFLINE)
    if offline_dest.any():
        problems.append("a replica placed on an Offline directory")
    return problems


def _brokers_by_partition(cluster: Cluster, broker: np.ndarray) -> np.ndarray:
    """Each partition's replicas' brokers as one row (partitions x largest replication
    factor), padded with -1."""
    rf = np.diff(cluster.part_start)
    out = np.full((cluster.n_partitions, max(int(rf.max(initial=0)), 1)), -1, np.int64)
    slot = np.arange(cluster.n_replicas) - cluster.part_start[cluster.rep_part]
    out[cluster.rep_part, slot] = broker
    return out


def per_broker_and_dir(
    cluster: Cluster,
    scope: Scope,
    before: tuple[np.ndarray, np.ndarray],
    after: tuple[np.ndarray, np.ndarray],
    leader: np.ndarray | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Usage per broker and per directory before and after, for the summary."""
    total = cluster.dir_total.astype(float)
    # Before the plan every non-Offline dir still holds what it holds.
    lb = np.bincount(before[1], weights=cluster.rep_size, minlength=cluster.n_dirs) + np.where(
        cluster.dir_state != OFFLINE, cluster.dir_external(), 0
    )
    la = dir_loads(cluster, scope, after[1])
    n_b = cluster.n_brokers
    brokers = []
    for b in range(n_b):
        mask = cluster.dir_broker == b
        cap = float(total[mask].sum())
        rb, ra = before[0] == b, after[0] == b
        brokers.append(
            {
                "id": int(cluster.broker_ids[b]),
                "bytesBefore": int(lb[mask].sum()),
                "bytesAfter": int(la[mask].sum()),
                "utilisationBefore": round(float(lb[mask].sum()) / cap, 6) if cap else 0.0,
                "utilisationAfter": round(float(la[mask].sum()) / cap, 6) if cap else 0.0,
                "replicasBefore": int(rb.sum()),
                "replicasAfter": int(ra.sum()),
                "leadersBefore": int((rb & cluster.rep_leader).sum()),
                "leadersAfter": int(
                    (ra & (cluster.rep_leader if leader is None else leader)).sum()
                ),
            }
        )
    dirs = []
    for d in range(cluster.n_dirs):
        t = float(total[d])
        dirs.append(
            {
                "broker": int(cluster.broker_ids[cluster.dir_broker[d]]),
                "path": cluster.dir_path[d],
                "state": STATES[int(cluster.dir_state[d])],
                "bytesBefore": int(lb[d]),
                "bytesAfter": int(la[d]),
                "utilisationBefore": round(float(lb[d]) / t, 6) if t else 0.0,
                "utilisationAfter": round(float(la[d]) / t, 6) if t else 0.0,
            }
        )
    return brokers, dirs


def offenders(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    cur_broker: np.ndarray,
    cur_dir: np.ndarray,
    goal: str,
    *,
    limit: int = 10,
    leader: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """The brokers or directories outside a soft goal's band after the plan, each with the
    most specific reason known, so that an operator can tell a real limit from a planner one.
    """
    placed = Placed.of(cluster, scope, goals, cur_broker, cur_dir, leader)
    (found,) = [g for g in soft_goals(goals) if g.name == goal]
    return found.violations(placed, limit=limit)
