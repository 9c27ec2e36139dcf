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
from collections.abc import Callable
from dataclasses import dataclass

import highspy
import numpy as np
from spindle.rebalance.goals import Goal, all_goals
from spindle.rebalance.goals.rack import hosting_racks, rack_limits, rack_share
from spindle.rebalance.highs import Rows, quiet_highs
from spindle.rebalance.input.model import ACTIVE, Cluster, Goals
from spindle.rebalance.input.scope import Scope

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


#: ``keep(goal, b)``: whether a goal's rows for broker b go into the model.
Keep = Callable[[Goal, int], bool]


@dataclass(frozen=True, kw_only=True)
class Near:
    """A neighbourhood of a placement the model is restricted to (``repair``): every replica
    ends where ``planned_dir`` puts it, except that a replica whose snapshot or planned
    broker is one of ``brokers`` may end anywhere the mode allows (its snapshot place
    included), and any replica may end on one of ``brokers`` instead."""

    planned_dir: np.ndarray
    #: Per broker: whether it is in the neighbourhood.
    brokers: np.ndarray


class Model:
    """The mixed-integer program of one solve, as it is built: the placement binaries
    ``x[r, d]`` (one per place replica r may end on), the auxiliary columns (each hosting
    dir's replica bytes ``L_d``, the soft bands' slacks) and the rows. The goals add their
    own rows (``goals.base.Goal.exact_rows``) through ``band``, ``one_sided`` and ``rows``.

    Byte figures are in units of the largest disk: byte products would pass HiGHS's 1e20
    "infinity"."""

    def __init__(
        self,
        cluster: Cluster,
        scope: Scope,
        goals: Goals,
        *,
        elastic: bool,
        onto_holders: bool,
        near: Near | None = None,
        excused_dirs: frozenset[int] = frozenset(),
    ) -> None:
        self.cluster, self.scope, self.goals, self.elastic = cluster, scope, goals, elastic
        self.near = near
        #: Directories whose disk band the goals leave out of the model (out of reach).
        self.excused_dirs = excused_dirs
        self.inf = highspy.kHighsInf
        unit = float(max(int(cluster.dir_total.max(initial=1)), 1))
        self.size = cluster.rep_size.astype(np.float64) / unit
        self.total = cluster.dir_total.astype(np.float64) / unit
        self.hard = goals.capacity_threshold * self.total
        host = scope.hosting
        self.ext = np.where(host, cluster.dir_external(), 0).astype(np.float64) / unit
        self.active = host & (cluster.dir_state == ACTIVE)
        n_d = cluster.n_dirs
        self.load0 = np.bincount(cluster.rep_dir, weights=self.size, minlength=n_d) + self.ext
        # A directory above the threshold that no mode rule fixes may not receive.
        self.recv = scope.receivable & (scope.balance_disks | (self.load0 <= self.hard))
        self.rows = Rows()
        self.aux_cost: list[float] = []
        self.aux_ub: list[float] = []
        self._place_columns(onto_holders)
        self.n_cols = self.n_x
        self.load_col: dict[int, int] = {}
        limits = rack_limits(np.diff(cluster.part_start), hosting_racks(cluster, scope))
        self.limits = limits
        self.keep_rack = _rack_rule_partitions(cluster, scope, goals, limits)
        # Soft bands' slacks are priced far above any byte cost.
        moved_scale = float(self.size.sum()) + 1.0
        self.w_count = 2.0 * moved_scale
        self.w_bytes = 1000.0 * moved_scale
        self.b_cap = np.bincount(
            cluster.dir_broker, weights=self.total * host, minlength=cluster.n_brokers
        )
        serving0 = ~self.stuck
        placed = float(self.size[serving0].sum() + self.ext[host].sum())
        self.mean = placed / float(self.b_cap.sum()) if self.b_cap.sum() else 0.0
        #: Per broker: the mean its rack can reach over ``mean`` (``rack.rack_share``).
        self.rack_share = rack_share(cluster, scope, goals)
        n_host = max(int((self.b_cap > 0).sum()), 1)
        self.mean_replicas = float(serving0.sum()) / n_host
        self.mean_leaders = float((cluster.rep_leader & serving0).sum()) / n_host

    def _place_columns(self, onto_holders: bool) -> None:
        """The x[r, d] binaries: where each replica is (unless that dir must be emptied) and,
        if the mode lets it move, every receivable dir the mode allows (see the module
        docstring); replicas that stay put off the model (Offline) are ``stuck``."""
        c, scope = self.cluster, self.scope
        rep_dir0, d_b = c.rep_dir, c.dir_broker
        balances = scope.balance_brokers or scope.balance_disks or scope.balance_counts
        may_move = scope.evacuate[rep_dir0] | (balances or scope.fix_racks)
        recv = np.flatnonzero(self.recv).tolist()
        col_r: list[int] = []
        col_d: list[int] = []
        self.stuck = np.zeros(c.n_replicas, bool)
        near = self.near
        planned = rep_dir0 if near is None else near.planned_dir
        inside = np.ones(c.n_brokers, bool) if near is None else near.brokers
        free = inside[c.rep_broker] | inside[d_b[planned]]
        for r in range(c.n_replicas):
            d0 = int(rep_dir0[r])
            if not scope.hosting[d0] and not scope.evacuate[d0]:
                self.stuck[r] = True
                continue
            if not scope.evacuate[d0] and (free[r] or planned[r] == d0):
                col_r.append(r)
                col_d.append(d0)
            if may_move[r]:
                for d in self._destinations(r, recv, onto_holders=onto_holders):
                    if free[r] or d == planned[r] or inside[d_b[d]]:
                        col_r.append(r)
                        col_d.append(d)
        self.col_r, self.col_d = col_r, col_d
        self.n_x = len(col_r)
        self.xr = np.asarray(col_r, np.int64)
        self.xd = np.asarray(col_d, np.int64)
        self.xb = d_b[self.xd] if self.n_x else np.zeros(0, np.int64)
        self.x_lead = c.rep_leader[self.xr]
        covered = np.bincount(self.xr, minlength=c.n_replicas) > 0
        self.uncovered = bool((~covered & ~self.stuck).any())
        self.by_r: list[list[int]] = [[] for _ in range(c.n_replicas)]
        for j, r in enumerate(col_r):
            self.by_r[r].append(j)
        self.by_d: list[list[int]] = [[] for _ in range(c.n_dirs)]
        for j, d in enumerate(col_d):
            self.by_d[d].append(j)

    def _destinations(self, r: int, recv: list[int], *, onto_holders: bool) -> list[int]:
        """The receivable dirs replica r may move to in this mode, in index order."""
        c, scope, d_b = self.cluster, self.scope, self.cluster.dir_broker
        d0 = int(c.rep_dir[r])
        b0 = int(d_b[d0])
        same_ok = bool(scope.intra_ok[b0]) and not bool(scope.must_leave_broker[d0])
        p = int(c.rep_part[r])
        siblings = set(c.rep_broker[c.part_start[p] : c.part_start[p + 1]].tolist())
        out: list[int] = []
        for d in recv:
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
            out.append(d)
        return out

    # ------------------------------------------------------------ what goals build with

    def column(self, cost: float, ub: float | None = None) -> int:
        """A new continuous auxiliary column (cost per unit, upper bound; default none)."""
        self.aux_cost.append(cost)
        self.aux_ub.append(self.inf if ub is None else ub)
        self.n_cols += 1
        return self.n_cols - 1

    def band(self, cols: list[int], vals: list[float], lo: float, hi: float, weight: float) -> None:
        """``lo <= sum(vals * cols) <= hi``; elastic: a slack per side priced ``weight``."""
        if not self.elastic:
            self.rows.add_merged(cols, vals, lo, hi)
            return
        s_up, s_dn = self.column(weight), self.column(weight)
        self.rows.add_merged([*cols, s_up], [*vals, -1.0], -self.inf, hi)
        self.rows.add_merged([*cols, s_dn], [*vals, 1.0], lo, self.inf)

    def one_sided(self, cols: list[int], vals: list[float], bound: float, *, upper: bool) -> None:
        """``sum(vals * cols) <= bound`` (``upper``) or ``>= bound``; elastic: one slack
        priced as a byte band's."""
        inf = self.inf
        if not self.elastic:
            lo, hi = (-inf, bound) if upper else (bound, inf)
            self.rows.add_merged(cols, vals, lo, hi)
            return
        s = self.column(self.w_bytes)
        if upper:
            self.rows.add_merged([*cols, s], [*vals, -1.0], -inf, bound)
        else:
            self.rows.add_merged([*cols, s], [*vals, 1.0], bound, inf)

    def dirs_of(self, b: int) -> list[int]:
        """Broker b's hosting directories."""
        return np.flatnonzero(self.scope.hosting & (self.cluster.dir_broker == b)).tolist()

    def partition(self, p: int) -> tuple[list[int], list[int]]:
        """Partition p's x columns, and the brokers of its replicas that stay off the model."""
        c = self.cluster
        lo, hi = int(c.part_start[p]), int(c.part_start[p + 1])
        cols = [j for r in range(lo, hi) for j in self.by_r[r]]
        fixed_b = [int(c.rep_broker[r]) for r in range(lo, hi) if self.stuck[r]]
        return cols, fixed_b

    # ------------------------------------------------------------ the model's own rows

    def add_placement(self, h: highspy.Highs) -> None:
        """The x binaries, each costing the bytes moved when its replica is not where it
        was, and one row per replica: it ends on exactly one directory."""
        n_x, xr = self.n_x, self.xr
        stays = self.xd == self.cluster.rep_dir[xr]
        cost_x = np.where(stays, 0.0, self.size[xr])
        h.addVars(n_x, np.zeros(n_x), np.ones(n_x))
        h.changeColsIntegrality(n_x, np.arange(n_x, dtype=np.int32), np.ones(n_x, np.uint8))
        h.changeColsCost(n_x, np.arange(n_x, dtype=np.int32), cost_x)
        for js in self.by_r:
            if js:
                self.rows.add_merged(js, [1.0] * len(js), 1.0, 1.0)

    def add_partition_rules(self, goals: list[Goal]) -> None:
        """One replica per broker per partition, then the partition goals' rows (the rack
        goal's), partition by partition (HiGHS's search path depends on row order: it is
        kept)."""
        for p in range(self.cluster.n_partitions):
            cols, fixed_b = self.partition(p)
            per_b: dict[int, list[int]] = {}
            for j in cols:
                per_b.setdefault(int(self.xb[j]), []).append(j)
            for b, js in per_b.items():
                cap = 1 - fixed_b.count(b)
                if len(js) > cap:
                    self.rows.add_merged(js, [1.0] * len(js), -self.inf, float(cap))
            for goal in goals:
                goal.exact_rows(self, p)

    def add_loads(self, goals: list[Goal]) -> None:
        """Auxiliary columns L_d, the replica bytes ending on each hosting dir, so that
        capacity and band rows name a few columns instead of every replica of a broker
        (dense rows made the LP relaxation slow); after each, the directory goals' rows
        (the capacity goal's)."""
        for d in np.flatnonzero(self.scope.hosting).tolist():
            c = self.column(0.0)
            self.load_col[d] = c
            js = self.by_d[d]
            self.rows.add_merged(
                [*js, c], [*(float(self.size[self.col_r[j]]) for j in js), -1.0], 0.0, 0.0
            )
            for goal in goals:
                goal.exact_rows(self, d)

    def add_bands(self, goals: list[Goal], keep: Keep | None = None) -> None:
        """The broker goals' rows (the soft goals'), broker by broker, in the order ``goals``
        gives; ``keep(goal, b)``: whether goal's rows for broker b go in (default all)."""
        for b in np.flatnonzero(self.b_cap > 0).tolist():
            for goal in goals:
                if keep is None or keep(goal, b):
                    goal.exact_rows(self, b)

    def flush(self, h: highspy.Highs) -> None:
        """Hand the auxiliary columns and every row gathered to HiGHS."""
        n_s = self.n_cols - self.n_x
        if n_s:
            h.addVars(n_s, np.zeros(n_s), np.asarray(self.aux_ub, np.float64))
            h.changeColsCost(
                n_s,
                np.arange(self.n_x, self.n_cols, dtype=np.int32),
                np.asarray(self.aux_cost, np.float64),
            )
        self.rows.add_to(h)


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
    model = Model(cluster, scope, goals, elastic=elastic, onto_holders=onto_holders)
    if model.uncovered:
        return ExactResult(status="infeasible", seconds=time.perf_counter() - t0)
    h = mip_solver(time_limit=time_limit, node_limit=node_limit, rel_gap=rel_gap)
    build(h, model, goals)
    h.run()
    return read_result(h, model, time.perf_counter() - t0)


def build(h: highspy.Highs, model: Model, settings: Goals, keep: Keep | None = None) -> None:
    """The whole program into ``h``: the placement binaries and their rows, then every
    goal's rows (``goals.GOALS``) where its ``exact_unit`` says, per broker in the goals'
    ``exact_rank`` order. The one builder of the exact planner (``solve``) and the repair
    (``repair.solve_near``, whose ``keep`` leaves out the bands out of reach)."""
    every = sorted(all_goals(settings), key=lambda g: g.exact_rank)
    model.add_placement(h)
    model.add_partition_rules([g for g in every if g.exact_unit == "partition"])
    model.add_loads([g for g in every if g.exact_unit == "dir"])
    model.add_bands([g for g in every if g.exact_unit == "broker"], keep)
    model.flush(h)


def mip_solver(*, time_limit: float, node_limit: int, rel_gap: float) -> highspy.Highs:
    """A quiet, deterministic solver: one thread, a fixed seed, a node limit."""
    return quiet_highs(
        {
            "threads": 1,
            "random_seed": 0,
            "time_limit": float(time_limit),
            "mip_max_nodes": int(node_limit),
            "mip_rel_gap": float(rel_gap),
        }
    )


def read_result(h: highspy.Highs, model: Model, seconds: float) -> ExactResult:
    """The solve's outcome as an ``ExactResult`` (see its statuses)."""
    status = h.getModelStatus()
    info = h.getInfo()
    has_sol = info.primal_solution_status == 2  # kSolutionStatusFeasible
    n_cols = model.n_cols
    if status == highspy.HighsModelStatus.kInfeasible:
        return ExactResult(status="infeasible", seconds=seconds, variables=n_cols)
    if status == highspy.HighsModelStatus.kTimeLimit:
        # Where a search stops on the clock depends on the machine's speed and load: such a
        # placement is not used, so the same snapshot gives the same plan.
        return ExactResult(status="timeLimit", seconds=seconds, variables=n_cols)
    if not has_sol:
        return ExactResult(status="unknown", seconds=seconds, variables=n_cols)
    cluster, n_x = model.cluster, model.n_x
    values = np.asarray(h.getSolution().col_value)
    chosen = values[:n_x] > 0.5
    rep_dir0 = cluster.rep_dir
    cur_d = rep_dir0.astype(np.int64).copy()
    cur_d[model.xr[chosen]] = model.xd[chosen]
    cur_b = cluster.dir_broker[cur_d].astype(np.int64)
    moved = cur_d != rep_dir0
    n_s = n_cols - n_x
    violation = float(values[n_x:] @ np.asarray(model.aux_cost)) if n_s else 0.0
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
