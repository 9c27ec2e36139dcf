"""Zero-byte leader balance along chains: what the one-hop reordering (``count_phases.
reorder_leaders``) leaves, finished by handing leadership down a path of brokers.

Why chains: a broker above the leader band can hand a leadership only to a broker holding a
follower of one of its partitions; when every such broker is already at the top of the band,
the one-hop search stops although a broker below the band is two hops away (A hands
partition p to B, B hands partition q to C: A loses one, C gains one, B is unchanged).
Moving leadership between the replicas of one partition is a flow: each partition gives its
one leadership to one of its serving replicas, so a broker's leader count can reach its band
exactly when an augmenting path exists (max-flow, Ford-Fulkerson). The search runs over the
brokers (a few hundred at most), not the replicas, so it stays cheap at a million replicas.

Every change is a preferred-leader change (Kafka: reorder the replica list, then
``kafka-leader-election --election-type preferred``), which copies no bytes.
Deterministic: breadth-first over brokers in index order, partitions in index order.
"""

from __future__ import annotations

from collections import deque
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from spindle.rebalance.search.state import PlannerState


class _Edges:
    """For each ordered broker pair (u, v): the partitions led from u with a serving follower
    on v, as a lazily checked stack (a partition whose leadership has moved since is skipped
    when popped)."""

    def __init__(self, pl: PlannerState) -> None:
        self.pl = pl
        c = pl.c
        n_b = c.n_brokers
        serving = pl.hosting[pl.cur_d]
        lead_rep = np.flatnonzero(pl.lead & serving)
        lead_b = np.full(c.n_partitions, -1, np.int64)
        lead_b[c.rep_part[lead_rep]] = pl.cur_b[lead_rep]
        fol = np.flatnonzero(~pl.lead & serving)
        u = lead_b[c.rep_part[fol]]
        fol, u = fol[u >= 0], u[u >= 0]
        key = u * n_b + pl.cur_b[fol]
        order = np.lexsort((fol, key))
        self.n_b = n_b
        self.count = np.bincount(key, minlength=n_b * n_b).reshape(n_b, n_b)
        cuts = np.searchsorted(key[order], np.arange(n_b * n_b + 1))
        self._fol = fol[order]
        self._cuts = cuts
        self._stacks: dict[int, list[int]] = {}

    def _stack(self, k: int) -> list[int]:
        st = self._stacks.get(k)
        if st is None:
            # Reversed so that pop() yields the lowest replica index first.
            st = self._fol[self._cuts[k] : self._cuts[k + 1]][::-1].tolist()
            self._stacks[k] = st
        return st

    def take(self, u: int, v: int) -> tuple[int, int] | None:
        """A (leader replica on u, follower replica on v) pair of one partition, or None
        (and the pair's count zeroed) when none is left."""
        pl = self.pl
        st = self._stack(u * self.n_b + v)
        while st:
            f = st.pop()
            if pl.lead[f] or int(pl.cur_b[f]) != v:
                continue
            p = pl._rep_part[f]
            for r in range(pl._part_start[p], pl._part_start[p + 1]):
                if pl.lead[r] and int(pl.cur_b[r]) == u and pl.hosting[pl.cur_d[r]]:
                    return r, f
        self.count[u, v] = 0
        return None

    def add(self, r: int) -> None:
        """Replica r now leads its partition: its partition's serving followers become
        edges from r's broker."""
        pl = self.pl
        p = pl._rep_part[r]
        u = int(pl.cur_b[r])
        for f in range(pl._part_start[p], pl._part_start[p + 1]):
            if f != r and pl.hosting[pl.cur_d[f]]:
                v = int(pl.cur_b[f])
                self._stack(u * self.n_b + v).append(f)
                self.count[u, v] += 1


def _path(count: np.ndarray, start: int, goal: np.ndarray, *, forward: bool) -> list[int] | None:
    """Shortest broker path from ``start`` to any broker in ``goal`` along the broker pairs
    with a positive ``count`` (reversed when not ``forward``), lowest indices first; None if
    none. Only the rows the search visits are compared (not brokers x brokers per search:
    that was most of this phase at 1.5K brokers)."""
    n = len(count)
    prev = np.full(n, -1, np.int64)
    prev[start] = start
    queue = deque([start])
    while queue:
        x = queue.popleft()
        nxt = np.flatnonzero((count[x] if forward else count[:, x]) > 0)
        for y in nxt.tolist():
            if prev[y] >= 0:
                continue
            prev[y] = x
            if goal[y]:
                path = [y]
                while path[-1] != start:
                    path.append(int(prev[path[-1]]))
                return path[::-1]
            queue.append(y)
    return None


def reorder_paths(pl: PlannerState) -> int:
    """Bring leader counts into their band by preferred-leader changes along broker paths
    (see the module docstring). Returns how many leaderships were handed over."""
    host = pl.host_b
    counts = pl.b_leaders
    if not ((host & (counts > pl.l_hi)).any() or (host & (counts < pl.l_lo)).any()):
        return 0
    edges = _Edges(pl)
    handed = 0
    for excess in (True, False):
        stuck: set[int] = set()
        while True:
            out = (counts - pl.l_hi) if excess else (pl.l_lo - counts)
            out = np.where(host, out, 0)
            out[list(stuck)] = 0
            b = int(np.argmax(out))
            if out[b] <= 0:
                break
            goal = host & ((counts + 1 <= pl.l_hi) if excess else (counts - 1 >= pl.l_lo))
            goal[b] = False
            path = _path(edges.count, b, goal, forward=excess)
            if path is None:
                stuck.add(b)
                continue
            if not excess:
                path = path[::-1]  # leadership flows from the giver to b
            if _hand_down(pl, edges, path):
                handed += len(path) - 1
    return handed


def _hand_down(pl: PlannerState, edges: _Edges, path: list[int]) -> bool:
    """Hand one leadership along each hop of ``path``; False (nothing changed past the
    first stale hop, which the next search avoids) when a hop has no partition left."""
    done: list[tuple[int, int]] = []
    for u, v in pairwise(path):
        pair = edges.take(u, v)
        if pair is None:
            # Undo the hops made so far: the path no longer exists as searched.
            for r, f in reversed(done):
                _swap(pl, f, r)
                edges.add(r)
            return False
        r, f = pair
        _swap(pl, r, f)
        edges.add(f)
        done.append((r, f))
    return True


def _swap(pl: PlannerState, r: int, f: int) -> None:
    """Leadership of one partition from replica r to replica f."""
    pl.lead[r], pl.lead[f] = False, True
    pl.b_leaders[int(pl.cur_b[r])] -= 1
    pl.b_leaders[int(pl.cur_b[f])] += 1
