"""A partition's leader-epoch cache (KIP-101/279): at which offset each leader epoch began.

Leader epochs let a replica that follows a new leader find where its log and the leader's part
ways (``OffsetsForLeaderEpoch``, Fetch's ``divergingEpoch``), instead of truncating to its high
watermark, which can lose committed records or keep records the new leader never had. The
leader stamps its epoch on every batch it appends (``partitionLeaderEpoch``); every replica
records the first offset of each epoch it sees here, in order.

This is Kafka's ``LeaderEpochFileCache`` reduced to its rules, kept pure (no I/O, not
thread-safe: the owning :class:`~spindle.broker.storage.log.Log` guards it with its lock and
writes the file). Rules:

* ``assign(epoch, start)``: nothing changes if ``epoch`` is the latest epoch and ``start`` is not
  below its start; otherwise every entry with an epoch ≥ ``epoch`` or a start ≥ ``start`` is
  removed first, so epochs and start offsets both stay strictly increasing.
* ``end_offset_for(epoch, leo)``: the latest epoch ends at the log end; an older epoch ends
  where the next higher known epoch starts, answered with the largest known epoch ≤ it; an
  epoch below every entry answers itself with the first entry's start; an unknown epoch (-1,
  or above the latest) answers (-1, -1).
* truncating the log's end to ``offset`` drops entries starting at or after it; raising the log
  start to ``offset`` drops entries wholly below it and moves the last of those to ``offset``.

On disk (Kafka's ``leader-epoch-checkpoint`` in the partition directory, written by
``CheckpointFile`` with ``LeaderEpochCheckpointFile.FORMATTER``; ``checkpoint.write_atomically``
makes it crash-safe)::

    0                   version
    2                   number of entries
    0 0                 epoch, start offset; one line per entry, in order
    3 1520
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from spindle.broker.storage.checkpoint import CheckpointFormatError

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
VERSION = 0


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """Leader epoch ``epoch`` began at offset ``start_offset``."""

    epoch: int
    start_offset: int


class LeaderEpochCache:
    """The epoch → start offset entries of one replica (see module docstring). Pure."""

    def __init__(self, entries: Iterable[EpochEntry] = ()) -> None:
        self._entries: list[EpochEntry] = []
        for e in entries:
            self.assign(e.epoch, e.start_offset)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({[(e.epoch, e.start_offset) for e in self._entries]})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LeaderEpochCache) and self._entries == other._entries

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def copy(self) -> LeaderEpochCache:
        out = LeaderEpochCache()
        out._entries = list(self._entries)
        return out

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` began at ``start_offset``; True if the entries changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"leader epoch {epoch} at offset {start_offset} is not valid")
        if self._entries:
            last = self._entries[-1]
            if last.epoch == epoch and start_offset >= last.start_offset:
                return False
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        return True

    def start_epochs(self, starts: Iterable[tuple[int, int]]) -> bool:
        """Appended batches (epoch, first offset), in order: each epoch newer than the latest
        starts at its first batch; batches without an epoch (-1, written before leaders
        stamped them) and older epochs change nothing. True if the entries changed."""
        changed = False
        for epoch, offset in starts:
            latest = self.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                changed = self.assign(epoch, offset) or changed
        return changed

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetsForLeaderEpoch for ``requested_epoch``: see the
        module docstring (Kafka's ``LeaderEpochFileCache.endOffsetFor``)."""
        undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return undefined
        if self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        higher = next((e for e in self._entries if e.epoch > requested_epoch), None)
        if higher is None:
            return undefined
        floor = None
        for e in self._entries:
            if e.epoch <= requested_epoch:
                floor = e
        if floor is None:
            return requested_epoch, higher.start_offset
        return floor.epoch, higher.start_offset

    def truncate_from_end(self, end_offset: int) -> bool:
        """The log was cut to end before ``end_offset``: drop entries starting at or after it."""
        before = len(self._entries)
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        return len(self._entries) != before

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at ``start_offset``: entries wholly below it go, and the epoch
        holding ``start_offset`` now starts there (Kafka's ``truncateFromStart``)."""
        below = [e for e in self._entries if e.start_offset <= start_offset]
        if not below or (below[-1].start_offset == start_offset and len(below) == 1):
            return False
        keep = self._entries[len(below) :]
        self._entries = [EpochEntry(below[-1].epoch, start_offset), *keep]
        return True

    def format(self) -> bytes:
        """The checkpoint file's content (module docstring)."""
        lines = [str(VERSION), str(len(self._entries))]
        lines += [f"{e.epoch} {e.start_offset}" for e in self._entries]
        return ("\n".join(lines) + "\n").encode()

    @classmethod
    def parse(cls, text: str, *, path: str = LEADER_EPOCH_CHECKPOINT) -> LeaderEpochCache:
        """Entries of a checkpoint file; ``CheckpointFormatError`` (an ``OSError``, so the
        failure channel treats it as a disk error, as Kafka does) naming ``path`` if malformed."""
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2 or lines[0].strip() != str(VERSION):
            raise CheckpointFormatError(f"leader-epoch checkpoint {path} has no version {VERSION}")
        try:
            count = int(lines[1])
            pairs = [tuple(int(x) for x in line.split()) for line in lines[2:]]
        except ValueError:
            raise CheckpointFormatError(f"leader-epoch checkpoint {path} is malformed") from None
        if count != len(pairs) or any(len(p) != 2 for p in pairs):
            raise CheckpointFormatError(
                f"leader-epoch checkpoint {path} declares {count} entries but holds {len(pairs)}"
            )
        cache = cls()
        for epoch, start in pairs:
            if epoch < 0 or start < 0:
                raise CheckpointFormatError(
                    f"leader-epoch checkpoint {path} has a negative entry {epoch} {start}"
                )
            cache.assign(epoch, start)
        return cache
