"""Candidate generation and scoring for the count phases: "the proposer proposes, the driver
disposes".

Why: evening out replica and leader counts moves tens of thousands of small replicas on a
large cluster. Finding each one sequentially (the giver's smallest replica that may leave,
checked against every taker's partition and rack rules) made the count phases most of the
driver's time. Instead, the work runs in rounds. In each round a proposer looks at the live
state once and, for every giving broker, takes its smallest unmoved replicas that may leave
(``quota`` of them, ranked by size within the giver), pairs each with the taking brokers that
may accept it under the partition rules (one replica per broker, none onto a broker that
held the partition in the snapshot, the rack limit), the byte band and the leader band, and
keeps the ``per_replica`` best takers by the same score the driver uses (fewest of the
counted thing, then byte fullness). The driver then walks the batch,
re-checks only scalars against the live state (earlier moves of the batch change counts and
loads) and applies or skips each proposal; the next round proposes again from the new state.

Two implementations return identical ``Proposals`` (a test checks element for element):
``LocalProposer`` in numpy for ``spark=None`` (unit tests, small clusters) and
``spindle.rebalance.spark.propose.SparkProposer`` in Spark DataFrames, which is what the job
uses so that the per-replica scan runs on executors. The order of a batch is explicit — (rank
in giver, replica, score, taker) — so neither depends on Spark's row order; both compute the
score with the same floating-point expression, so both rank ties alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from spindle.rebalance.goals.counts import taker_score as goal_taker_score
from spindle.rebalance.input.model import B8, F64, I64, Cluster

#: Candidate x taker (x partition slot) cells one pairing step holds at most (bounded memory
#: per task: a few tens of MB).
PAIR_CELLS = 1 << 21


@dataclass(frozen=True, kw_only=True)
class CountRound:
    """The live state one round of a count phase proposes from. Per-broker arrays have one
    entry per broker, per-directory arrays one per directory."""

    #: Leader counts (candidates are leaders) or replica counts.
    leaders: bool
    #: Rack awareness is a hard rule of this plan.
    rack_aware: bool
    #: Replicas moved so far, ascending, and the broker each now sits on.
    moved: I64
    moved_broker: I64
    #: Giving brokers (ascending), how many candidates each proposes, and how many bytes each
    #: may still lose (its byte band's floor).
    givers: I64
    quota: I64
    floor_room: F64
    #: Per giver: its candidates come from its ``window`` smallest replicas (leaders, for
    #: leader counts) by snapshot rank, so a round reads a slice of each giver, not all of it.
    window: I64
    #: Brokers that may take (ascending).
    takers: I64
    #: Per broker: the counted thing (replicas or leaders), byte load, byte band's top,
    #: capacity (never 0), whether it may take one more leader, the largest room under the
    #: capacity threshold of any of its receivable directories (-inf: none), Active load and
    #: the factor of its directories' lower band (``(2 - disk_balance) / Active capacity``).
    count: I64
    b_load: F64
    b_hi: F64
    b_cap: F64
    lead_room: B8
    max_room: F64
    a_load: F64
    lo_factor: F64
    #: Per directory: load, total bytes, Active, hosting (its bytes count; may give).
    dir_load: F64
    dir_total: F64
    dir_active: B8
    dir_hosting: B8
    #: Score denominator: the count band's top (at least 1).
    denom: int
    #: Takers kept per replica (best first).
    per_replica: int


@dataclass(frozen=True)
class Proposals:
    """A batch of candidate moves, ordered by (rank, replica, score, taker): the replica's
    1-based rank among its giver's candidates (smallest first), so givers take turns; a
    replica's takers are consecutive, best first."""

    rid: I64
    taker: I64
    score: F64
    rank: I64

    def __len__(self) -> int:
        return len(self.rid)


class CountProposer(Protocol):
    """Proposes count moves from a live state (``LocalProposer``, ``SparkProposer``)."""

    def propose(self, rnd: CountRound) -> Proposals: ...


def taker_score(count: F64 | I64, denom: int, b_load: F64, size: F64, b_cap: F64) -> F64:
    """The count goals' taker score (``goals.counts.taker_score``) of receiving ``size``
    bytes (written the same way in Spark)."""
    out: F64 = goal_taker_score(count.astype(np.float64), denom, (b_load + size) / b_cap)
    return out


def empty_proposals() -> Proposals:
    z = np.zeros(0, np.int64)
    return Proposals(z, z.copy(), np.zeros(0, np.float64), z.copy())


def ordered(rid: I64, taker: I64, score: F64, rank: I64) -> Proposals:
    """Proposals in their explicit batch order (see ``Proposals``)."""
    o = _by_runs(rid, taker, score, rank)
    if o is None:
        o = np.lexsort((taker, score, rid, rank))
    return Proposals(
        rid[o].astype(np.int64),
        taker[o].astype(np.int64),
        score[o].astype(np.float64),
        rank[o].astype(np.int64),
    )


def _by_runs(rid: I64, taker: I64, score: F64, rank: I64) -> I64 | None:
    """The batch order without sorting every proposal, when each replica's proposals come
    as one run already in (score, taker) order, as ``_pair`` writes them: the runs sorted by
    (rank, replica) and laid end to end. None when the input is not like that (the caller
    sorts everything). Same order either way: (replica, taker) is unique in a batch."""
    n = len(rid)
    if n < 2:
        return None
    same = rid[1:] == rid[:-1]
    up = (score[1:] > score[:-1]) | ((score[1:] == score[:-1]) & (taker[1:] > taker[:-1]))
    if not (up | ~same).all() or not (rank[1:] == rank[:-1])[same].all():
        return None
    start = np.flatnonzero(np.concatenate(([True], ~same)))
    heads = rid[start]
    if heads.min() < 0 or np.bincount(heads).max() > 1:
        return None
    runs = np.lexsort((heads, rank[start]))
    length = np.diff(np.append(start, n))[runs]
    out: I64 = np.repeat(start[runs] - (np.cumsum(length) - length), length) + np.arange(n)
    return out


@dataclass(frozen=True)
class Block:
    """Replicas of whole brokers (every replica of each broker it holds), as columns: the unit
    a proposer works on. ``members``: the snapshot brokers of each replica's partition in
    replica-list order, padded with -1."""

    rid: I64
    pid: I64
    dir: I64
    broker: I64
    size: I64
    leader: B8
    lim: I64
    members: I64
    #: Rank of the replica among its broker's replicas (and among its broker's leaders; -1
    #: for a follower) by (size, index), from 0.
    brank: I64
    lrank: I64


@dataclass(frozen=True)
class Moves:
    """The moves so far, for a block: moved replicas ascending, and per partition (ascending)
    which slot of its replica list now sits on which broker."""

    rid: I64
    pid: I64
    slot: I64
    broker: I64

    @staticmethod
    def of(rnd: CountRound, rep_part: np.ndarray, slot_of: np.ndarray) -> Moves:
        pid = rep_part[rnd.moved].astype(np.int64)
        o = np.lexsort((rnd.moved, pid))
        return Moves(
            rnd.moved.astype(np.int64),
            pid[o],
            slot_of[rnd.moved[o]].astype(np.int64),
            rnd.moved_broker[o].astype(np.int64),
        )


def propose_block(
    blk: Block, rnd: CountRound, moves: Moves, broker_rack: I64
) -> tuple[I64, I64, F64, I64]:
    """One block's proposals (rid, taker, score, rank), unordered: the whole of the rules in
    ``propose``'s docstring, as array operations. Runs in the driver (``LocalProposer``) or in
    Spark tasks (``SparkProposer``), one block per task."""
    n_b = len(rnd.count)
    quota = np.zeros(n_b, np.int64)
    quota[rnd.givers] = rnd.quota
    room = np.full(n_b, -np.inf)
    room[rnd.givers] = rnd.floor_room
    window = np.zeros(n_b, np.int64)
    window[rnd.givers] = rnd.window
    sz = blk.size.astype(np.float64)
    ok = (blk.lrank if rnd.leaders else blk.brank) < window[blk.broker]
    ok &= rnd.dir_hosting[blk.dir] & (sz <= room[blk.broker])
    if rnd.leaders:
        ok &= blk.leader
    d0, g = blk.dir, blk.broker
    ok &= ~(
        rnd.dir_active[d0]
        & (rnd.dir_load[d0] - sz < rnd.lo_factor[g] * (rnd.a_load[g] - sz) * rnd.dir_total[d0])
    )
    idx = np.flatnonzero(ok)
    # Not moved yet: looked up only for the rows the cheap rules above kept (the lookup
    # of every row of the block was most of this function).
    rid = blk.rid[idx]
    idx = idx[np.searchsorted(moves.rid, rid) == np.searchsorted(moves.rid, rid, "right")]
    idx = idx[np.lexsort((blk.rid[idx], blk.size[idx], blk.broker[idx]))]
    gb = blk.broker[idx]
    first = np.searchsorted(gb, gb)  # first row of each giver
    rank = np.arange(len(idx)) - first + 1
    keep = rank <= quota[gb]
    idx, rank = idx[keep], rank[keep]
    z = np.zeros(0, np.int64)
    if not len(idx) or not len(rnd.takers):
        return z, z, np.zeros(0), z
    # Current brokers of the candidates' partitions: the snapshot's, moved slots replaced.
    members = blk.members[idx].copy()
    pid = blk.pid[idx]
    lo = np.searchsorted(moves.pid, pid)
    cnt = np.searchsorted(moves.pid, pid, "right") - lo
    rows = np.repeat(np.arange(len(idx)), cnt)
    at = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()))
    members[rows, moves.slot[at]] = moves.broker[at]

    parts = []
    for rows, t in _by_open_racks(rnd, blk, idx, members, broker_rack):
        # Candidates x takers in chunks, so memory stays bounded whatever the cluster's size.
        step = max(1, PAIR_CELLS // max(len(t) * members.shape[1], 1))
        for i in range(0, len(rows), step):
            at = rows[i : i + step]
            parts.append(_pair(rnd, blk, idx[at], rank[at], members[at], broker_rack, t))
    if not parts:
        return z, z, np.zeros(0), z
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
        np.concatenate([p[3] for p in parts]),
    )


def _by_open_racks(
    rnd: CountRound, blk: Block, idx: I64, members: I64, broker_rack: I64
) -> list[tuple[I64, I64]]:
    """The candidates (positions in ``idx``) in groups, each with the takers on the racks
    the rack limit lets its candidates join: a taker on any other rack fails ``_cells``'
    rack rule for every candidate of the group, so pairing with fewer takers proposes the
    same. Candidates that may join no taker's rack propose nothing and are left out. Why:
    where rack awareness confines partitions (racks of unequal size, RF = racks), most
    candidates of the fullest racks may only stay on their own rack, and scoring each
    against every taker elsewhere was most of a count round. Without rack awareness, or
    with more racks than a bit mask holds, one group of every candidate and every taker."""
    n_r = int(broker_rack.max(initial=0)) + 1
    everything = [(np.arange(len(idx)), rnd.takers)]
    if not rnd.rack_aware or n_r > 62 or not len(idx):
        return everything
    rows = np.repeat(np.arange(len(idx)), members.shape[1])
    m_rack = np.where(members >= 0, broker_rack[np.maximum(members, 0)], n_r).ravel()
    on = np.bincount(rows * (n_r + 1) + m_rack, minlength=len(idx) * (n_r + 1))
    on = on.reshape(len(idx), n_r + 1)[:, :n_r]
    on[np.arange(len(idx)), broker_rack[blk.broker[idx]]] -= 1  # the candidate leaves
    t_rack = broker_rack[rnd.takers]
    has_taker = np.bincount(t_rack, minlength=n_r) > 0
    open_ = (on < blk.lim[idx][:, None]) & has_taker[None, :]
    code = open_.astype(np.int64) @ (np.int64(1) << np.arange(n_r, dtype=np.int64))
    out = []
    for c in np.unique(code[code > 0]).tolist():
        takers = rnd.takers[((c >> t_rack) & 1).astype(bool)]
        out.append((np.flatnonzero(code == c), takers))
    return out


def _pair(
    rnd: CountRound,
    blk: Block,
    idx: I64,
    rank: I64,
    members: I64,
    broker_rack: I64,
    t: I64,
) -> tuple[I64, I64, F64, I64]:
    """Candidates (rows ``idx`` of the block, current partition brokers ``members``) paired
    with the takers ``t`` (``rnd.takers``, or those on racks they may join): the takers'
    rules, the score, the best ``per_replica`` kept, by (score, taker).

    Takers are read in blocks, lowest score bound first (the score with no bytes added:
    scores only grow with a replica's size), and a candidate stops reading once its
    ``per_replica``-th best is below the next block's bound: no later taker can enter, nor
    tie (ties go to the lower taker, which may come later). The same takers as scoring every
    taker and sorting, for a few blocks' work per candidate instead of all takers'."""
    k = rnd.per_replica
    n = len(idx)
    lb = taker_score(rnd.count[t], rnd.denom, rnd.b_load[t], np.zeros(len(t)), rnd.b_cap[t])
    perm = np.argsort(lb, kind="stable")
    best_s = np.full((n, k), np.inf)
    best_t = np.full((n, k), np.iinfo(np.int64).max, np.int64)
    live = np.arange(n)
    at, width = 0, 4 * k
    while len(live) and at < len(t):
        cols = perm[at : at + width]
        at, width = at + len(cols), 2 * width
        score = _cells(rnd, blk, idx[live], members[live], broker_rack, t[cols])
        both_s = np.concatenate([best_s[live], score], axis=1)
        both_t = np.concatenate([best_t[live], np.broadcast_to(t[cols], score.shape)], axis=1)
        top = np.lexsort((both_t, both_s), axis=1)[:, :k]
        best_s[live] = np.take_along_axis(both_s, top, axis=1)
        best_t[live] = np.take_along_axis(both_t, top, axis=1)
        if at < len(t):
            live = live[~(best_s[live, k - 1] < lb[perm[at]])]
    fine = np.isfinite(best_s)
    row = np.broadcast_to(np.arange(n)[:, None], best_s.shape)[fine]
    return blk.rid[idx][row], best_t[fine], best_s[fine], rank[row]


def _cells(rnd: CountRound, blk: Block, idx: I64, members: I64, broker_rack: I64, t: I64) -> F64:
    """Candidates (rows ``idx``) x takers ``t``: the taker's score where the takers' rules
    allow the move, inf where they do not."""
    s = blk.size[idx].astype(np.float64)[:, None]
    giver = blk.broker[idx]
    okp = t[None, :] != giver[:, None]
    okp &= rnd.b_load[t][None, :] + s <= rnd.b_hi[t][None, :]
    okp &= s <= rnd.max_room[t][None, :]
    okp &= ~blk.leader[idx][:, None] | rnd.lead_room[t][None, :]
    okp &= ~(members[:, :, None] == t[None, None, :]).any(axis=1)
    # Nor onto a broker that held the partition in the snapshot (Kafka would execute it as a
    # reorder plus fewer copies than planned; see ``core``).
    okp &= ~(blk.members[idx][:, :, None] == t[None, None, :]).any(axis=1)
    if rnd.rack_aware:
        m_rack = np.where(members >= 0, broker_rack[np.maximum(members, 0)], -1)
        t_rack = broker_rack[t]
        on_rack = (m_rack[:, :, None] == t_rack[None, None, :]).sum(axis=1)
        on_rack -= broker_rack[giver][:, None] == t_rack[None, :]
        okp &= on_rack < blk.lim[idx][:, None]
    score = taker_score(
        rnd.count[t][None, :], rnd.denom, rnd.b_load[t][None, :], s, rnd.b_cap[t][None, :]
    )
    out: F64 = np.where(okp, score, np.inf)
    return out


def cluster_block(cluster: Cluster, rack_limit: I64) -> Block:
    """The whole cluster as one block."""
    rf = np.diff(cluster.part_start)
    width = max(int(rf.max(initial=0)), 1)
    parts = cluster.rep_part
    members = np.full((cluster.n_replicas, width), -1, np.int64)
    for k in range(width):
        at = cluster.part_start[parts] + k
        has = at < cluster.part_start[parts + 1]
        members[has, k] = cluster.rep_broker[at[has]]
    brank, lrank = ranks(cluster)
    return Block(
        rid=np.arange(cluster.n_replicas, dtype=np.int64),
        pid=parts.astype(np.int64),
        dir=cluster.rep_dir.astype(np.int64),
        broker=cluster.rep_broker.astype(np.int64),
        size=cluster.rep_size.astype(np.int64),
        leader=cluster.rep_leader.astype(bool),
        lim=rack_limit[parts].astype(np.int64),
        members=members,
        brank=brank,
        lrank=lrank,
    )


def by_broker(cluster: Cluster) -> I64:
    """Replica indices ordered by (broker, size, index): each broker's smallest first."""
    n = cluster.n_replicas
    out: I64 = np.lexsort((np.arange(n), cluster.rep_size, cluster.rep_broker)).astype(np.int64)
    return out


def ranks(cluster: Cluster, order: I64 | None = None) -> tuple[I64, I64]:
    """Each replica's rank among its broker's replicas, and among its broker's leaders (-1:
    not a leader), by (size, index), from 0. ``order``: ``by_broker(cluster)`` if known."""
    if order is None:
        order = by_broker(cluster)
    b = cluster.rep_broker[order]
    pos = np.arange(len(order))
    brank = np.empty(len(order), np.int64)
    brank[order] = pos - np.searchsorted(b, b)
    lead = cluster.rep_leader[order]
    lorder = order[lead]
    lb = b[lead]
    lrank = np.full(len(order), -1, np.int64)
    lrank[lorder] = np.arange(len(lorder)) - np.searchsorted(lb, lb)
    return brank, lrank


def slots(cluster: Cluster) -> I64:
    """Each replica's position in its partition's replica list."""
    out: I64 = (np.arange(cluster.n_replicas) - cluster.part_start[cluster.rep_part]).astype(
        np.int64
    )
    return out


class LocalProposer:
    """numpy proposer: the whole cluster as one block, in the driver."""

    def __init__(self, cluster: Cluster, *, rack_limit: I64) -> None:
        self.c = cluster
        self._rack_limit = rack_limit
        self._block: Block | None = None  # built on first use: most small plans never need it
        self._slot = slots(cluster)

    def propose(self, rnd: CountRound) -> Proposals:
        if self._block is None:
            self._block = cluster_block(self.c, self._rack_limit)
        moves = Moves.of(rnd, self.c.rep_part, self._slot)
        return ordered(*propose_block(self._block, rnd, moves, self.c.broker_rack.astype(np.int64)))
