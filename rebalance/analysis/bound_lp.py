"""The lower bound as a linear program: the same goals the plan must meet, relaxed to
aggregates per broker and per directory, solved by HiGHS.

Why: the closed-form bound (``report._balance_bounds``) knows only bytes. A plan must also
bring replica counts into their band, and a broker holding too many replicas sheds at least
its smallest ones: on clusters where counts and bytes pull apart (old brokers full of large
replicas, new ones empty, mixed replication) the byte-only bound sits far under any plan, and
``bytesOverLowerBound`` measured the bound instead of the plan. This program adds the count
goals and couples them to bytes, and it reads the directory band against the broker's final
Active mean exactly (linear in the final loads), instead of bounding each broker alone.

Aggregate on purpose: its size is a few columns per directory and per broker, and a few rows
per broker, never per replica, so a million replicas cost a sort and an LP of some ten
thousand columns (about a second).

Variables (bytes in units of the mean replica's size, so the solver sees numbers near 1):
  ``out_d``, ``in_d``   bytes leaving / arriving on hosting directory d (``in_d = 0`` where d
                        may not receive);
  ``kout_b``, ``kin_b`` serving replicas leaving broker b for another broker / newly serving
                        on b (from another broker or from b's own directories being emptied).
Rows, each kept by every plan that keeps the hard rules and meets every achievable band:
  - every byte moved lands on a hosting directory: ``sum in = sum out + forced``;
  - every replica that leaves a broker, or is evacuated, serves on some broker afterwards:
    ``sum kin = sum kout + evacuated``;
  - broker bytes, directory over its broker's final Active mean (both sides), capacity
    threshold, replica counts: each achievable band (``achievable`` leaves the others out);
  - a partition crowding a rack (a rule the plan must repair) sends its excess off that
    rack: per rack, bytes leaving at least the excess times the partition's smallest there;
  - each rack ends holding what the rack rule lets it hold: per rack, the net bytes and
    replicas arriving lie between what its partitions must and may keep there
    (``rack_totals_rows``; with replication equal to the racks, nothing changes racks);
  - the replicas that leave broker b weigh at least its ``kout_b`` smallest:
    ``sum_{d on b} out_d >= g_b(kout_b)``, and those arriving at least the cluster's
    ``kin_b`` smallest, ``h(kin_b)``. ``g`` and ``h`` are sums of sorted sizes, convex in
    the count, so their tangent lines at a few counts (each valid everywhere) relax them.
Objective: forced bytes plus ``sum out`` -- each moved replica leaves exactly one directory.

Relaxed (dropped, so the bound stays valid): the rack rule beyond those per-rack totals and
that repair, leader counts (leadership moves by
preferred-leader changes at no bytes), which broker a replica may go to, and integrality
(restored where the LP moves only a few replicas' worth: ``whole_replicas``).
The result is the LP's optimum less a millionth of the placed bytes (the solver's tolerance,
kept on the safe side); None when HiGHS does not prove an optimum (e.g. the bands are
jointly out of reach), and the caller keeps the closed-form bound.
"""

from __future__ import annotations

import highspy
import numpy as np
from spindle.rebalance.goals import BROKER_BYTES, DISK_BYTES, REPLICAS, ReplicaCount
from spindle.rebalance.goals.bands import band_floor
from spindle.rebalance.goals.broker_bytes import StartLoads
from spindle.rebalance.goals.rack import hosting_racks, rack_limits
from spindle.rebalance.highs import Rows, quiet_highs
from spindle.rebalance.input.model import ACTIVE, Cluster, Goals
from spindle.rebalance.input.scope import Scope

#: Band edges widened by this fraction: the goals' own checks allow ~1e-9, and a valid
#: bound must not be tighter than what they accept.
_WIDEN = 1e-7
#: Tangent counts per broker (each a row): the count the band forces and a few beyond.
_STEPS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: The whole-replica strengthening's budget (``whole_replicas``); at its limit HiGHS's
#: proven dual bound is used, which is still valid.
_MIP_SECONDS = 5.0
#: ... and it runs only when the LP moves fewer mean replicas than this.
_WHOLE_UNITS = 64.0


def _tangents(
    sizes: np.ndarray, counts: list[int], csum: np.ndarray | None = None
) -> list[tuple[float, float]]:
    """Lines ``a + s * k`` under the sum of the ``k`` smallest of ``sizes`` (sorted
    ascending), touching it at each of ``counts``: at k the slope is the (k+1)-th smallest
    size, which no later size undercuts and no earlier one exceeds. ``csum``: the sizes'
    running sums with a leading 0, when the caller reuses them."""
    if csum is None:
        csum = np.concatenate(([0.0], np.cumsum(sizes)))
    out = []
    for k in sorted(set(counts)):
        if 0 <= k < len(sizes):
            s = float(sizes[k])
            out.append((float(csum[k]) - s * k, s))
    return out


class _Program:
    """The program's columns and rows for one cluster (full mode)."""

    def __init__(
        self, cluster: Cluster, scope: Scope, goals: Goals, impossible: dict[str, dict[int, str]]
    ) -> None:
        self.c, self.scope, self.goals = cluster, scope, goals
        st = StartLoads.of(cluster, scope, goals)
        self.st = st
        n_rep = int((~st.stuck).sum())
        self.unit = max(float(cluster.rep_size[~st.stuck].mean()) if n_rep else 1.0, 1.0)
        host = scope.hosting
        self.dirs = np.flatnonzero(host)
        self.col_of = np.full(cluster.n_dirs, -1, np.int64)
        self.col_of[self.dirs] = np.arange(len(self.dirs))
        n_h = len(self.dirs)
        # Columns: out_d (n_h), in_d (n_h), kout_b (n_b), kin_b (n_b).
        self.n_b = n_b = cluster.n_brokers
        self.o_in, self.o_kout, self.o_kin = n_h, 2 * n_h, 2 * n_h + n_b
        self.n_cols = 2 * n_h + 2 * n_b
        self.rows = Rows()
        self.loose_b = np.zeros(n_b, bool)
        self.loose_b[list(impossible.get(BROKER_BYTES, {}))] = True
        self.loose_c = np.zeros(n_b, bool)
        self.loose_c[list(impossible.get(REPLICAS, {}))] = True
        self.loose_d = np.zeros(cluster.n_dirs, bool)
        self.loose_d[list(impossible.get(DISK_BYTES, {}))] = True
        serving = host[cluster.rep_dir]
        self.counts = np.bincount(cluster.rep_broker[serving], minlength=n_b)
        self.evac = scope.evacuate[cluster.rep_dir]
        self.dirs_of: list[list[int]] = [[] for _ in range(n_b)]
        for d in self.dirs.tolist():
            self.dirs_of[int(cluster.dir_broker[d])].append(d)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Column bounds: a directory sheds at most its replicas' bytes and receives only
        where the scope lets it; a broker sheds at most the replicas serving on it."""
        c, u = self.c, self.unit
        n_h = len(self.dirs)
        lo = np.zeros(self.n_cols)
        hi = np.full(self.n_cols, highspy.kHighsInf)
        hi[:n_h] = self.st.rep_bytes[self.dirs] / u
        hi[self.o_in : self.o_in + n_h] = np.where(
            self.scope.receivable[self.dirs], highspy.kHighsInf, 0.0
        )
        recv_b = np.zeros(self.n_b, bool)
        recv_b[c.dir_broker[self.scope.receivable]] = True
        hi[self.o_kout : self.o_kout + self.n_b] = self.counts
        hi[self.o_kin : self.o_kin + self.n_b] = np.where(recv_b, highspy.kHighsInf, 0.0)
        return lo, hi

    def net(self, dirs: list[int]) -> tuple[list[int], list[float]]:
        """Columns and signs of the net bytes arriving on ``dirs`` (in - out)."""
        cols = [int(self.col_of[d]) for d in dirs]
        return [self.o_in + j for j in cols] + cols, [1.0] * len(cols) + [-1.0] * len(cols)

    def conservation(self) -> None:
        u, n_h = self.unit, len(self.dirs)
        forced = float(self.st.rep_bytes[self.scope.evacuate].sum()) / u
        cols = list(range(2 * n_h))
        self.rows.add(cols, [-1.0] * n_h + [1.0] * n_h, forced, forced)
        n_b, evac = self.n_b, float(self.evac.sum())
        kc = list(range(self.o_kout, self.o_kout + 2 * n_b))
        self.rows.add(kc, [-1.0] * n_b + [1.0] * n_b, evac, evac)

    def broker_rows(self) -> None:
        """Broker bytes and replica counts in their bands (where achievable)."""
        st, u, w = self.st, self.unit, _WIDEN
        c_lo, c_hi = ReplicaCount(self.goals).band(
            float((~st.stuck).sum()) / max(int(st.hb.sum()), 1)
        )
        for b in np.flatnonzero(st.hb).tolist():
            dirs = self.dirs_of[b]
            if not dirs:
                continue
            if not self.loose_b[b]:
                cols, vals = self.net(dirs)
                lo = (st.lo_b[b] * (1 - w) - st.b_load[b]) / u
                hi = (st.hi_b[b] * (1 + w) - st.b_load[b]) / u
                self.rows.add(cols, vals, lo, hi)
            if not self.loose_c[b]:
                kc = [self.o_kin + b, self.o_kout + b]
                self.rows.add(kc, [1.0, -1.0], c_lo - self.counts[b], c_hi - self.counts[b])

    def dir_rows(self) -> None:
        """Capacity threshold on every hosting directory; each achievable Active directory
        within the band around its broker's final Active mean (rows divided by the
        broker's Active capacity)."""
        c, st, u, w = self.c, self.st, self.unit, _WIDEN
        hard = self.goals.capacity_threshold * st.total
        db = self.goals.disk_balance
        active = self.scope.hosting & (c.dir_state == ACTIVE)
        inf = highspy.kHighsInf
        for d in self.dirs.tolist():
            cols, vals = self.net([d])
            self.rows.add(cols, vals, -inf, (hard[d] * (1 + w) - st.load[d]) / u)
        for b in range(self.n_b):
            act = [d for d in self.dirs_of[b] if active[d]]
            a_cap = float(st.total[act].sum())
            if not act or a_cap <= 0:
                continue
            a_load = float(st.load[act].sum())
            cols, _ = self.net(act)
            for d in act:
                if self.loose_d[d]:
                    continue
                share = float(st.total[d]) / a_cap
                for f, upper in ((db * (1 + w), True), (band_floor(db, 1.0) * (1 - w), False)):
                    coef = [(1.0 if e == d else 0.0) - f * share for e in act]
                    const = (float(st.load[d]) - f * share * a_load) / u
                    vals = coef + [-x for x in coef]
                    if upper:
                        self.rows.add(cols, vals, -inf, -const)
                    else:
                        self.rows.add(cols, vals, -const, inf)

    def count_bytes_rows(self) -> None:
        """Replicas leaving a broker weigh at least its smallest; replicas arriving at least
        the cluster's smallest (tangent lines at the counts the band forces and beyond)."""
        c, st, u = self.c, self.st, self.unit
        serving = self.scope.hosting[c.rep_dir]
        mean = float((~st.stuck).sum()) / max(int(st.hb.sum()), 1)
        c_lo, c_hi = ReplicaCount(self.goals).band(mean)
        order = np.lexsort((c.rep_size, c.rep_broker))
        order = order[serving[order]]
        brokers = c.rep_broker[order]
        starts = np.searchsorted(brokers, np.arange(self.n_b + 1))
        sizes_all = np.sort(c.rep_size[~st.stuck]).astype(np.float64) / u
        csum_all = np.concatenate(([0.0], np.cumsum(sizes_all)))
        inf = highspy.kHighsInf
        quart = [int(q * len(sizes_all)) for q in (0.01, 0.05, 0.1, 0.25, 0.5)]
        for b in np.flatnonzero(st.hb).tolist():
            dirs = self.dirs_of[b]
            if not dirs:
                continue
            cols = [int(self.col_of[d]) for d in dirs]
            mine = c.rep_size[order[starts[b] : starts[b + 1]]].astype(np.float64) / u
            need = max(0, int(self.counts[b]) - c_hi)
            for a, s in _tangents(mine, [need + k for k in _STEPS]):
                self.rows.add([*cols, self.o_kout + b], [1.0] * len(cols) + [-s], a, inf)
            need_in = max(0, c_lo - int(self.counts[b]))
            at = [need_in + k for k in _STEPS] + quart
            for a, s in _tangents(sizes_all, at, csum_all):
                self.rows.add(
                    [self.o_in + j for j in cols] + [self.o_kin + b],
                    [1.0] * len(cols) + [-s],
                    a,
                    inf,
                )

    def rack_rows(self) -> None:
        """A partition crowding a rack sends its excess replicas off that rack: per rack, the
        bytes leaving its hosting directories are at least, per crowded partition, its excess
        times the smallest of its replicas there (replicas being evacuated anyway are
        already in the forced bytes, so only hosting ones count)."""
        c, scope = self.c, self.scope
        if not self.goals.rack_aware or not scope.fix_racks:
            return
        host = scope.hosting[c.rep_dir]
        limits = rack_limits(np.diff(c.part_start), hosting_racks(c, scope))
        n_rk = len(c.racks) + 1
        rack = c.broker_rack[c.rep_broker].astype(np.int64)
        key = (c.rep_part.astype(np.int64) * n_rk + rack)[host]
        uniq, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
        smallest = np.full(len(uniq), np.inf)
        np.minimum.at(smallest, inv, c.rep_size[host].astype(np.float64))
        excess = counts - limits[uniq // n_rk]
        bad = excess > 0
        if not bad.any():
            return
        per_rack = np.bincount(
            uniq[bad] % n_rk, weights=excess[bad] * smallest[bad], minlength=n_rk
        )
        inf = highspy.kHighsInf
        d_rack = c.broker_rack[c.dir_broker[self.dirs]]
        for r in np.flatnonzero(per_rack > 0).tolist():
            cols = np.flatnonzero(d_rack == r).tolist()
            self.rows.add(
                cols, [1.0] * len(cols), float(per_rack[r]) / self.unit * (1 - _WIDEN), inf
            )

    def rack_totals_rows(self) -> None:
        """What each rack holds at the end is fixed, within limits, by the rack rule alone:
        per rack, the net bytes and the net replicas arriving on it lie between what its
        partitions must and may keep there.

        Why: without these rows the program moves bytes between racks freely, and with
        replication equal to the racks (every partition on every rack once) no plan can: a
        broker above its band then sheds to a rack-mate, which must in turn give to its own
        rack-mates, and the bound counted a cross-rack move that served both ends at once
        (uniform, 10K replicas, seed 4: 2.2 GB against 2.9 GB for the cheapest plan by hand).

        Proof sketch (a valid relaxation). A plan keeping the rack rule ends with at most
        ``m_p`` (the partition's limit, ``rack_limits``) replicas of partition p on each rack.
        Replicas stuck on a directory that is neither hosting nor emptied stay put and take
        ``s_pr`` of rack r's places; the others (``M_p`` of them) end on hosting directories,
        so on hosting racks, at most ``cap_pr = max(0, m_p - s_pr)`` on rack r. Hence
        between ``need_pr = max(0, M_p - sum_{r' != r} cap_pr')`` and ``can_pr = min(M_p,
        cap_pr)`` of them end on rack r, and their bytes between ``need_pr`` times the
        smallest and ``can_pr`` times the largest of p's movable replicas. Summed over
        partitions this bounds the movable replicas' count and bytes on rack r at the end,
        which is what is there now (hosting directories hold no stuck or emptied replica)
        plus ``sum in - out`` over its hosting directories (bytes) and ``sum kin - kout``
        over its brokers (count). Every plan the summary calls feasible keeps the rule
        (full mode repairs every partition or refuses the plan), so every such plan
        satisfies both rows; the bound, a minimum over a superset of plans, stays below."""
        c, scope, st = self.c, self.scope, self.st
        if not self.goals.rack_aware or not scope.fix_racks:
            return
        n_k = hosting_racks(c, scope)
        n_rk = len(c.racks)
        host_rack = np.zeros(n_rk, bool)
        host_rack[c.broker_rack[c.dir_broker[scope.hosting]]] = True
        if n_k <= 1 or c.n_partitions == 0:
            return
        rf = np.diff(c.part_start)
        m = rack_limits(rf, n_k)
        part, rack = c.rep_part, c.broker_rack[c.rep_broker].astype(np.int64)
        stuck = st.stuck
        n_p = c.n_partitions
        mov = np.bincount(part[~stuck], minlength=n_p)
        racks = np.flatnonzero(host_rack).tolist()
        cap = {}
        for r in racks:
            s_pr = np.bincount(part[stuck & (rack == r)], minlength=n_p)
            cap[r] = np.maximum(0, m - s_pr)
        cap_sum = sum(cap.values())
        size = c.rep_size.astype(np.float64)
        live = rf > 0
        starts = c.part_start[:-1][live]
        small = np.zeros(n_p)
        large = np.zeros(n_p)
        small[live] = np.minimum.reduceat(np.where(stuck, np.inf, size), starts)
        large[live] = np.maximum.reduceat(np.where(stuck, -np.inf, size), starts)
        small[mov == 0] = 0.0
        large[mov == 0] = 0.0
        serving = scope.hosting[c.rep_dir]
        now_b = np.bincount(rack[serving], weights=size[serving], minlength=n_rk)
        now_k = np.bincount(rack[serving], minlength=n_rk)
        u, inf = self.unit, highspy.kHighsInf
        slack = _WIDEN * st.placed / u
        d_rack = c.broker_rack[c.dir_broker[self.dirs]]
        for r in racks:
            need = np.maximum(0, mov - (cap_sum - cap[r]))
            can = np.minimum(mov, cap[r])
            lo_b = float((need * small).sum())
            hi_b = float((can * large).sum())
            cols, vals = self.net(self.dirs[d_rack == r].tolist())
            lo = (lo_b - float(now_b[r])) / u - slack
            hi = (hi_b - float(now_b[r])) / u + slack
            self.rows.add(cols, vals, lo if np.isfinite(lo) else -inf, hi)
            on_r = np.flatnonzero(c.broker_rack == r).tolist()
            kc = [self.o_kin + b for b in on_r] + [self.o_kout + b for b in on_r]
            self.rows.add(
                kc,
                [1.0] * len(on_r) + [-1.0] * len(on_r),
                float(need.sum()) - float(now_k[r]),
                float(can.sum()) - float(now_k[r]),
            )

    def solve(self) -> float | None:
        h = quiet_highs({"threads": 1, "time_limit": 30.0})
        lo, hi = self.bounds()
        n = self.n_cols
        h.addVars(n, lo, hi)
        n_h = len(self.dirs)
        h.changeColsCost(n_h, np.arange(n_h, dtype=np.int32), np.ones(n_h))
        self.rows.add_to(h)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        value = float(h.getInfo().objective_function_value)
        value = max(value, self.whole_replicas(h))
        return value * self.unit + float(self.st.rep_bytes[self.scope.evacuate].sum())

    def whole_replicas(self, h: highspy.Highs) -> float:
        """The LP's optimum (in units) strengthened by moving whole replicas only.

        Why: bytes move in whole replicas. A directory 0.6 GB under its band, on a broker
        whose other directories hold nothing smaller than 0.9 GB, receives 0.9 GB in every
        plan (or more than 0.6 GB from another broker, since that raises its broker's mean
        and with it the band), but the relaxation moves 0.6 GB, and on a cluster that needs
        one or two moves that gap alone read as a plan 1.7x over its bound (uniform, 8,222
        replicas, seed 7: one 911 MB move, bound 573 MB). So each hosting directory gets
        the disjunction "sheds nothing, or at least its smallest replica" (a binary ``z``
        with ``s * z <= out <= M * z``), likewise arrivals with the cluster's smallest
        movable replica, and the replica counts per broker become integers. Every plan
        keeps these, so the program's optimum -- or, should HiGHS stop at its limit, its
        proven dual bound -- is still a lower bound, never below the LP's.

        Only when the LP moves fewer than ``_WHOLE_UNITS`` mean replicas: beyond that one
        replica's rounding is a few per cent of the bound, and the binaries would only
        cost time on large clusters."""
        lp = float(h.getInfo().objective_function_value)
        c, st, u = self.c, self.st, self.unit
        n_h = len(self.dirs)
        movable = c.rep_size[~st.stuck]
        if n_h == 0 or movable.size == 0 or lp <= 1e-9 or lp > _WHOLE_UNITS:
            return lp
        small_out = np.full(c.n_dirs, np.inf)
        np.minimum.at(small_out, c.rep_dir, c.rep_size.astype(np.float64))
        s_in = float(movable.min()) / u
        hard = self.goals.capacity_threshold * st.total / u
        _, col_hi = self.bounds()
        cols: list[int] = []
        least: list[float] = []
        most: list[float] = []
        for j, d in enumerate(self.dirs.tolist()):
            if col_hi[j] > 0 and np.isfinite(small_out[d]):
                cols.append(j)
                least.append(float(small_out[d]) / u)
                most.append(float(col_hi[j]))
            if col_hi[self.o_in + j] > 0:
                cols.append(self.o_in + j)
                least.append(s_in)
                # No directory ends above its capacity threshold, so none receives more
                # than that plus what it sheds (at most its replicas).
                most.append(float(hard[d]) * (1 + _WIDEN) + float(col_hi[j]) + 1.0)
        n_z = len(cols)
        first = self.n_cols
        h.addVars(n_z, np.zeros(n_z), np.ones(n_z))
        rows = Rows()
        inf = highspy.kHighsInf
        for k, (col, lo_s, hi_m) in enumerate(zip(cols, least, most, strict=True)):
            rows.add([col, first + k], [1.0, -lo_s], 0.0, inf)
            rows.add([col, first + k], [1.0, -hi_m], -inf, 0.0)
        rows.add_to(h)
        ints = np.concatenate(
            (np.arange(self.o_kout, self.n_cols), np.arange(first, first + n_z))
        ).astype(np.int32)
        h.changeColsIntegrality(len(ints), ints, np.ones(len(ints), np.uint8))
        h.setOptionValue("time_limit", _MIP_SECONDS)
        h.setOptionValue("mip_rel_gap", 1e-6)
        h.run()
        info = h.getInfo()
        if h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
            return max(lp, float(info.objective_function_value))
        dual = float(info.mip_dual_bound)
        return max(lp, dual) if np.isfinite(dual) else lp


def lp_bound(
    cluster: Cluster, scope: Scope, goals: Goals, impossible: dict[str, dict[int, str]]
) -> float | None:
    """Bytes every full-mode plan meeting every achievable band must move, at least (see the
    module docstring); None when the program has no proven optimum."""
    if not scope.balance_counts or cluster.n_replicas == 0:
        return None
    prog = _Program(cluster, scope, goals, impossible)
    prog.conservation()
    prog.broker_rows()
    prog.dir_rows()
    prog.count_bytes_rows()
    prog.rack_rows()
    prog.rack_totals_rows()
    found = prog.solve()
    if found is None:
        return None
    return max(0.0, found - 1e-6 * prog.st.placed)
