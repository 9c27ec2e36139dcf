"""Two-move chains for a broker no single move helps: the taker (or giver) is blocked by a
band, so one replica moves first to unblock it.

Refill, then give (counts). A broker above the replica band at the bottom of its byte band
cannot give the small replicas the count phases move: each would take it below its byte
floor. It is common where brokers start below their byte band holding many small replicas
(on ``combined`` at a million replicas, 19 of the middle rack's brokers began at 0.22-0.27
of their size with ~1000 replicas each, the band being 598-732): the byte phase fills them up
to the floor with a few large replicas and the count phase then finds every replica they
hold pinned. The stepwise count phase's refill (``count_phases._refill``) looks for a donor
among the cluster's fullest brokers, which on racks of unequal size are all on the rack that
rack awareness holds above its byte band, whose replicas cannot join the middle rack: 20
brokers ended 208-394 replicas over the band although their rack had room for twice their
excess. Here the broker takes one replica from a donor with bytes to spare (its rack-mates
first: a move inside a rack never touches rack limits), sized to what it lacks to give its
excess of smallest replicas (best fit, never more than its room under its byte band's top);
the count rounds that follow hand the small replicas on in bulk, across every refilled
broker at once. One refill usually unlocks hundreds of count moves. The stepwise refill falls
back to the same donors (``refill_one``) for brokers that reach their floor later.

Vent, then take (bytes). A broker above its byte band whose replicas rack awareness confines
to its own rack cannot shed once its rack-mates are at the top of their band, although those
hold replicas other racks could take (combined, 14K replicas, seed 6: the smallest rack's
three fullest brokers stuck at 1.40-1.55x their rack's mean, their rack-mates full of
replicas of two-replica partitions that the other racks had room for). Here a rack-mate
first sheds one replica anywhere it may go (``_shed_broker``: best fit, strict), then the
stuck broker sheds onto that rack-mate.
"""

from __future__ import annotations

import numpy as np
from spindle.rebalance.search.placement import Placer

#: Refills per broker in one call at most (each is one move; the phase runs up to three
#: times per plan, once per count pass).
MAX_REFILLS = 8
#: Donors tried per refill at most.
DONORS = 8


def refill_givers(pl: Placer) -> int:
    """Give every broker above the replica band that lacks the bytes to give its excess the
    bytes it lacks, by refills from donors with bytes to spare; returns the refills made.

    Brokers whose band is out of reach under the hard rules (``PlannerState.out_of_reach``)
    are left out: no reshaping moves bytes for a band no plan meets. Deterministic: brokers
    by excess (most first) then index, donors by rack (the broker's own first), spare bytes
    over capacity (most first), then index."""
    if pl.capped or not (pl.s.balance_brokers and pl.s.cross_ok and pl.s.balance_counts):
        return 0
    count, lo_c, hi_c = pl.replica_goal.of(pl)
    over = pl.host_b & pl.recv_broker() & ~pl.out_of_reach(pl.replica_goal.name)
    over &= count > hi_c
    givers = np.flatnonzero(over)
    if not len(givers):
        return 0
    lacks = _lacking(pl, givers, (count - hi_c)[givers])
    keep = lacks > 0
    givers, lacks = givers[keep], lacks[keep]
    order = np.lexsort((givers, -(count[givers] - hi_c)))
    made = 0
    for b, lack in zip(givers[order].tolist(), lacks[order].tolist(), strict=True):
        for _ in range(MAX_REFILLS):
            if lack <= 0 or pl.capped:
                break
            got = refill_one(pl, b, lack, lo_c, hi_c)
            if got <= 0:
                break
            lack -= got
            made += 1
    return made


def _lacking(pl: Placer, givers: np.ndarray, excess: np.ndarray) -> np.ndarray:
    """Per giver, the bytes it lacks to give its ``excess`` smallest unmoved serving replicas
    and stay at or above its byte floor (0 or less: it lacks none)."""
    c = pl.c
    if pl._by_broker is None:
        pl._by_broker = np.lexsort((np.arange(c.n_replicas), pl.size, c.rep_broker))
    by_b = pl._by_broker
    # Unmoved replicas sit where the snapshot put them: the snapshot's (broker, size, index)
    # order, cut per broker, lists each giver's unmoved replicas smallest first.
    starts = np.searchsorted(c.rep_broker[by_b], givers, side="left")
    ends = np.searchsorted(c.rep_broker[by_b], givers, side="right")
    out = np.zeros(len(givers))
    rows = zip(givers.tolist(), starts.tolist(), ends.tolist(), excess.tolist(), strict=True)
    for i, (b, lo, hi, k) in enumerate(rows):
        reps = by_b[lo:hi]
        reps = reps[~pl.moved[reps] & pl.hosting[pl.cur_d[reps]]][: int(k)]
        out[i] = float(pl.size_f[reps].sum()) - float(pl.b_load[b] - pl.b_lo[b])
    return out


def refill_one(
    pl: Placer, b: int, lack: float, lo_c: int, hi_c: int, *, skip: set[int] | None = None
) -> float:
    """One replica of at most ``lack`` bytes (best fit) onto broker b from the first donor
    that gives one, not one of ``skip``: its bytes, or 0. Donors keep their replica count
    within [``lo_c``, ``hi_c``] and their bytes above their floor."""
    room = float(pl.b_hi[b] - pl.b_load[b])
    if room <= 0:
        return 0.0
    want = min(lack, room)
    count = pl.b_reps
    slack = pl.b_load - pl.b_lo
    ok = pl.host_b & (slack > 0) & (count - 1 >= lo_c) & (count <= hi_c)
    ok[b] = False
    if skip:
        ok[list(skip)] = False
    donors = np.flatnonzero(ok)
    rack = pl.c.broker_rack
    spare = slack[donors] / np.maximum(pl.b_cap[donors], 1.0)
    donors = donors[np.lexsort((donors, -spare, rack[donors] != rack[b]))]
    tried = 0
    for d in donors.tolist():
        if tried == DONORS:
            break
        if not pl.rack_open(d, int(rack[b])):
            continue
        tried += 1
        r = pl._shed_broker(d, want, min(room, float(slack[d])), only_broker=b)
        if r >= 0:
            return float(pl.size_f[r])
    return 0.0


def vent_then_take(pl: Placer, b: int, excess: float, floor_room: float) -> bool:
    """Broker b, ``excess`` bytes above its byte band and unable to shed (``_shed_broker``
    failed), sheds onto a rack-mate after that rack-mate sheds one replica elsewhere; the
    rack-mates with the most bytes above their floor (over capacity) are tried first, at most
    ``DONORS``. Returns whether b shed one."""
    rack = pl.c.broker_rack
    slack = pl.b_load - pl.b_lo
    ok = pl.host_b & pl.recv_broker() & (rack == rack[b]) & (slack > 0)
    ok &= pl.b_load <= pl.b_hi
    ok[b] = False
    mates = np.flatnonzero(ok)
    spare = slack[mates] / np.maximum(pl.b_cap[mates], 1.0)
    for t in mates[np.lexsort((mates, -spare))][:DONORS].tolist():
        # t frees what b must lose, as far as its own floor allows.
        give = min(excess, float(slack[t]))
        if pl._shed_broker(t, give, float(slack[t]), only_broker=-1) < 0:
            continue
        room = float(pl.b_hi[t] - pl.b_load[t])
        return pl._shed_broker(b, min(excess, room), floor_room, only_broker=t) >= 0
    return False
