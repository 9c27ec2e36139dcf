"""Which soft-goal bands a plan can reach at all, given the hard rules: the figures and the
checks each goal's ``out_of_reach`` (and a hard goal's ``excuses``) calls.

Why: "all soft goals met where they can be" needs "can be" made explicit, or every out-of-band
figure looks like a planner defect. The limits modelled here come from the hard rules and from
Kafka, not from the greedy:

  - a broker with an Offline directory receives no replicas and moves nothing between its own
    disks (Kafka answers AlterReplicaLogDirs there with KAFKA_STORAGE_ERROR); the mode's scope
    says the same for removed brokers (``scope.receivable``, ``scope.intra_ok``);
  - such a broker can only lose bytes, replicas and leaders (by sending replicas to other
    brokers, when the mode allows cross-broker moves at all);
  - its directories' band is relative to its own Active mean, which falls as it sheds: the
    mean it reaches by shedding every directory down to the band's top and no further is the
    fixed point ``u* = sum_d min(L_d, f * u* * T_d) / sum_d T_d``. Where no byte band binds
    the broker (the mode does not balance brokers, or it is below its byte band already), a
    directory below ``(2 - f) * u*`` is not counted as achievable: raising it would take
    shedding more than any band asks (a policy: it trades bytes moved, or a byte band
    already missed, for the disk band). Shedding that would take the broker below its own
    byte band trades one goal for another and is not counted as achievable either.
    Where the broker's byte band binds, ``u*`` is the wrong reference: it is the *highest*
    mean with every directory under the top, and shedding a little more from the others
    lowers the mean further while keeping them in band. The broker must keep at least its
    byte band's floor ``F``, so its Active dirs' mean stays at or above ``u_keep = (F -
    cordoned bytes) / Active capacity``; a directory below the band at ``u_keep`` (holding
    less than ``(2 - f) * u_keep`` of its capacity) is below it at every mean the byte band
    allows, so the disk band is out of reach together with the byte band, whichever one a
    plan gives up; it is reported against the disk goal (the plan keeps the byte band). Why
    the change: against ``u*`` a directory could be called out of reach that a plan then
    brought into band (6 brokers x 4 disks, an Offline dir, seed 9718: broker 1's data-2 at
    0.87 of ``u*``), and one reachable at ``u*`` but not at ``u_keep > u*`` was called
    achievable (violations seed 2 at 6000 replicas: broker 8, 13 GB above its byte floor,
    cannot shed its 1.38x dir, and its 0.84x dir needs a mean 6 % under what the floor
    allows).

Everything else (brokers that may receive and rebalance their disks) is treated as
achievable: fractional reasoning, so a broker whose single replica is larger than its band is
wide could still be reported as achievable-but-missed. That errs towards calling a miss a
planner defect, never towards excusing one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from spindle.rebalance.goals.bands import band_floor
from spindle.rebalance.goals.base import Goal, SoftGoal
from spindle.rebalance.goals.broker_bytes import BrokerBytes, StartLoads
from spindle.rebalance.goals.counts import ReplicaCount
from spindle.rebalance.goals.rack import hosting_racks, rack_limits
from spindle.rebalance.input.model import ACTIVE, OFFLINE, Cluster, Goals
from spindle.rebalance.input.scope import Scope

if TYPE_CHECKING:
    from spindle.rebalance.goals.counts import CountGoal


def _recv_b(cluster: Cluster, scope: Scope) -> np.ndarray:
    out = np.zeros(cluster.n_brokers, bool)
    out[cluster.dir_broker[scope.receivable]] = True
    return out


def blocked_disk_mean(load: np.ndarray, total: np.ndarray, factor: float) -> float:
    """Lowest Active mean utilisation a broker that can only lose bytes reaches with every
    directory at or under ``factor`` times it: the upper fixed point of
    ``u = sum(min(L, factor * u * T)) / sum(T)`` (``g(u) <= u`` at today's mean and ``g`` is
    increasing, so iterating from there descends to it)."""
    t_sum = float(total.sum())
    if t_sum <= 0:
        return 0.0
    u = float(load.sum()) / t_sum
    for _ in range(200):
        nxt = float(np.minimum(load, factor * u * total).sum()) / t_sum
        if abs(nxt - u) <= 1e-12 * max(u, 1e-300):
            return nxt
        u = nxt
    return u


def unachievable(
    cluster: Cluster, scope: Scope, goals: Goals, made: tuple[Goal, ...]
) -> dict[str, dict[Any, str]]:
    """Per soft goal of ``made`` (``goals.all_goals``, in order), the brokers (by index)
    or directories (by index, for a goal on directories) whose band no plan obeying the hard
    rules reaches, each with the reason: each soft goal's own (``SoftGoal.out_of_reach``:
    the brokers and disks that can only lose), then what each hard goal puts out of reach
    of the others (``Goal.excuses``: rack awareness fixing a rack's bytes and replicas)."""
    rc = Reach(cluster, scope, goals)
    soft = [g for g in made if isinstance(g, SoftGoal)]
    out: dict[str, dict[Any, str]] = {g.name: {} for g in soft}
    for sg in soft:
        sg.out_of_reach(rc, out[sg.name])
    for g in made:
        if g.hard:
            g.excuses(rc, out)
    return out


def rack_keeps(cluster: Cluster, scope: Scope, goals: Goals) -> np.ndarray:
    """Per broker that may not receive: the bytes (its external ones included) it keeps at
    least so that its rack's other brokers can stay under their byte bands' tops
    (``RackLimits.keeps``); 0 for every other broker, and without rack awareness."""
    out = np.zeros(cluster.n_brokers)
    k = hosting_racks(cluster, scope)
    if not goals.rack_aware or k <= 1 or cluster.n_replicas == 0:
        return out
    rc = Reach(cluster, scope, goals)
    if not (rc.closed & rc.hb).any():
        return out
    for b, (keep, _) in rc.rack_limits(k).keeps().items():
        out[b] = keep
    return out


class Reach:
    """The snapshot's loads and bands as the reachability checks read them, which brokers
    are closed (host replicas but may not receive), and the checks themselves: what each
    goal's ``out_of_reach`` and ``excuses`` call."""

    def __init__(self, cluster: Cluster, scope: Scope, goals: Goals) -> None:
        self.cluster, self.scope, self.goals = cluster, scope, goals
        st = StartLoads.of(cluster, scope, goals)
        self.total, self.load, self.b_load, self.b_cap = st.total, st.load, st.b_load, st.b_cap
        self.hb, self.stuck, self.lo_b, self.hi_b = st.hb, st.stuck, st.lo_b, st.hi_b
        self.recv_b = _recv_b(cluster, scope)
        self.closed = self.hb & ~self.recv_b
        self.n_host = max(int(self.hb.sum()), 1)
        self._limits: RackLimits | None = None

    def rack_limits(self, k: int) -> RackLimits:
        """What rack awareness forces onto any one rack of ``k`` (computed once: the disk
        goal's check and the rack goal's excuses both read it)."""
        if self._limits is None:
            self._limits = RackLimits(self, k)
        return self._limits

    def rack_keeps(self) -> dict[int, tuple[float, str]]:
        """Per broker that may not receive, the bytes it keeps at least for its rack-mates'
        byte bands, and why (``RackLimits.keeps``; none without rack awareness)."""
        k = hosting_racks(self.cluster, self.scope)
        if not self.goals.rack_aware or k <= 1 or self.cluster.n_replicas == 0:
            return {}
        return self.rack_limits(k).keeps()

    def disks_out_of_reach(self, out: dict[Any, str]) -> None:
        """Every broker that moves nothing between its disks: its dirs no plan brings into
        the disk band (``blocked_disks``)."""
        keeps = self.rack_keeps()
        for b in np.flatnonzero(self.hb & ~self.scope.intra_ok).tolist():
            self.blocked_disks(b, out, rack_keep=keeps.get(b))

    def rack_excuses(self, out: dict[str, dict[Any, str]]) -> None:
        """Rack awareness: the byte and replica bands it puts out of reach
        (``_rack_limits``)."""
        if self.goals.rack_aware:
            _rack_limits(self, out)

    def why_closed(self, b: int) -> str:
        c = self.cluster
        offline = (c.dir_state == OFFLINE) & (c.dir_broker == b)
        dirs = [c.dir_path[d] for d in np.flatnonzero(offline).tolist()]
        if dirs:
            return (
                f"broker {int(c.broker_ids[b])} has Offline dir(s) {', '.join(dirs)}: Kafka "
                "answers AlterReplicaLogDirs there with KAFKA_STORAGE_ERROR, so it receives no "
                "replicas and moves none between its disks"
            )
        return f"broker {int(c.broker_ids[b])} may not receive replicas in {self.scope.mode}"

    def closed_bytes(self, out: dict[Any, str]) -> None:
        """Closed brokers below the byte band's floor: they can only lose bytes."""
        b_load, b_cap, lo_b = self.b_load, self.b_cap, self.lo_b
        low = self.closed & (b_load < lo_b - 1e-9 * np.maximum(lo_b, 1))
        for b in np.flatnonzero(low).tolist():
            out[b] = (
                self.why_closed(b)
                + f"; it holds {b_load[b] / b_cap[b]:.4f} of its capacity and can only "
                f"lose bytes, below the band's floor {lo_b[b] / b_cap[b]:.4f}"
            )

    def closed_counts(self, goal: CountGoal, out: dict[Any, str]) -> None:
        """Closed brokers below a count band's floor: they can only lose replicas."""
        c, stuck = self.cluster, self.stuck
        serving = self.scope.hosting[c.rep_dir]
        mask = serving & c.rep_leader if goal.leaders else serving
        counts = np.bincount(c.rep_broker[mask], minlength=c.n_brokers)
        final = ~stuck & (c.rep_leader if goal.leaders else True)
        m = float(final.sum()) / self.n_host  # evacuated replicas land somewhere: they count
        lo_c = goal.band(m)[0]
        for b in np.flatnonzero(self.closed & (counts < lo_c)).tolist():
            out[b] = (
                self.why_closed(b) + f"; it keeps {int(counts[b])} {goal.name} and can only lose "
                f"some, below the band's floor {lo_c}"
            )

    def blocked_disks(
        self, b: int, out: dict[Any, str], *, rack_keep: tuple[float, str] | None = None
    ) -> None:
        """Broker b moves nothing between its disks: its Active dirs that no shedding brings
        into the disk band (see the module docstring's fixed point). ``rack_keep``: bytes b
        keeps at least so that its rack-mates stay in their byte bands, and why
        (``RackLimits.keeps``); that floor binds like b's own byte floor."""
        c, scope, load, total = self.cluster, self.scope, self.load, self.total
        host = scope.hosting
        active = host & (c.dir_state == ACTIVE)
        db = self.goals.disk_balance
        dirs = np.flatnonzero(active & (c.dir_broker == b))
        if len(dirs) == 0:
            return
        lo_d, t_d = load[dirs], total[dirs]
        u = blocked_disk_mean(lo_d, t_d, db) if scope.cross_ok else float(lo_d.sum() / t_d.sum())
        closed_why = (
            self.why_closed(b)
            if not self.recv_b[b]
            else (
                f"broker {int(c.broker_ids[b])} may not move replicas between its disks in "
                f"{scope.mode}"
            )
        )
        lo_b, b_load = self.lo_b, self.b_load
        floor = lo_b[b] if (scope.balance_brokers and b_load[b] >= lo_b[b]) else 0.0
        keeper = "to stay in its own byte band"
        own_binds = floor > 0
        if rack_keep is not None and scope.balance_brokers and rack_keep[0] > floor:
            floor, keeper = rack_keep
        cordoned = float(load[host & ~active & (c.dir_broker == b)].sum())
        shed_to = float(np.minimum(lo_d, db * u * t_d).sum()) + cordoned
        too_low = floor > shed_to + 1e-9 * max(floor, 1.0)
        # A broker that receives nothing keeps its byte band only with its Active dirs
        # holding at least ``floor - cordoned``: their mean cannot fall below ``u_keep``.
        u_keep = (
            max(floor - cordoned, 0.0) / float(t_d.sum())
            if floor > 0 and not self.recv_b[b] and scope.cross_ok
            else 0.0
        )
        if u_keep > 0 and not own_binds:
            # Only the rack-mates' room binds: below its own byte band, the broker sheds no
            # further than ``u*`` (the policy above) nor than that room allows.
            u_keep = max(u_keep, u)
        for d, ld, td in zip(dirs.tolist(), lo_d.tolist(), t_d.tolist(), strict=True):
            ratio_now = ld / td / u if u > 0 else 1.0
            if u_keep <= 0 and ld < band_floor(db, u) * td * (1 - 1e-9):
                out[d] = (
                    closed_why + f"; its disks can only lose bytes, and even with the others "
                    f"shed to the band's top this dir stays at {ratio_now:.4f} of the mean "
                    f"(band floor {band_floor(db, 1.0):.2f})"
                )
            elif u_keep > 0 and ld < band_floor(db, u_keep) * td * (1 - 1e-9):
                out[d] = (
                    closed_why + f"; its disks can only lose bytes, and {keeper}, the "
                    f"broker keeps its Active dirs' mean at {u_keep:.4f} or more, "
                    f"where this dir (at {ld / td:.4f}) is below the band's floor "
                    f"{band_floor(db, u_keep):.4f}: the two bands cannot both hold"
                )
            elif not scope.cross_ok and ld > db * u * td * (1 + 1e-9):
                out[d] = closed_why + " and the mode moves nothing across brokers"
            elif too_low and ld > db * u * td * (1 + 1e-9):
                out[d] = (
                    closed_why
                    + "; shedding this dir into its band would take the broker below "
                    + (
                        "its own byte band"
                        if keeper.startswith("to stay in its own")
                        else f"what it must keep {keeper}"
                    )
                )


def _rack_limits(rc: Reach, out: dict[str, dict[Any, str]]) -> dict[int, tuple[float, str]]:
    """Rack awareness fixes how much each rack holds: with k racks and at most m replicas of
    a partition per rack, every rack holds at least ``rf - m * (k - 1)`` and at most ``m`` of
    each partition's replicas, whatever the plan. When racks have different numbers (or
    sizes) of brokers, that can put a whole rack's brokers above (or below) their byte or
    replica-count bands. Every broker of such a rack is marked for that goal.

    A broker of the rack that may not receive (``closed``) can only lose, so at most what it
    holds today counts towards the rack's minimum; the rest lands on the rack's open brokers,
    and it is their bands that must hold it. Returns, per broker that may not receive, the
    bytes it keeps at least for that (``RackLimits.keeps``)."""
    cluster, scope = rc.cluster, rc.scope
    k = hosting_racks(cluster, scope)
    if k <= 1 or cluster.n_replicas == 0:
        return {}
    rl = rc.rack_limits(k)
    rack = cluster.broker_rack
    for rk in np.unique(rack[rc.hb]).tolist():
        members = np.flatnonzero(rc.hb & (rack == rk))
        why = rl.bytes_why(members, cluster.racks[rk])
        if why:
            for b in members.tolist():
                out[BrokerBytes.name].setdefault(b, why)
        why = rl.replicas_why(members, cluster.racks[rk])
        if why:
            for b in members.tolist():
                out[ReplicaCount.name].setdefault(b, why)
    rl.together(out[ReplicaCount.name])
    return rl.keeps()


class RackLimits:
    """What rack awareness forces onto (or allows on) any one rack, in bytes and replicas."""

    def __init__(self, rc: Reach, k: int) -> None:
        cluster, scope, stuck = rc.cluster, rc.scope, rc.stuck
        self.rc = rc
        n_b = cluster.n_brokers
        rf = np.diff(cluster.part_start)
        live = rf > 0
        starts = cluster.part_start[:-1][live]
        m = rack_limits(rf[live], k)
        need = np.maximum(0, rf[live] - m * (k - 1))
        can = np.minimum(m, rf[live])
        size = np.where(stuck, 0, cluster.rep_size).astype(np.float64)
        small = np.minimum.reduceat(size, starts)
        large = np.maximum.reduceat(size, starts)
        self.min_bytes = float((need * small).sum())
        self.max_bytes = float((can * large).sum())
        self.min_reps = int(need.sum())
        self.max_reps = int(can.sum())
        self.ext = np.bincount(
            cluster.dir_broker,
            weights=np.where(scope.hosting, cluster.dir_external(), 0),
            minlength=n_b,
        )
        mean_reps = float((~stuck).sum()) / rc.n_host
        self.c_lo, self.c_hi = ReplicaCount(rc.goals).band(mean_reps)
        serving = scope.hosting[cluster.rep_dir]
        self.counts = np.bincount(cluster.rep_broker[serving], minlength=n_b)
        self.forced = self._forced_shed(serving)

    def _forced_shed(self, serving: np.ndarray) -> np.ndarray:
        """Per broker that may not receive and sits above its byte band's top: the fewest
        replicas it gives away to get under that top (its largest movable ones, until their
        bytes cover the excess); 0 for every other broker, and where even all of its movable
        replicas do not cover the excess (the byte band is out of reach then, nothing is
        forced), and where no broker of its rack may receive.

        Why: such a broker can only lose, so what it keeps of its rack's replica minimum is
        at most its count less these; counting its snapshot count instead called a rack's
        replica band reachable that no plan keeping the byte band reaches (violations seed 0
        at 8000 replicas, RF 3 on 3 racks: rack 0 holds 2666 replicas in every plan; broker
        1, an Offline dir, 37.6 GB above its byte band with 12.2, 10.8, 10.7 and 10.0 GB its
        largest, gives at least 4 of its 223, leaving at least 2447 for the 5 open brokers
        whose band tops add up to 2445; the plan left one of them 3 above the top, "unmet").
        Like the disk band of such a broker (see the module's docstring), the replica band
        is then out of reach together with the byte band, and is reported against the count
        goal: the plan keeps the byte band. Where no rack-mate may receive there is no such
        trade (what the rack must keep stays on the brokers that have it, whatever their
        byte bands), so nothing is counted as forced there: counting it marked a rack-mate's
        replica band out of reach in the add-brokers pin for a shed that cannot happen."""
        rc = self.rc
        cluster = rc.cluster
        out = np.zeros(cluster.n_brokers, dtype=np.int64)
        excess = rc.b_load - rc.hi_b
        open_racks = np.unique(cluster.broker_rack[rc.hb & ~rc.closed])
        has_open = np.isin(cluster.broker_rack, open_racks)
        for b in np.flatnonzero(rc.closed & rc.hb & has_open & (excess > 0)).tolist():
            mine = serving & (cluster.rep_broker == b) & ~rc.stuck
            sizes = np.sort(cluster.rep_size[mine].astype(np.float64))[::-1]
            covered = np.cumsum(sizes)
            k = int(np.searchsorted(covered, excess[b] * (1 - 1e-12), side="left"))
            if k < len(sizes):
                out[b] = k + 1
        return out

    def bytes_why(self, members: np.ndarray, name: str) -> str:
        """Why no plan brings this rack's brokers into their byte bands ("": one may)."""
        rc, ext = self.rc, self.ext
        closed = rc.closed
        shut, members_open = members[closed[members]], members[~closed[members]]
        hi_r = float((rc.hi_b[members] - ext[members]).sum())
        lo_r = float((rc.lo_b[members] - ext[members]).sum())
        # What the closed brokers keep at most, and what the open ones can hold.
        kept_bytes = float((rc.b_load[shut] - ext[shut]).sum())
        hi_open = float((rc.hi_b[members_open] - ext[members_open]).sum())
        min_bytes, max_bytes = self.min_bytes, self.max_bytes
        if min_bytes > hi_r * (1 + 1e-9):
            return (
                f"rack awareness puts at least {min_bytes:.4g} replica bytes on rack {name!r} "
                f"({len(members)} brokers), above the {hi_r:.4g} its brokers' bands hold"
            )
        if len(shut) and min_bytes - kept_bytes > hi_open * (1 + 1e-9):
            return (
                f"rack awareness puts at least {min_bytes:.4g} replica bytes on rack {name!r}; "
                f"its {len(shut)} broker(s) that may not receive keep at most {kept_bytes:.4g}, "
                f"above the {hi_open:.4g} the bands of its {len(members_open)} other brokers hold"
            )
        if max_bytes < lo_r * (1 - 1e-9):
            return (
                f"rack awareness lets rack {name!r} ({len(members)} brokers) hold at most "
                f"{max_bytes:.4g} replica bytes, below the {lo_r:.4g} its brokers' bands need"
            )
        return ""

    def keeps(self) -> dict[int, tuple[float, str]]:
        """Per broker that may not receive: the bytes (with its external ones) it must keep
        so that its rack's other brokers can stay under their byte bands' tops, and why.

        The rack holds at least ``min_bytes`` of replica bytes, whatever the plan; what a
        broker that may not receive sheds stays on its rack, on the open brokers (their
        partitions' other racks are full). So it sheds at most what those brokers' bands
        have room for beyond the rest of the rack's minimum. Why: violations seed 28 at
        4000 replicas (RF 3 on 3 racks): broker 6, with an Offline dir, shed 900 GB from
        its fullest Active dir onto its three rack-mates (the disk step's fallback ignored
        their byte bands), two of which ended 1.07 and 1.03 of their band's top: the disk
        band was bought with the byte band, and called achievable while the rack had room
        for 85 GB only."""
        rc, ext = self.rc, self.ext
        cluster = rc.cluster
        out: dict[int, tuple[float, str]] = {}
        if self.min_bytes <= 0:
            return out
        rack = cluster.broker_rack
        for rk in np.unique(rack[rc.hb & rc.closed]).tolist():
            members = np.flatnonzero(rc.hb & (rack == rk))
            shut, members_open = members[rc.closed[members]], members[~rc.closed[members]]
            hi_open = float((rc.hi_b[members_open] - ext[members_open]).sum())
            kept = float((rc.b_load[shut] - ext[shut]).sum())
            room = max(hi_open + kept - self.min_bytes, 0.0)
            why = (
                f"for its rack-mates to stay in their byte bands (rack awareness keeps at "
                f"least {self.min_bytes:.4g} replica bytes on rack {cluster.racks[rk]!r}, "
                f"whose other brokers' bands hold {hi_open:.4g}, so it sheds {room:.4g} at most)"
            )
            for b in shut.tolist():
                out[b] = (float(rc.b_load[b]) - room, why)
        return out

    def together(self, out: dict[Any, str]) -> None:
        """Racks that no plan brings into the replica band all at once: the racks held out
        of it (already in ``out``) hold at most (at least) what rack awareness lets them,
        and the rest must then hold more (fewer) than their bands add up to. Each such rack
        may reach its band alone, but not with the others: every broker of the racks whose
        band (not the rule) sets how much they may hold is marked.

        Why: combined seed 21 at 4000 replicas, racks of 3, 5 and 7 brokers, RF 2 and 3.
        The large rack holds at most one replica of each of the 1500 partitions, below its
        band; the 2300 left for the other two racks are more than their 8 brokers' band tops
        (8 x 279 = 2232), so one of them is out of band in every plan -- yet each rack
        passed the one-rack check, and the goal was called achievable and left "unmet"
        (seeds 23, 25, 33 and 37 too), the lower bound's linear program had no solution
        and fell back to the closed form, and four more greedy passes chased the band.
        (Racks are taken as intervals: with more than three racks, what a set of racks may
        hold together can be tighter than its racks' sum, which this does not see -- it
        errs towards calling a band achievable.)"""
        rc, counts, c_lo, c_hi = self.rc, self.counts, self.c_lo, self.c_hi
        cluster = rc.cluster
        total = int((~rc.stuck).sum())
        racks = np.unique(cluster.broker_rack[rc.hb]).tolist()
        rows: list[tuple[np.ndarray, int, int, bool, bool]] = []
        for rk in racks:
            members = np.flatnonzero(rc.hb & (cluster.broker_rack == rk))
            if all(b in out for b in members.tolist()):
                rows.append((members, self.min_reps, self.max_reps, False, False))
                continue
            # In band, an open broker holds c_lo..c_hi; one that may not receive can only
            # lose, so it holds at most min(its count less ``forced``, c_hi) (and nothing is
            # asked of it below that when it is already under the band).
            shut = rc.closed[members]
            mine = counts[members] - self.forced[members]
            hi_m = np.where(shut, np.minimum(mine, c_hi), c_hi)
            lo_m = np.where(shut & (mine < c_lo), 0, c_lo)
            hi_r, lo_r = int(hi_m.sum()), int(lo_m.sum())
            rows.append(
                (
                    members,
                    max(self.min_reps, lo_r),
                    min(self.max_reps, hi_r),
                    hi_r < self.max_reps,
                    lo_r > self.min_reps,
                )
            )
        most = sum(r[2] for r in rows)
        least = sum(r[1] for r in rows)
        if total > most:
            blamed = [r for r in rows if r[3]]
            held = [r for r in rows if not r[3]]
            verb, bound, other = "at least", total - sum(r[2] for r in held), "above"
            band_sum = sum(r[2] for r in blamed)
        elif total < least:
            blamed = [r for r in rows if r[4]]
            held = [r for r in rows if not r[4]]
            verb, bound, other = "at most", total - sum(r[1] for r in held), "below"
            band_sum = sum(r[1] for r in blamed)
        else:
            return
        names = ", ".join(repr(cluster.racks[int(cluster.broker_rack[r[0][0]])]) for r in blamed)
        n_blamed = sum(len(r[0]) for r in blamed)
        why = (
            f"rack awareness and the other racks leave racks {names} ({n_blamed} brokers) "
            f"{verb} {bound} of the {total} replicas together, {other} the {band_sum} their "
            "bands allow: they cannot all be in band at once"
        )
        for r in blamed:
            for b in r[0].tolist():
                out.setdefault(b, why)

    def replicas_why(self, members: np.ndarray, name: str) -> str:
        """Why no plan brings this rack's brokers into the replica band ("": one may)."""
        closed = self.rc.closed
        shut, members_open = members[closed[members]], members[~closed[members]]
        forced = int(self.forced[shut].sum())
        kept_reps = int(self.counts[shut].sum()) - forced
        min_reps, max_reps, c_lo, c_hi = self.min_reps, self.max_reps, self.c_lo, self.c_hi
        if min_reps > c_hi * len(members):
            return (
                f"rack awareness puts at least {min_reps} replicas on rack {name!r} "
                f"({len(members)} brokers), above their band's {c_hi} each"
            )
        if len(shut) and min_reps - kept_reps > c_hi * len(members_open):
            shed = (
                f" ({forced} of them given away to get under their byte bands' tops, "
                "their largest: the replica band is out of reach together with the byte band)"
                if forced
                else ""
            )
            return (
                f"rack awareness puts at least {min_reps} replicas on rack {name!r}; its "
                f"{len(shut)} broker(s) that may not receive keep at most {kept_reps}{shed}, "
                f"so its {len(members_open)} other brokers hold more than their band's {c_hi} "
                "each"
            )
        if max_reps < c_lo * len(members):
            return (
                f"rack awareness lets rack {name!r} ({len(members)} brokers) hold at most "
                f"{max_reps} replicas, below their band's {c_lo} each"
            )
        return ""
