"""The exact planner for small clusters: a mixed-integer program solved by HiGHS.

Why: the greedy can stop short. It may refuse a plan ("no directory can take it") when a
placement exists that needs several replicas to make way at once, and it may leave a soft
goal out of band that some plan reaches. On a small cluster both questions can be settled
exactly: one binary per (replica, directory it may end on) says where each replica ends, so
every replica moves at most once by construction, and the solver either finds the placement
that meets the hard rules with the least band violation and the fewest bytes moved, or
proves that no placement meets the hard rules.

Model (everything the summary and ``report.hard_violations`` judge, nothing more):
  - each replica ends on exactly one directory: where it is (unless that directory must be
    emptied) or, if the mode lets it move, a receivable directory (another broker only when
    the mode moves replicas across brokers and that broker held no replica of the partition
    in the snapshot; the same broker only when it may move replicas between its own disks
    and the replica need not leave the broker);
  - one replica per broker per partition; at most ``max_per_rack`` replicas of a partition per
    rack (full mode: every partition; other modes: those that keep the rule today);
  - no directory above the capacity threshold (modes that balance disks: every hosting
    directory; others: no directory receives if it is above it, none ends above it if it
    receives);
  - soft bands of the goals the mode works on (broker bytes, directory over broker mean,
    replica and leader counts), made elastic: a non-negative slack per band side, penalised
    far above any byte cost, so an unreachable band costs its violation instead of making
    the model infeasible;
  - objective: penalised slack plus bytes moved.

Deterministic: one thread, a fixed seed, and a node limit; the time limit is a backstop
whose results are not used (where a search stops on the clock depends on the machine), and
the result says whether the solve was optimal or stopped by a limit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import highspy
import numpy as np
from spindle.rebalance.bands import band_floor, count_band
from spindle.rebalance.model import ACTIVE, Cluster, Goals
from spindle.rebalance.prepare import hosting_racks, rack_limits
from spindle.rebalance.scope import Scope

#: Largest cluster (replicas) the pipeline hands to the exact planner. Measured on this
#: machine (one thread, NODE_LIMIT): 48 replicas 0.2-2.4 s, 100-300 replicas 0.3-4 s, about
#: 500 replicas 3-10 s (8 brokers x 2 disks); proving infeasibility is usually sub-second.
MAX_REPLICAS = 500
#: Backstop for one solve (seconds); the node limit normally ends a long search first.
TIME_LIMIT = 30.0
#: Branch-and-bound nodes per solve: a deterministic limit, unlike the time limit.
NODE_LIMIT = 500
#: Relative optimality gap at which a solve stops: bytes within about this of the optimum.
REL_GAP = 1e-3


@dataclass(frozen=True, kw_only=True)
class ExactResult:
    """Outcome of one solve. ``status``: ``optimal``; ``feasible`` (the node limit stopped
    the search with a placement in hand); ``infeasible`` (proved: no placement meets the hard
    rules); ``timeLimit`` (the time backstop stopped it: no placement returned, since where
    it stops depends on the machine); ``unknown`` (stopped before any placement was found)."""

    status: str
    cur_broker: np.ndarray | None = None
    cur_dir: np.ndarray | None = None
    #: Bytes moved by the placement found.
    bytes_moved: float = 0.0
    #: Penalised band violation left (0: every soft band of the mode met).
    violation: float = 0.0
    seconds: float = 0.0
    variables: int = 0


class _Rows:
    """Constraint rows gathered as (lower, upper, columns, values), added in one call."""

    def __init__(self) -> None:
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.starts: list[int] = []
        self.idx: list[int] = []
        self.val: list[float] = []

    def add(self, cols: list[int], vals: list[float], lo: float, hi: float) -> None:
        merged: dict[int, float] = {}
        for c, v in zip(cols, vals, strict=True):
            merged[c] = merged.get(c, 0.0) + v
        items = [(c, v) for c, v in merged.items() if v != 0.0]
        if not items:
            return
        self.starts.append(len(self.idx))
        self.lo.append(lo)
        self.hi.append(hi)
        for c, v in items:
            self.idx.append(c)
            self.val.append(v)

    def flush(self, h: highspy.Highs) -> None:
        if not self.lo:
            return
        h.addRows(
            len(self.lo),
            np.asarray(self.lo, np.float64),
            np.asarray(self.hi, np.float64),
            len(self.idx),
            np.asarray(self.starts, np.int32),
            np.asarray(self.idx, np.int32),
            np.asarray(self.val, np.float64),
        )


def solve(
    cluster: Cluster,
    scope: Scope,
    goals: Goals,
    *,
    elastic: bool = True,
    time_limit: float = TIME_LIMIT,
    node_limit: int = NODE_LIMIT,
    rel_gap: float = REL_GAP,
    onto_holders: bool = False,
) -> ExactResult:
    """Best placement for the mode's scope. ``elastic=False``: the soft bands are hard
    constraints too (the test's "exact optimum meeting every goal"). ``onto_holders``: let a
    replica move onto a broker that held its partition in the snapshot (after that replica
    left), as the hard rules allow; off by default because Kafka names replicas by broker,
    so such a plan reorders the replica list instead of moving data."""
    t0 = time.perf_counter()
    inf = highspy.kHighsInf
    n_r, n_d, n_b = cluster.n_replicas, cluster.n_dirs, cluster.n_brokers
    # Units of the largest disk: byte products would pass HiGHS's 1e20 "infinity".
    unit = float(max(int(cluster.dir_total.max(initial=1)), 1))
    size = cluster.rep_size.astype(np.float64) / unit
    total = cluster.dir_total.astype(np.float64) / unit
    hard = goals.capacity_threshold * total
    ext = np.where(scope.hosting, cluster.dir_external(), 0).astype(np.float64) / unit
    d_b = cluster.dir_broker
    host = scope.hosting
    active = host & (cluster.dir_state == ACTIVE)
    rep_dir0 = cluster.rep_dir
    load0 = np.bincount(rep_dir0, weights=size, minlength=n_d) + ext
    balances = scope.balance_brokers or scope.balance_disks or scope.balance_counts
    may_move = scope.evacuate[rep_dir0] | (balances or scope.fix_racks)
    # A directory above the threshold that no mode rule fixes may not receive.
    recv = scope.receivable & (scope.balance_disks | (load0 <= hard))

    # Columns: x[r, d] binaries, one per place replica r may end on.
    col_r: list[int] = []
    col_d: list[int] = []
    stuck = np.zeros(n_r, bool)  # replicas that stay where they are, off the model (Offline)
    for r in range(n_r):
        d0 = int(rep_dir0[r])
        b0 = int(d_b[d0])
        if not host[d0] and not scope.evacuate[d0]:
            stuck[r] = True
            continue
        if not scope.evacuate[d0]:
            col_r.append(r)
            col_d.append(d0)
        if not may_move[r]:
            continue
        same_ok = bool(scope.intra_ok[b0]) and not bool(scope.must_leave_broker[d0])
        p = int(cluster.rep_part[r])
        siblings = set(
            cluster.rep_broker[cluster.part_start[p] : cluster.part_start[p + 1]].tolist()
        )
        for d in np.flatnonzero(recv).tolist():
            if d == d0:
                continue
            if d_b[d] == b0:
                if not same_ok:
                    continue
            elif not scope.cross_ok or (not onto_holders and int(d_b[d]) in siblings):
                # Kafka names replicas by broker: a replica "moving" onto a broker that holds
                # the partition already is a reorder of the list (a new preferred leader),
                # not a move, and the order is kept unless leader balance is asked for.
                continue
            col_r.append(r)
            col_d.append(d)
    n_x = len(col_r)
    xr = np.asarray(col_r, np.int64)
    xd = np.asarray(col_d, np.int64)
    xb = d_b[xd] if n_x else np.zeros(0, np.int64)
    covered = np.bincount(xr, minlength=n_r) > 0
    if (~covered & ~stuck).any():
        return ExactResult(status="infeasible", seconds=time.perf_counter() - t0)

    h = highspy.Highs()  # type: ignore[no-untyped-call]
    for name, value in (
        ("output_flag", False),
        ("threads", 1),
        ("random_seed", 0),
        ("time_limit", float(time_limit)),
        ("mip_max_nodes", int(node_limit)),
        ("mip_rel_gap", float(rel_gap)),
    ):
        h.setOptionValue(name, value)
    stays = xd == rep_dir0[xr]
    # Cost of x: bytes moved when the replica is not where it was.
    cost_x = np.where(stays, 0.0, size[xr])
    h.addVars(n_x, np.zeros(n_x), np.ones(n_x))
    h.changeColsIntegrality(n_x, np.arange(n_x, dtype=np.int32), np.ones(n_x, np.uint8))
    h.changeColsCost(n_x, np.arange(n_x, dtype=np.int32), cost_x)
    n_cols = n_x
    rows = _Rows()

    by_r: list[list[int]] = [[] for _ in range(n_r)]
    for j, r in enumerate(col_r):
        by_r[r].append(j)
    for r in range(n_r):
        if by_r[r]:
            rows.add(by_r[r], [1.0] * len(by_r[r]), 1.0, 1.0)

    # Partition rules.
    n_racks = hosting_racks(cluster, scope)
    limits = rack_limits(np.diff(cluster.part_start), n_racks)
    rack_of_b = cluster.broker_rack
    keep_rack = _rack_rule_partitions(cluster, scope, goals, limits)
    for p in range(cluster.n_partitions):
        lo, hi = int(cluster.part_start[p]), int(cluster.part_start[p + 1])
        cols = [j for r in range(lo, hi) for j in by_r[r]]
        fixed_b = [int(cluster.rep_broker[r]) for r in range(lo, hi) if stuck[r]]
        per_b: dict[int, list[int]] = {}
        per_rack: dict[int, list[int]] = {}
        for j in cols:
            per_b.setdefault(int(xb[j]), []).append(j)
            per_rack.setdefault(int(rack_of_b[xb[j]]), []).append(j)
        for b, js in per_b.items():
            cap = 1 - fixed_b.count(b)
            if len(js) > cap:
                rows.add(js, [1.0] * len(js), -inf, float(cap))
        if goals.rack_aware and keep_rack[p]:
            fixed_racks = [int(rack_of_b[b]) for b in fixed_b]
            for rk, js in per_rack.items():
                cap = int(limits[p]) - fixed_racks.count(rk)
                if len(js) > cap:
                    rows.add(js, [1.0] * len(js), -inf, float(cap))

    by_d: list[list[int]] = [[] for _ in range(n_d)]
    for j, d in enumerate(col_d):
        by_d[d].append(j)
    # Auxiliary continuous columns: the replica bytes ending on each hosting dir (L_d), so
    # that capacity and band rows name a few columns instead of every replica of a broker
    # (dense rows made the LP relaxation slow).
    aux_cost: list[float] = []
    aux_ub: list[float] = []

    def column(cost: float, ub: float = inf) -> int:
        nonlocal n_cols
        aux_cost.append(cost)
        aux_ub.append(ub)
        n_cols += 1
        return n_cols - 1

    load_col: dict[int, int] = {}
    for d in np.flatnonzero(host).tolist():
        c = column(0.0)
        load_col[d] = c
        js = by_d[d]
        rows.add([*js, c], [*(float(size[col_r[j]]) for j in js), -1.0], 0.0, 0.0)
        # Capacity (the dir's external bytes count against it too).
        if scope.balance_disks or load0[d] <= hard[d] or recv[d]:
            rows.add([c], [1.0], -inf, float(hard[d] - ext[d]))

    # Soft bands, elastic: slack columns priced far above any byte cost.
    moved_scale = float(size.sum()) + 1.0
    w_count = 2.0 * moved_scale
    w_bytes = 1000.0 * moved_scale
    slack_cols: list[int] = []

    def band(cols: list[int], vals: list[float], lo: float, hi: float, weight: float) -> None:
        if not elastic:
            rows.add(cols, vals, lo, hi)
            return
        s_up, s_dn = column(weight), column(weight)
        slack_cols.extend((s_up, s_dn))
        rows.add([*cols, s_up], [*vals, -1.0], -inf, hi)
        rows.add([*cols, s_dn], [*vals, 1.0], lo, inf)

    b_cap = np.bincount(d_b, weights=total * host, minlength=n_b)
    hb = b_cap > 0
    serving0 = ~stuck
    placed = float(size[serving0].sum() + ext[host].sum())
    mean = placed / float(b_cap.sum()) if b_cap.sum() else 0.0
    n_host = max(int(hb.sum()), 1)
    x_lead = cluster.rep_leader[xr]
    m_r = float(serving0.sum()) / n_host
    m_l = float((cluster.rep_leader & serving0).sum()) / n_host
    for b in np.flatnonzero(hb).tolist():
        dirs = np.flatnonzero(host & (d_b == b)).tolist()
        if scope.balance_brokers:
            e = float(ext[dirs].sum())
            lo = band_floor(goals.broker_balance, mean) * b_cap[b] - e
            hi = goals.broker_balance * mean * b_cap[b] - e
            band([load_col[d] for d in dirs], [1.0] * len(dirs), lo, hi, w_bytes)
        if scope.balance_counts:
            cols = [j for d in dirs for j in by_d[d]]
            band(cols, [1.0] * len(cols), *count_band(goals.replica_balance, m_r), w_count)
            lcols = [j for j in cols if x_lead[j]]
            band(lcols, [1.0] * len(lcols), *count_band(goals.leader_balance, m_l), w_count)
        if scope.balance_disks:
            act = [d for d in dirs if active[d]]
            a_cap = float(total[act].sum())
            e_act = float(ext[act].sum())
            for d in act:
                # (L_d + ext_d) / T_d within f x (Active load) / a_cap, multiplied out:
                # a_cap * (L_d + ext_d) - f * T_d * (sum of L + ext over Active dirs).
                for f, upper in (
                    (goals.disk_balance, True),
                    (band_floor(goals.disk_balance, 1.0), False),
                ):
                    cols_d = [load_col[dd] for dd in act]
                    vals_d = [(a_cap if dd == d else 0.0) - f * total[d] for dd in act]
                    const = a_cap * ext[d] - f * total[d] * e_act
                    if not elastic:
                        lo_d, hi_d = (-inf, -const) if upper else (-const, inf)
                        rows.add(cols_d, vals_d, lo_d, hi_d)
                        continue
                    s = column(w_bytes)
                    slack_cols.append(s)
                    if upper:
                        rows.add([*cols_d, s], [*vals_d, -1.0], -inf, -const)
                    else:
                        rows.add([*cols_d, s], [*vals_d, 1.0], -const, inf)
    n_s = n_cols - n_x
    if n_s:
        h.addVars(n_s, np.zeros(n_s), np.asarray(aux_ub, np.float64))
        h.changeColsCost(
            n_s, np.arange(n_x, n_cols, dtype=np.int32), np.asarray(aux_cost, np.float64)
        )
    rows.flush(h)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    seconds = time.perf_counter() - t0
    has_sol = info.primal_solution_status == 2  # kSolutionStatusFeasible
    if status == highspy.HighsModelStatus.kInfeasible:
        return ExactResult(status="infeasible", seconds=seconds, variables=n_cols)
    if status == highspy.HighsModelStatus.kTimeLimit:
        # Where a search stops on the clock depends on the machine's speed and load: such a
        # placement is not used, so the same snapshot gives the same plan.
        return ExactResult(status="timeLimit", seconds=seconds, variables=n_cols)
    if not has_sol:
        return ExactResult(status="unknown", seconds=seconds, variables=n_cols)
    values = np.asarray(h.getSolution().col_value)
    chosen = values[:n_x] > 0.5
    cur_d = rep_dir0.astype(np.int64).copy()
    cur_d[xr[chosen]] = xd[chosen]
    cur_b = d_b[cur_d].astype(np.int64)
    moved = cur_d != rep_dir0
    violation = float(values[n_x:] @ np.asarray(aux_cost)) if n_s else 0.0
    return ExactResult(
        status="optimal" if status == highspy.HighsModelStatus.kOptimal else "feasible",
        cur_broker=cur_b,
        cur_dir=cur_d,
        bytes_moved=float(cluster.rep_size[moved].sum()),
        violation=violation,
        seconds=seconds,
        variables=n_cols,
    )


def _rack_rule_partitions(
    cluster: Cluster, scope: Scope, goals: Goals, limits: np.ndarray
) -> np.ndarray:
    """Partitions the rack rule binds: all in modes that fix racks; otherwise those that
    keep it today (``report.hard_violations`` lets a partition already crowded stay so)."""
    n_p = cluster.n_partitions
    if scope.fix_racks or not goals.rack_aware:
        return np.ones(n_p, bool)
    n_rk = len(cluster.racks) + 1
    key = cluster.rep_part.astype(np.int64) * n_rk + cluster.broker_rack[cluster.rep_broker]
    uniq, counts = np.unique(key, return_counts=True)
    part = uniq // n_rk
    crowded = np.zeros(n_p, bool)
    crowded[part[counts > limits[part]]] = True
    return ~crowded
