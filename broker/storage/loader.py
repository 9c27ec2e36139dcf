"""Start-up of the log directories: identity and locks, loading replicas, repairing moves
(Kafka's ``LogLoader`` and the start-up half of ``LogManager``).

Runs once, on the thread that opens the LogManager, before anything else can reach the
replicas; it fills the manager's tables and returns what the manager must act on. Rules:

- every configured directory that can be created and listed gets its ``meta.properties``
  completed (``logdir.complete_ensemble``) and its ``.lock`` taken; one that cannot goes
  offline, and start-up fails only if none is left;
- each replica directory is loaded with its checkpoints (recovery point, log start offset,
  high watermark); an unclean shutdown (no marker) recovers segments past the recovery point;
  ``-delete`` directories are scheduled for deletion, ``-stray`` and other names are skipped;
  two live (or two future) replicas of one partition refuse start-up, naming both -- unless
  one of two live copies was re-created live for the other (Spindle's re-homing of a replica
  whose directory failed, ``REHOMED_FILE``) later than the other was: that one is kept and the
  other, the failed directory's copy readable again, is renamed ``-stray``;
- future replicas follow seed 000's crash rules (:func:`recover_moves`).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from spindle.broker.common.clock import Clock
from spindle.broker.common.errors import KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import LOG_OVERHEAD
from spindle.broker.storage.checkpoint import (
    LOG_START_OFFSET,
    RECOVERY_POINT,
    REPLICATION_OFFSET,
    fsync_dir,
    read_checkpoint,
)
from spindle.broker.storage.failure import LogDirFailureChannel
from spindle.broker.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from spindle.broker.storage.log import Log
from spindle.broker.storage.logdir import (
    LogDir,
    MetaProperties,
    StorageStartupError,
    complete_ensemble,
    read_meta,
    write_meta,
)
from spindle.broker.storage.names import (
    DELETE_SUFFIX,
    FUTURE_SUFFIX,
    REHOMED_FILE,
    STRAY_SUFFIX,
    TOPIC_FILE,
    parse_dir_name,
    partition_dir_name,
    suffixed_dir_name,
)
from spindle.broker.storage.segment import LOG_SUFFIX, Segment
from spindle.broker.storage.settings import StorageSettings

log = logging.getLogger(__name__)

_EPOCH_PREFIX = struct.Struct(">qii")
"""A stored batch's baseOffset, batchLength and partitionLeaderEpoch (``records.batch``)."""

ScheduleDelete = Callable[[str, str], None]
"""``schedule_delete(path, logdir_path)``: delete a ``-delete`` directory later."""


@dataclass
class _DirCheckpoints:
    """One directory's checkpoint files and clean-shutdown marker, read before loading."""

    clean: bool
    recovery: dict[TopicPartition, int]
    starts: dict[TopicPartition, int]
    hws: dict[TopicPartition, int]
    names: list[str] = field(default_factory=list)


@dataclass
class RecoveredMoves:
    """What :func:`recover_moves` decided: moves to resume, partitions left offline."""

    resume: dict[TopicPartition, Log] = field(default_factory=dict)
    offline: set[TopicPartition] = field(default_factory=set)


class LogLoader:
    """Loads one broker's directories into the LogManager's tables (see module docstring)."""

    def __init__(
        self,
        dirs: Mapping[str, LogDir],
        failures: LogDirFailureChannel,
        *,
        settings: StorageSettings,
        clock: Clock,
        schedule_delete: ScheduleDelete,
    ) -> None:
        self._dirs = dirs
        self._failures = failures
        self._settings = settings
        self._clock = clock
        self._schedule_delete = schedule_delete

    def open_dirs(self, *, cluster_id: str, node_id: int) -> None:
        """Check every directory's identity against the others and this broker, write what is
        missing, take the locks. A directory that cannot be used goes offline."""
        metas: dict[str, MetaProperties | None] = {}
        for path in self._dirs:
            try:
                os.makedirs(path, exist_ok=True)
                if not os.path.isdir(path):
                    raise NotADirectoryError(20, "not a directory", path)
                os.listdir(path)
                metas[path] = read_meta(path)
            except OSError as exc:
                self._failures.mark_offline(path, exc)
        if not metas:
            raise StorageStartupError(
                "no log directory is usable: "
                + "; ".join(f"{p}: offline" for p in self._failures.offline_dirs)
            )
        ensemble = complete_ensemble(metas, cluster_id=cluster_id, node_id=node_id)
        for path, meta in ensemble.items():
            d = self._dirs[path]
            d.directory_id = meta.directory_id
            try:
                with self._failures.guard(path, "writing meta.properties and locking"):
                    if metas[path] != meta:
                        write_meta(path, meta)
                    d.acquire_lock()
            except KafkaStorageError:
                continue

    def load_replicas(self, logs: dict[TopicPartition, Log]) -> dict[TopicPartition, Log]:
        """Load every online directory's replicas: live ones into ``logs``, future ones
        returned. A directory that fails while loading goes offline; the others load."""
        futures: dict[TopicPartition, Log] = {}
        for path, d in self._dirs.items():
            if self._failures.is_offline(path):
                continue
            try:
                self._load_dir(d, logs, futures)
            except KafkaStorageError as exc:
                log.error("log directory %s failed while loading: %s", path, exc)
        return futures

    def _load_dir(
        self, d: LogDir, logs: dict[TopicPartition, Log], futures: dict[TopicPartition, Log]
    ) -> None:
        """Load every replica directory in ``d``; a failure takes ``d`` offline."""
        path = d.path
        loaded: list[tuple[TopicPartition, Log]] = []
        with self._failures.guard(path, "loading"):
            checkpoints = _DirCheckpoints(
                clean=d.had_clean_shutdown(),
                recovery=read_checkpoint(d.file(RECOVERY_POINT)),
                starts=read_checkpoint(d.file(LOG_START_OFFSET)),
                hws=read_checkpoint(d.file(REPLICATION_OFFSET)),
                names=sorted(os.listdir(path)),
            )
        try:
            self._load_replicas(d, checkpoints, loaded)
        except BaseException:
            for _, lg in loaded:
                lg.close()
            raise
        with self._failures.guard(path, "clearing the clean-shutdown marker"):
            d.clear_clean_shutdown()
        for tp, lg in loaded:
            table = futures if lg.is_future else logs
            other = table.get(tp)
            if other is not None and not lg.is_future:
                kept = self._superseding(other, lg)
                if kept is not None:
                    table[tp] = kept
                    continue
            if other is not None:
                kind = "future replicas" if lg.is_future else "live replicas"
                raise StorageStartupError(
                    f"two {kind} of partition {tp}: {other.dir_path} and {lg.dir_path}; "
                    f"remove one before starting"
                )
            table[tp] = lg

    def _rehomed_at(self, lg: Log) -> int:
        """The re-homing stamp of a live replica, 0 if it has none."""
        stamp = os.path.join(lg.dir_path, REHOMED_FILE)
        with self._failures.guard(lg.logdir_path, f"reading {stamp}"):
            if not os.path.exists(stamp):
                return 0
            with open(stamp, encoding="utf-8") as f:
                text = f.read().strip()
        return int(text) if text.isdigit() else 0

    def _superseding(self, a: Log, b: Log) -> Log | None:
        """Of two live copies of one partition, the one re-homed later, the other renamed
        ``-stray`` (kept, never loaded); None when neither was re-homed after the other."""
        at_a, at_b = self._rehomed_at(a), self._rehomed_at(b)
        if at_a == at_b:
            return None
        kept, stale = (a, b) if at_a > at_b else (b, a)
        stray = os.path.join(stale.logdir_path, suffixed_dir_name(stale.tp, STRAY_SUFFIX))
        stale.close()
        with self._failures.guard(stale.logdir_path, f"setting {stale.dir_path} aside"):
            os.rename(stale.dir_path, stray)
        log.warning(
            "%s: %s was re-created live for the copy in %s, which is set aside as %s",
            kept.tp,
            kept.dir_path,
            stale.logdir_path,
            stray,
        )
        return kept

    def _load_replicas(
        self, d: LogDir, checkpoints: _DirCheckpoints, loaded: list[tuple[TopicPartition, Log]]
    ) -> None:
        """Load the replica directories of ``d`` into ``loaded``; schedule ``-delete`` ones for
        deletion; skip ``-stray`` and anything that is not a replica."""
        path = d.path
        for name in checkpoints.names:
            full = os.path.join(path, name)
            if not os.path.isdir(full):
                continue
            parsed = parse_dir_name(name)
            if parsed is None:
                continue
            tp, kind = parsed
            topic_file = os.path.join(full, TOPIC_FILE)
            if kind == FUTURE_SUFFIX and os.path.exists(topic_file):
                with self._failures.guard(path, f"reading {topic_file}"), open(topic_file) as f:
                    tp = TopicPartition(f.read().strip(), tp.partition)
            if kind == DELETE_SUFFIX:
                self._schedule_delete(full, path)
                continue
            if kind not in ("", FUTURE_SUFFIX):
                continue
            replica = load_log(
                tp,
                full,
                path,
                settings=self._settings,
                clock=self._clock,
                failures=self._failures,
                is_future=kind == FUTURE_SUFFIX,
                recovery_point=checkpoints.recovery.get(tp, 0),
                log_start_offset=checkpoints.starts.get(tp),
                high_watermark=checkpoints.hws.get(tp),
                clean=checkpoints.clean,
            )
            loaded.append((tp, replica))

    def recover_moves(
        self, logs: dict[TopicPartition, Log], futures: Mapping[TopicPartition, Log]
    ) -> RecoveredMoves:
        """Seed 000's rules for future replicas found at start-up: live + future → resume the
        move; only the future (no directory offline) → promote it to the live replica (into
        ``logs``); otherwise the live replica may be on an offline directory → touch nothing,
        the partition stays offline."""
        out = RecoveredMoves()
        any_offline = bool(self._failures.offline_dirs)
        for tp, fut in sorted(futures.items()):
            live = logs.get(tp)
            if live is not None and not self._failures.is_offline(live.logdir_path):
                out.resume[tp] = fut
            elif live is None and not any_offline and self._promote(tp, fut):
                logs[tp] = fut
            else:
                fut.close()
                out.offline.add(tp)
        return out

    def _promote(self, tp: TopicPartition, fut: Log) -> bool:
        """Rename a future replica whose live replica is gone into the live name."""
        target = os.path.join(fut.logdir_path, partition_dir_name(tp))
        try:
            with self._failures.guard(fut.logdir_path, f"promoting future log of {tp}"):
                os.rename(fut.dir_path, target)
                fsync_dir(fut.logdir_path)
        except KafkaStorageError:
            return False
        fut.rename_dir(target)
        fut.is_future = False
        log.info("promoted the future replica of %s in %s", tp, fut.logdir_path)
        return True


def load_log(
    tp: TopicPartition,
    dir_path: str,
    logdir_path: str,
    *,
    settings: StorageSettings,
    clock: Clock,
    failures: LogDirFailureChannel,
    is_future: bool,
    recovery_point: int,
    log_start_offset: int | None,
    high_watermark: int | None,
    clean: bool,
) -> Log:
    """Load an existing replica; after an unclean shutdown re-validate from the recovery
    point (CRC included), cut a torn tail and drop any segment after it."""
    with failures.guard(logdir_path, f"loading log {dir_path}"):
        segments = _recover_segments(
            dir_path,
            settings=settings,
            now_ms=clock.wall_ms(),
            recovery_point=recovery_point,
            clean=clean,
        )
        if not segments:
            segments.append(
                Segment.create(
                    dir_path,
                    max(log_start_offset or 0, recovery_point),
                    index_interval_bytes=settings.log_index_interval_bytes,
                    created_ms=clock.wall_ms(),
                )
            )
        epochs = _load_epochs(dir_path, segments, recovery_point=recovery_point, clean=clean)
    return Log.from_segments(
        tp,
        dir_path,
        logdir_path,
        segments,
        settings=settings,
        clock=clock,
        failures=failures,
        is_future=is_future,
        log_start_offset=log_start_offset,
        high_watermark=high_watermark,
        epochs=epochs,
    )


def _load_epochs(
    dir_path: str, segments: list[Segment], *, recovery_point: int, clean: bool
) -> LeaderEpochCache:
    """A replica's leader-epoch cache (``OSError`` on a disk or format error): its checkpoint,
    plus the epochs of batches written after the checkpoint's last write could have been lost
    (past the recovery point, after an unclean shutdown), as Kafka's segment recovery does.
    Without the file (a replica written before Spindle kept epochs) it is rebuilt from every
    batch header once. ``Log.from_segments`` then cuts it to the log's offsets."""
    path = os.path.join(dir_path, LEADER_EPOCH_CHECKPOINT)
    try:
        with open(path, encoding="utf-8") as f:
            cache = LeaderEpochCache.parse(f.read(), path=path)
        scan_from = None if clean else recovery_point
    except FileNotFoundError:
        cache, scan_from = LeaderEpochCache(), 0
    if scan_from is not None:
        cache.start_epochs(_batch_epochs(segments, scan_from))
    return cache


def _batch_epochs(segments: list[Segment], from_offset: int) -> Iterator[tuple[int, int]]:
    """(partitionLeaderEpoch, base offset) of every stored batch ending at or after
    ``from_offset``, reading only the batches' first 16 bytes."""
    for seg in segments:
        if seg.next_offset <= from_offset:
            continue
        position, _ = seg.find_position(from_offset)
        while position is not None and position + _EPOCH_PREFIX.size <= seg.size:
            base, length, epoch = _EPOCH_PREFIX.unpack(seg.pread(position, _EPOCH_PREFIX.size))
            yield epoch, base
            position += length + LOG_OVERHEAD


def _recover_segments(
    dir_path: str, *, settings: StorageSettings, now_ms: int, recovery_point: int, clean: bool
) -> list[Segment]:
    """The segments of one replica directory (``OSError`` on a disk error). Leftover
    ``.tmp``/``.cleaned``/``.swap`` files are removed; segments from the one holding the
    recovery point on are re-validated after an unclean shutdown; everything after a torn
    tail is unreachable and deleted, as Kafka does."""
    bases = sorted(
        int(name[: -len(LOG_SUFFIX)])
        for name in os.listdir(dir_path)
        if name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit()
    )
    for name in os.listdir(dir_path):
        if name.endswith((".tmp", ".cleaned", ".swap")):
            os.unlink(os.path.join(dir_path, name))
    segments: list[Segment] = []
    truncated_at: int | None = None
    for i, base in enumerate(bases):
        if truncated_at is not None:
            Segment(dir_path, base, index_interval_bytes=0, created_ms=now_ms).delete()
            continue
        next_base = bases[i + 1] if i + 1 < len(bases) else 1 << 62
        seg, cut = Segment.load(
            dir_path,
            base,
            index_interval_bytes=settings.log_index_interval_bytes,
            recover=not clean and next_base > recovery_point,
            now_ms=now_ms,
        )
        segments.append(seg)
        if cut:
            truncated_at = seg.next_offset
    return segments
