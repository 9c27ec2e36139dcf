"""The in-memory offset and time indexes of a segment, as their files' bytes and as the mover
adopts them (split from ``segment`` for size; the file formats are described there).

- :class:`PackedIndex` keeps an index's file bytes packed as entries arrive, so a flush packs
  only what is new, and can do so before the partition lock is taken (thread-safe).
- :func:`adopt_entries` lets a future segment take a longer snapshot of its source segment's
  index by copying only the entries it lacks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class PackedIndex:
    """The file bytes of an in-memory index, packed as entries arrive.

    Between rebuilds an index only grows, so a flush packs just the entries added since the
    previous flush instead of all of them: a 1 GiB segment holds ~260K entries, packing them
    all costs ~0.1 s of Python, and flushes run under the partition lock (the mover's swap,
    checkpoints), stalling every append meanwhile. :meth:`reset` when the list is rebuilt;
    as a guard, a list that no longer holds the last packed entry in its place is repacked.

    Thread-safe (its own lock), so that ``Log`` can :meth:`pack` the bulk before taking the
    partition lock for the flush: the lists it is given only grow, or are replaced whole.
    """

    __slots__ = ("_count", "_last", "_lock", "_pack", "_raw")

    def __init__(self, pack: Callable[[tuple[int, int]], bytes]) -> None:
        self._pack = pack
        self._raw = bytearray()
        self._count = 0
        self._last: tuple[int, int] | None = None
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._reset()

    def _reset(self) -> None:
        self._raw.clear()
        self._count = 0
        self._last = None

    def pack(self, entries: list[tuple[int, int]]) -> None:
        """Pack the entries of ``entries`` not packed yet (all of them if it is another list)."""
        with self._lock:
            self._pack_new(entries)

    def _pack_new(self, entries: list[tuple[int, int]]) -> None:
        n = self._count
        if n > len(entries) or (n and entries[n - 1] != self._last):
            self._reset()
            n = 0
        new = entries[n:]  # one slice: entries appended meanwhile wait for the next call
        if new:
            self._raw += b"".join(map(self._pack, new))
            self._count = n + len(new)
            self._last = new[-1]

    def raw(self, entries: list[tuple[int, int]]) -> bytes:
        """The file content for ``entries``."""
        with self._lock:
            self._pack_new(entries)
            return bytes(self._raw)


def adopt_entries(
    mine: list[tuple[int, int]],
    mine_source: list[tuple[int, int]] | None,
    source: list[tuple[int, int]],
    count: int,
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(``source[:count]``, ``source``) for ``Segment.adopt_copied``: ``mine`` extended in
    place when it was taken from this very list and is still a prefix of it (the mover adopts
    ever longer snapshots of one source segment), so only new entries are copied; otherwise
    (another list, or a flush here added a final time-index entry the source lacks) a copy."""
    have = len(mine)
    if mine_source is source and have <= count and (not have or mine[-1] == source[have - 1]):
        mine.extend(source[have:count])
        return mine, source
    return source[:count], source
