"""The LogManager: every log directory of one broker, and every replica in them.

It owns start-up (``meta.properties``, locks, loading live/``-future``/``-delete`` replicas,
recovery after an unclean shutdown, repair of interrupted moves), placement of new replicas,
the reaction to a failed directory (KIP-112), moves between directories (KIP-113, run by
:mod:`spindle.broker.storage.mover`), DescribeLogDirs data, checkpoints, retention and the
clean-shutdown marker.

Placement rule for a new replica: the directory preset by ``change_replica_dir`` if it is
online; otherwise, among online directories, those holding the fewest replicas (Kafka's rule),
and of those the one with the most usable bytes (so a nearly full disk is not chosen just
because it holds fewer, bigger partitions); ties go to the first in ``log.dirs`` order.

Thread-safe. Locks, in the order they may be taken: the admin lock (serializes
change_replica_dir/delete_log), a partition lock, the manager lock (maps only, held briefly).
The failure handler takes no lock that a disk operation might hold, so it can run on whichever
thread hit the error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from spindle.broker.common.clock import Clock, SystemClock
from spindle.broker.common.errors import ErrorCode, KafkaError, KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.storage.checkpoint import (
    LOG_START_OFFSET,
    RECOVERY_POINT,
    REPLICATION_OFFSET,
    format_checkpoint,
    fsync_dir,
    read_checkpoint,
    write_all_atomically,
)
from spindle.broker.storage.failure import LogDirFailureChannel
from spindle.broker.storage.log import (
    DELETE_SUFFIX,
    FUTURE_SUFFIX,
    TOPIC_FILE,
    Log,
    parse_dir_name,
    partition_dir_name,
    suffixed_dir_name,
)
from spindle.broker.storage.logdir import (
    LogDir,
    MetaProperties,
    StorageStartupError,
    complete_ensemble,
    read_meta,
    write_meta,
)
from spindle.broker.storage.mover import MoveJob, ReplicaMover, StepHook
from spindle.broker.storage.settings import StorageSettings
from spindle.broker.storage.throttle import Throttle

log = logging.getLogger(__name__)

OfflineListener = Callable[[str], None]
MoveListener = Callable[[TopicPartition, str], None]


@dataclass(frozen=True, slots=True)
class MoveStatus:
    """Progress of one replica move between log directories."""

    tp: TopicPartition
    source: str
    destination: str
    bytes_copied: int
    bytes_total: int
    offset_lag: int


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One replica in a DescribeLogDirs answer."""

    tp: TopicPartition
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log directory in a DescribeLogDirs (v4) answer; offline → error, -1 bytes."""

    path: str
    directory_id: uuid.UUID | None
    error: ErrorCode
    total_bytes: int
    usable_bytes: int
    partitions: list[PartitionDescription] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DirLoad:
    """What the placement rule knows about one online directory."""

    path: str
    replicas: int
    usable_bytes: int


def choose_log_dir(candidates: list[DirLoad]) -> str:
    """Placement (pure): fewest replicas, then most usable bytes, then configuration order."""
    if not candidates:
        raise KafkaStorageError("no online log directory to place a replica in")
    best = min(enumerate(candidates), key=lambda ic: (ic[1].replicas, -ic[1].usable_bytes, ic[0]))
    return best[1].path


class LogManager:
    """All log directories and replicas of one broker (see module docstring)."""

    def __init__(
        self,
        settings: StorageSettings,
        *,
        cluster_id: str,
        node_id: int,
        clock: Clock,
        hook: StepHook | None,
    ) -> None:
        self.settings = settings
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.clock = clock
        self.failures = LogDirFailureChannel(self._on_dir_failure)
        self._dirs: dict[str, LogDir] = {p: LogDir(p) for p in settings.log_dirs}
        self._lock = threading.RLock()
        self._admin_lock = threading.Lock()
        self._logs: dict[TopicPartition, Log] = {}
        self._futures: dict[TopicPartition, Log] = {}
        self._preferred: dict[TopicPartition, str] = {}
        self._offline_partitions: set[TopicPartition] = set()
        self._listeners: list[OfflineListener] = []
        self._move_listeners: list[MoveListener] = []
        self._throttle = Throttle(
            settings.replica_alter_log_dirs_io_max_bytes_per_second, clock=clock
        )
        self._hook = hook
        self._mover: ReplicaMover | None = None
        self._deleter = _Deleter(self)
        self._stop = threading.Event()
        self._housekeeper: threading.Thread | None = None
        self._last_run: dict[str, float] = {}
        self._closed = False

    # --- start-up --------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        settings: StorageSettings,
        *,
        cluster_id: str,
        node_id: int,
        clock: Clock = SystemClock(),  # noqa: B008 - stateless
        hook: StepHook | None = None,
        background: bool = True,
    ) -> LogManager:
        """Start the storage engine over ``settings.log_dirs``.

        ``hook`` is called at each mover step (crash tests); ``background`` runs retention and
        checkpoints on a housekeeping thread (tests call :meth:`run_housekeeping` instead).
        Raises ``StorageStartupError`` when the directories cannot be used together or none
        is usable.
        """
        lm = cls(settings, cluster_id=cluster_id, node_id=node_id, clock=clock, hook=hook)
        try:
            lm._start(background=background)
        except BaseException:
            lm._abort()
            raise
        return lm

    def _start(self, *, background: bool) -> None:
        metas: dict[str, MetaProperties | None] = {}
        for path in self._dirs:
            try:
                os.makedirs(path, exist_ok=True)
                if not os.path.isdir(path):
                    raise NotADirectoryError(20, "not a directory", path)
                os.listdir(path)
                metas[path] = read_meta(path)
            except OSError as exc:
                self.failures.mark_offline(path, exc)
        if not metas:
            raise StorageStartupError(
                "no log directory is usable: "
                + "; ".join(f"{p}: offline" for p in self.failures.offline_dirs)
            )
        ensemble = complete_ensemble(metas, cluster_id=self.cluster_id, node_id=self.node_id)
        for path, meta in ensemble.items():
            d = self._dirs[path]
            d.directory_id = meta.directory_id
            try:
                with self.failures.guard(path, "writing meta.properties and locking"):
                    if metas[path] != meta:
                        write_meta(path, meta)
                    d.acquire_lock()
            except KafkaStorageError:
                continue
        futures: dict[TopicPartition, Log] = {}
        for path, d in self._dirs.items():
            if self.failures.is_offline(path):
                continue
            try:
                self._load_dir(d, futures)
            except KafkaStorageError as exc:
                log.error("log directory %s failed while loading: %s", path, exc)
        if not self.online_dirs:
            raise StorageStartupError("every log directory failed during start-up")
        self._mover = ReplicaMover(
            self,
            threads=self.settings.mover_threads,
            throttle=self._throttle,
            clock=self.clock,
            hook=self._hook,
        )
        self._recover_moves(futures)
        self._deleter.start()
        if background:
            self._housekeeper = threading.Thread(
                target=self._housekeeping_loop, name="log-housekeeping", daemon=True
            )
            self._housekeeper.start()

    def _load_dir(self, d: LogDir, futures: dict[TopicPartition, Log]) -> None:
        """Load every replica directory in ``d``; a failure takes ``d`` offline."""
        path = d.path
        loaded: list[tuple[TopicPartition, Log]] = []
        with self.failures.guard(path, "loading"):
            clean = d.had_clean_shutdown()
            recovery = read_checkpoint(d.file(RECOVERY_POINT))
            starts = read_checkpoint(d.file(LOG_START_OFFSET))
            hws = read_checkpoint(d.file(REPLICATION_OFFSET))
            names = sorted(os.listdir(path))
        try:
            self._load_replicas(d, names, recovery, starts, hws, clean, loaded)
        except BaseException:
            for _, lg in loaded:
                lg.close()
            raise
        with self.failures.guard(path, "clearing the clean-shutdown marker"):
            d.clear_clean_shutdown()
        for tp, lg in loaded:
            table = futures if lg.is_future else self._logs
            other = table.get(tp)
            if other is not None:
                kind = "future replicas" if lg.is_future else "live replicas"
                raise StorageStartupError(
                    f"two {kind} of partition {tp}: {other.dir_path} and {lg.dir_path}; "
                    f"remove one before starting"
                )
            table[tp] = lg

    def _load_replicas(
        self,
        d: LogDir,
        names: list[str],
        recovery: dict[TopicPartition, int],
        starts: dict[TopicPartition, int],
        hws: dict[TopicPartition, int],
        clean: bool,
        loaded: list[tuple[TopicPartition, Log]],
    ) -> None:
        """Load the replica directories among ``names`` into ``loaded``; schedule ``-delete``
        ones for deletion; skip ``-stray`` and anything that is not a replica."""
        path = d.path
        for name in names:
            full = os.path.join(path, name)
            if not os.path.isdir(full):
                continue
            parsed = parse_dir_name(name)
            if parsed is None:
                continue
            tp, kind = parsed
            topic_file = os.path.join(full, TOPIC_FILE)
            if kind == FUTURE_SUFFIX and os.path.exists(topic_file):
                with self.failures.guard(path, f"reading {topic_file}"), open(topic_file) as f:
                    tp = TopicPartition(f.read().strip(), tp.partition)
            if kind == DELETE_SUFFIX:
                self.schedule_delete(full, path)
                continue
            if kind not in ("", FUTURE_SUFFIX):
                continue
            loaded.append(
                (
                    tp,
                    Log.load(
                        tp,
                        full,
                        path,
                        settings=self.settings,
                        clock=self.clock,
                        failures=self.failures,
                        is_future=kind == FUTURE_SUFFIX,
                        recovery_point=recovery.get(tp, 0),
                        log_start_offset=starts.get(tp),
                        high_watermark=hws.get(tp),
                        clean=clean,
                    ),
                )
            )

    def _recover_moves(self, futures: dict[TopicPartition, Log]) -> None:
        """Seed 000's rules for future replicas found at start-up."""
        assert self._mover is not None
        any_offline = bool(self.failures.offline_dirs)
        for tp, fut in sorted(futures.items()):
            live = self._logs.get(tp)
            if live is not None and not self.failures.is_offline(live.logdir_path):
                self._futures[tp] = fut
                self._mover.submit(MoveJob(tp, fut, resumed=True))
            elif live is None and not any_offline:
                target = os.path.join(fut.logdir_path, partition_dir_name(tp))
                try:
                    with self.failures.guard(fut.logdir_path, f"promoting future log of {tp}"):
                        os.rename(fut.dir_path, target)
                        fsync_dir(fut.logdir_path)
                except KafkaStorageError:
                    fut.close()
                    self._offline_partitions.add(tp)
                    continue
                fut.rename_dir(target)
                fut.is_future = False
                self._logs[tp] = fut
                log.info("promoted the future replica of %s in %s", tp, fut.logdir_path)
            else:
                # The live replica may be on the offline directory: touch nothing.
                fut.close()
                self._offline_partitions.add(tp)

    def _abort(self) -> None:
        self._stop.set()
        if self._mover is not None:
            self._mover.shutdown()
        self._deleter.stop()
        for lg in [*self._logs.values(), *self._futures.values()]:
            lg.close()
        for d in self._dirs.values():
            d.release_lock()

    # --- replicas --------------------------------------------------------------------------

    @property
    def online_dirs(self) -> list[str]:
        return [p for p in self._dirs if not self.failures.is_offline(p)]

    @property
    def offline_dirs(self) -> list[str]:
        return [p for p in self._dirs if self.failures.is_offline(p)]

    def get_log(self, tp: TopicPartition) -> Log | None:
        with self._lock:
            return self._logs.get(tp)

    def get_future_log(self, tp: TopicPartition) -> Log | None:
        with self._lock:
            return self._futures.get(tp)

    def logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def is_partition_offline(self, tp: TopicPartition) -> bool:
        with self._lock:
            if tp in self._offline_partitions:
                return True
            lg = self._logs.get(tp)
        return lg is not None and self.failures.is_offline(lg.logdir_path)

    def get_or_create_log(self, tp: TopicPartition, *, is_new: bool = True) -> Log:
        """The replica of ``tp``, created by the placement rule if absent.

        ``is_new=False`` (a replica that should already exist) refuses while any directory is
        offline, since it may be on that directory (Kafka's rule).
        """
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            if tp in self._offline_partitions:
                raise KafkaStorageError(f"partition {tp} is offline: its log directory failed")
            offline = self.offline_dirs
            if not is_new and offline:
                raise KafkaStorageError(
                    f"cannot create log for {tp}: log directories {', '.join(offline)} are "
                    f"offline and may hold it"
                )
            path = self._preferred.pop(tp, None)
            if path is None or self.failures.is_offline(path):
                path = self._place()
            lg = Log.create(
                tp,
                os.path.join(path, partition_dir_name(tp)),
                path,
                settings=self.settings,
                clock=self.clock,
                failures=self.failures,
            )
            self._logs[tp] = lg
            return lg

    def _place(self) -> str:
        counts = {p: 0 for p in self.online_dirs}
        for lg in [*self._logs.values(), *self._futures.values()]:
            if lg.logdir_path in counts:
                counts[lg.logdir_path] += 1
        loads = []
        for p, n in counts.items():
            try:
                loads.append(DirLoad(p, n, self._disk_usage(p)[1]))
            except KafkaStorageError:
                continue
        return choose_log_dir(loads)

    def _disk_usage(self, path: str) -> tuple[int, int]:
        with self.failures.guard(path, "statvfs"):
            st = os.statvfs(path)
        return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize

    def delete_log(self, tp: TopicPartition) -> bool:
        """Remove the replica of ``tp`` (and any future replica): renamed to ``-delete`` now,
        deleted asynchronously. False if it is not hosted here."""
        with self._admin_lock:
            self._cancel_move(tp)
            with self._lock:
                lg = self._logs.pop(tp, None)
                self._preferred.pop(tp, None)
            if lg is None:
                return False
            self._discard(lg)
            return True

    def _discard(self, lg: Log) -> None:
        """Rename ``lg`` to ``-delete`` and schedule the delete (files stay if its dir is
        offline: nothing touches an offline directory)."""
        with lg.lock:
            lg.close()
            if self.failures.is_offline(lg.logdir_path):
                return
            target = os.path.join(lg.logdir_path, suffixed_dir_name(lg.tp, DELETE_SUFFIX))
            with self.failures.guard(lg.logdir_path, f"renaming {lg.dir_path} for deletion"):
                os.rename(lg.dir_path, target)
                fsync_dir(lg.logdir_path)
            lg.rename_dir(target)
        self.schedule_delete(target, lg.logdir_path)

    # --- moves (AlterReplicaLogDirs) -------------------------------------------------------

    def change_replica_dir(self, tp: TopicPartition, dest_path: str) -> ErrorCode:
        """Start moving ``tp`` to the log directory ``dest_path``; Kafka's error table:

        LOG_DIR_NOT_FOUND (not a configured directory), KAFKA_STORAGE_ERROR (destination or
        partition offline; any directory offline when a move would start),
        REPLICA_NOT_AVAILABLE (not hosted here: the destination is remembered for when it is
        created), NONE (moving, already moving there, or already there: any other move of it
        is cancelled). Unknown topics are the metadata layer's to report.
        """
        dest = os.path.normpath(dest_path) if dest_path else dest_path
        if dest not in self._dirs:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if self.failures.is_offline(dest):
            return ErrorCode.KAFKA_STORAGE_ERROR
        with self._admin_lock:
            for _ in range(3):
                with self._lock:
                    lg = self._logs.get(tp)
                    if lg is None:
                        if tp in self._offline_partitions:
                            return ErrorCode.KAFKA_STORAGE_ERROR
                        self._preferred[tp] = dest
                        return ErrorCode.REPLICA_NOT_AVAILABLE
                    if self.failures.is_offline(lg.logdir_path):
                        return ErrorCode.KAFKA_STORAGE_ERROR
                    fut = self._futures.get(tp)
                if lg.logdir_path == dest:
                    if fut is not None and not self._cancel_move(tp):
                        continue  # the move finished meanwhile; look again
                    with self._lock:
                        self._preferred.pop(tp, None)
                    return ErrorCode.NONE
                if fut is not None and fut.logdir_path == dest:
                    return ErrorCode.NONE
                if self.failures.offline_dirs:
                    return ErrorCode.KAFKA_STORAGE_ERROR
                if fut is not None and not self._cancel_move(tp):
                    continue
                return self._start_move(tp, dest)
            return ErrorCode.REASSIGNMENT_IN_PROGRESS

    def _start_move(self, tp: TopicPartition, dest: str) -> ErrorCode:
        assert self._mover is not None
        try:
            fut = Log.create(
                tp,
                os.path.join(dest, suffixed_dir_name(tp, FUTURE_SUFFIX)),
                dest,
                settings=self.settings,
                clock=self.clock,
                failures=self.failures,
                is_future=True,
            )
        except KafkaError as exc:
            return exc.code
        with self._lock:
            self._futures[tp] = fut
        self._mover.submit(MoveJob(tp, fut))
        return ErrorCode.NONE

    def _cancel_move(self, tp: TopicPartition) -> bool:
        """Stop the move of ``tp`` and delete its future; False if it completed meanwhile."""
        assert self._mover is not None
        job = self._mover.job(tp)
        if job is not None:
            self._mover.detach(job)
            if job.swapped:
                return False
        with self._lock:
            fut = self._futures.pop(tp, None)
        if fut is not None:
            try:
                self._discard(fut)
            except KafkaStorageError as exc:
                log.warning("could not delete the future log of %s: %s", tp, exc)
        return True

    def begin_swap(self, job: MoveJob) -> bool:
        """Mover: claim the swap unless the move was cancelled (partition lock held)."""
        with self._lock:
            if job.cancel.is_set() or self._futures.get(job.tp) is not job.future:
                return False
            job.swapping = True
            return True

    def end_swap(self, job: MoveJob) -> None:
        with self._lock:
            job.swapping = False
            if job.swapped and self._futures.get(job.tp) is job.future:
                del self._futures[job.tp]

    def set_alter_log_dirs_throttle(self, bytes_per_sec: int | None) -> None:
        """Dynamic ``replica.alter.log.dirs.io.max.bytes.per.second``; None = unlimited."""
        self._throttle.set_rate(bytes_per_sec or (1 << 63) - 1)

    def moves_in_progress(self) -> list[TopicPartition]:
        with self._lock:
            return sorted(self._futures)

    def move_status(self) -> list[MoveStatus]:
        """Every running move with its progress (metrics, the operator's Reassignment status)."""
        with self._lock:
            pairs = [(tp, self._logs.get(tp), fut) for tp, fut in sorted(self._futures.items())]
        out = []
        for tp, live, fut in pairs:
            if live is None:
                continue
            out.append(
                MoveStatus(
                    tp=tp,
                    source=live.logdir_path,
                    destination=fut.logdir_path,
                    bytes_copied=fut.size,
                    bytes_total=live.size,
                    offset_lag=max(live.log_end_offset - fut.log_end_offset, 0),
                )
            )
        return out

    def add_move_listener(self, listener: MoveListener) -> None:
        """``listener(tp, new_log_dir)`` after each completed move (on the mover thread): the
        broker reports the replica's new directory to the controller (AssignReplicasToDirs)."""
        self._move_listeners.append(listener)

    def moved(self, tp: TopicPartition, new_log_dir: str) -> None:
        """Mover: a swap completed."""
        for listener in list(self._move_listeners):
            try:
                listener(tp, new_log_dir)
            except Exception:
                log.exception("move listener failed for %s", tp)

    def await_idle(self, timeout: float = 60.0) -> bool:
        """Wait (real time) until no move runs and no delete is pending; True if so."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                moving = bool(self._futures)
            mover_idle = self._mover is None or self._mover.idle()
            if not moving and mover_idle and self._deleter.idle():
                return True
            self._stop.wait(0.01)
        return False

    # --- failure handling (KIP-112) --------------------------------------------------------

    def add_offline_listener(self, listener: OfflineListener) -> None:
        """``listener(path)`` is called once per directory going offline, on the thread that
        hit the error (after the storage engine has reacted)."""
        self._listeners.append(listener)

    def _on_dir_failure(self, path: str, cause: BaseException) -> None:
        """The one handler: stop moves touching ``path``, drop its future replicas from memory
        (files stay), release its lock, tell the listeners. Replicas there fail every
        operation from now on because the channel reports the directory offline."""
        d = self._dirs.get(path)
        if d is None:
            return
        mover = self._mover
        for tp, fut in list(self._futures.items()):
            live = self._logs.get(tp)
            touches = fut.logdir_path == path or (live is not None and live.logdir_path == path)
            if not touches:
                continue
            if mover is not None:
                job = mover.job(tp)
                if job is not None:
                    mover.signal_stop(job)
            self._futures.pop(tp, None)
        d.release_lock()
        for listener in list(self._listeners):
            try:
                listener(path)
            except Exception:
                log.exception("offline listener failed for %s", path)

    @property
    def offline_log_directory_count(self) -> int:
        return len(self.offline_dirs)

    @property
    def offline_replica_count(self) -> int:
        with self._lock:
            logs = list(self._logs.values())
            extra = len(self._offline_partitions)
        return extra + sum(1 for lg in logs if self.failures.is_offline(lg.logdir_path))

    # --- DescribeLogDirs -------------------------------------------------------------------

    def describe_dirs(
        self,
        dirs: Collection[str] | None = None,
        topics: Collection[TopicPartition] | None = None,
    ) -> list[LogDirDescription]:
        """Per directory (configuration order; ``dirs`` filters, None = all): error, id,
        bytes and the replicas of ``topics`` (None = all) with size, offset lag, is_future."""
        wanted = {os.path.normpath(p) for p in dirs} if dirs is not None else None
        with self._lock:
            replicas = [(lg, False) for lg in self._logs.values()]
            replicas += [(lg, True) for lg in self._futures.values()]
            lives = dict(self._logs)
        out: list[LogDirDescription] = []
        for path, d in self._dirs.items():
            if wanted is not None and path not in wanted:
                continue
            if not self.failures.is_offline(path):
                try:
                    total, usable = self._disk_usage(path)
                except KafkaStorageError:
                    pass
                else:
                    parts = []
                    for lg, is_future in replicas:
                        if lg.logdir_path != path or (topics is not None and lg.tp not in topics):
                            continue
                        leo = lg.log_end_offset
                        if is_future:
                            live = lives.get(lg.tp)
                            lag = max((live.log_end_offset if live else leo) - leo, 0)
                        else:
                            lag = max(lg.high_watermark - leo, 0)
                        parts.append(PartitionDescription(lg.tp, lg.size, lag, is_future))
                    parts.sort(key=lambda p: (p.tp, p.is_future))
                    out.append(
                        LogDirDescription(
                            path, d.directory_id, ErrorCode.NONE, total, usable, parts
                        )
                    )
                    continue
            out.append(
                LogDirDescription(path, d.directory_id, ErrorCode.KAFKA_STORAGE_ERROR, -1, -1)
            )
        return out

    # --- checkpoints, retention, housekeeping ----------------------------------------------

    def checkpoint_dir(
        self,
        path: str,
        *,
        missing_ok: bool = False,
        files: Collection[str] = (RECOVERY_POINT, LOG_START_OFFSET, REPLICATION_OFFSET),
    ) -> None:
        """Write checkpoint ``files`` of ``path`` (default all three) from memory."""
        if self.failures.is_offline(path):
            if missing_ok:
                return
            self.failures.check(path)
        with self._lock:
            logs = [lg for lg in self._logs.values() if lg.logdir_path == path]
            futures = [lg for lg in self._futures.values() if lg.logdir_path == path]
        # A future replica about to be swapped in carries the live log's offsets with it.
        replicas = [*logs, *futures]
        values = {
            RECOVERY_POINT: {lg.tp: lg.recovery_point for lg in replicas},
            LOG_START_OFFSET: {lg.tp: lg.log_start_offset for lg in replicas},
            REPLICATION_OFFSET: {lg.tp: lg.high_watermark for lg in replicas},
        }
        d = self._dirs[path]
        # One writer per directory: movers, housekeeping and shutdown all checkpoint, and two
        # writers sharing one .tmp file would rename each other's file away.
        with d.checkpoint_lock, self.failures.guard(path, "writing checkpoints"):
            write_all_atomically({d.file(n): format_checkpoint(values[n]) for n in files})

    def checkpoint_all(self, files: Collection[str]) -> None:
        """Write checkpoint ``files`` in every online directory (errors take it offline)."""
        for path in self.online_dirs:
            with contextlib.suppress(KafkaStorageError):
                self.checkpoint_dir(path, files=files)

    def flush_and_checkpoint(self) -> None:
        """Flush every log, then checkpoint every online directory (errors go offline)."""
        for lg in list(self.logs().values()):
            try:
                lg.flush()
            except KafkaStorageError:
                continue
        for path in self.online_dirs:
            try:
                self.checkpoint_dir(path)
            except KafkaStorageError:
                continue

    def run_retention(self) -> int:
        deleted = 0
        for lg in list(self.logs().values()):
            try:
                deleted += lg.apply_retention()
            except KafkaStorageError:
                continue
        return deleted

    def run_housekeeping(self) -> None:
        """Run whatever periodic task is due by the injected clock (retention, checkpoints)."""
        now = self.clock.wall_ms()
        s = self.settings
        if self._due("retention", now, s.log_retention_check_interval_ms):
            self.run_retention()
        # Recovery points only move when data is flushed, so that task flushes first; the
        # other two checkpoints just record offsets held in memory.
        if self._due("recovery", now, s.log_flush_offset_checkpoint_interval_ms):
            self.flush_and_checkpoint()
        if self._due("log-start", now, s.log_flush_start_offset_checkpoint_interval_ms):
            self.checkpoint_all([LOG_START_OFFSET])
        if self._due("high-watermark", now, s.replica_high_watermark_checkpoint_interval_ms):
            self.checkpoint_all([REPLICATION_OFFSET])

    def _due(self, task: str, now: int, interval_ms: int) -> bool:
        last = self._last_run.setdefault(task, now)
        if now - last >= interval_ms:
            self._last_run[task] = now
            return True
        return False

    def _housekeeping_loop(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self.run_housekeeping()
            except Exception:
                log.exception("housekeeping failed")

    def schedule_delete(self, path: str, logdir_path: str) -> None:
        """Delete a ``-delete`` directory after ``file.delete.delay.ms``, on the deleter thread."""
        self._deleter.add(path, logdir_path, self.settings.file_delete_delay_ms / 1000)

    # --- shutdown --------------------------------------------------------------------------

    def close(self) -> None:
        """Clean shutdown: stop movers (futures stay and resume at the next start), flush,
        checkpoint, write the clean-shutdown marker in every directory that is still fine."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._housekeeper is not None:
            self._housekeeper.join()
        if self._mover is not None:
            self._mover.shutdown()
        self._deleter.stop()
        with self._lock:
            replicas = [*self._logs.values(), *self._futures.values()]
        for lg in replicas:
            with contextlib.suppress(KafkaStorageError):
                lg.flush()
        for path, d in self._dirs.items():
            if self.failures.is_offline(path):
                continue
            try:
                self.checkpoint_dir(path)
                with self.failures.guard(path, "writing the clean-shutdown marker"):
                    d.mark_clean_shutdown()
            except KafkaStorageError:
                pass
        for lg in replicas:
            lg.close()
        for d in self._dirs.values():
            d.release_lock()

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Deleter:
    """One thread removing ``-delete`` directories once their delay has passed."""

    def __init__(self, manager: LogManager) -> None:
        self._manager = manager
        self._cond = threading.Condition()
        self._queue: list[tuple[float, str, str]] = []
        self._busy = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="log-deleter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, path: str, logdir_path: str, delay_s: float) -> None:
        with self._cond:
            self._queue.append((self._manager.clock.monotonic() + delay_s, path, logdir_path))
            self._queue.sort()
            self._cond.notify_all()

    def idle(self) -> bool:
        with self._cond:
            return not self._queue and not self._busy

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        clock = self._manager.clock
        failures = self._manager.failures
        while True:
            with self._cond:
                while not self._stopped:
                    if self._queue and self._queue[0][0] <= clock.monotonic():
                        break
                    self._cond.wait(0.05)
                if self._stopped:
                    return
                _, path, logdir_path = self._queue.pop(0)
                self._busy = True
            try:
                if not failures.is_offline(logdir_path):
                    with (
                        failures.guard(logdir_path, f"deleting {path}"),
                        contextlib.suppress(FileNotFoundError),
                    ):
                        shutil.rmtree(path)
            except KafkaStorageError as exc:
                log.warning("%s", exc)
            except Exception:
                log.exception("deleting %s failed", path)
            finally:
                with self._cond:
                    self._busy = False
