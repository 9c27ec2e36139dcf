"""The LogManager: every log directory of one broker, and every replica in them.

It owns the tables of live and future replicas, placement of new replicas, the reaction to a
failed directory (KIP-112), moves between directories (KIP-113, run by
:mod:`spindle.broker.storage.mover`), DescribeLogDirs data and the clean shutdown. Start-up
(``meta.properties``, locks, loading replicas, recovery, repair of interrupted moves) is the
:mod:`~spindle.broker.storage.loader`'s; checkpoints, retention and deferred deletes are the
:mod:`~spindle.broker.storage.housekeeping`'s.

Placement rule for a new replica: the directory preset by ``change_replica_dir`` if it is
online; otherwise, among online directories, those holding the fewest replicas (Kafka's rule),
and of those the one with the most usable bytes (so a nearly full disk is not chosen just
because it holds fewer, bigger partitions); ties go to the first in ``log.dirs`` order.

Thread-safe. Locks, in the order they may be taken: the admin lock (serializes
change_replica_dir/delete_log), a partition lock, the manager lock (maps only, held briefly).
The failure handler runs on the failure channel's one thread and takes the manager lock; a
thread that hits an I/O error waits for it unless that thread holds the manager lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable

from spindle.broker.common.clock import Clock, SystemClock
from spindle.broker.common.errors import ErrorCode, KafkaError, KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.storage.checkpoint import fsync_dir
from spindle.broker.storage.descriptions import (
    DirLoad,
    LogDirDescription,
    MoveStatus,
    choose_log_dir,
    describe_replicas,
)
from spindle.broker.storage.failure import LogDirFailureChannel, OwnedLock
from spindle.broker.storage.housekeeping import ALL_CHECKPOINTS, Housekeeper
from spindle.broker.storage.loader import LogLoader
from spindle.broker.storage.log import Log
from spindle.broker.storage.logdir import LogDir, StorageStartupError
from spindle.broker.storage.mover import MoveJob, ReplicaMover, StepHook
from spindle.broker.storage.names import (
    DELETE_SUFFIX,
    FUTURE_SUFFIX,
    REHOMED_FILE,
    partition_dir_name,
    suffixed_dir_name,
)
from spindle.broker.storage.settings import StorageSettings
from spindle.broker.storage.throttle import Throttle

log = logging.getLogger(__name__)

OfflineListener = Callable[[str], None]
MoveListener = Callable[[TopicPartition, str], None]


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
        self._lock = OwnedLock()
        self.failures = LogDirFailureChannel(
            self._on_dir_failure, may_wait=lambda: not self._lock.owned()
        )
        self._dirs: dict[str, LogDir] = {p: LogDir(p) for p in settings.log_dirs}
        self._admin_lock = threading.Lock()
        self._logs: dict[TopicPartition, Log] = {}
        self._futures: dict[TopicPartition, Log] = {}
        self._preferred: dict[TopicPartition, str] = {}
        self._cordoned: frozenset[str] = frozenset()
        self._offline_partitions: set[TopicPartition] = set()
        self._listeners: list[OfflineListener] = []
        self._move_listeners: list[MoveListener] = []
        self._throttle = Throttle(
            settings.replica_alter_log_dirs_io_max_bytes_per_second, clock=clock
        )
        self._hook = hook
        self._mover: ReplicaMover | None = None
        self._housekeeper = Housekeeper(self)
        self._stop = threading.Event()
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
        loader = LogLoader(
            self._dirs,
            self.failures,
            settings=self.settings,
            clock=self.clock,
            schedule_delete=self.schedule_delete,
        )
        loader.open_dirs(cluster_id=self.cluster_id, node_id=self.node_id)
        futures = loader.load_replicas(self._logs)
        if not self.online_dirs:
            raise StorageStartupError("every log directory failed during start-up")
        self._mover = ReplicaMover(
            self,
            threads=self.settings.mover_threads,
            throttle=self._throttle,
            clock=self.clock,
            hook=self._hook,
        )
        recovered = loader.recover_moves(self._logs, futures)
        self._offline_partitions |= recovered.offline
        for tp, fut in sorted(recovered.resume.items()):
            self._futures[tp] = fut
            self._mover.submit(MoveJob(tp, fut, resumed=True))
        self._housekeeper.start(background=background)
        # Failures found while starting have been handled before anyone can listen.
        self.failures.wait_handled()

    def _abort(self) -> None:
        self._stop.set()
        self._housekeeper.stop()
        if self._mover is not None:
            self._mover.shutdown()
        self._housekeeper.stop_deleter()
        for lg in [*self._logs.values(), *self._futures.values()]:
            lg.close()
        for d in self._dirs.values():
            d.release_lock()
        self.failures.close()

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
        counts = {p: 0 for p in self.online_dirs if p not in self._cordoned}
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
        if dest in self._cordoned and self._logs_dir(tp) != dest:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT  # KIP-1066: no new replicas there
        with self._admin_lock:
            for _ in range(3):
                code = self._change_dir_once(tp, dest)
                if code is not None:
                    return code
            return ErrorCode.REASSIGNMENT_IN_PROGRESS

    def _change_dir_once(self, tp: TopicPartition, dest: str) -> ErrorCode | None:
        """One attempt of :meth:`change_replica_dir` (admin lock held); None when a move
        finished while it was being cancelled, so the caller looks again."""
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
                return None  # the move finished meanwhile; look again
            with self._lock:
                self._preferred.pop(tp, None)
            return ErrorCode.NONE
        if fut is not None and fut.logdir_path == dest:
            return ErrorCode.NONE
        if self.failures.offline_dirs:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if fut is not None and not self._cancel_move(tp):
            return None
        return self._start_move(tp, dest)

    def recreate_offline_replica(self, tp: TopicPartition, dest_path: str) -> ErrorCode:
        """Spindle extension of AlterReplicaLogDirs for a replica in an offline directory: a new,
        empty replica in ``dest_path`` (online, not cordoned) that the replica layer refetches
        from the leader -- live, where Kafka waits for a restart (KIP-858 LOST). The old files
        stay (nothing touches an offline directory); the new replica is stamped
        (``REHOMED_FILE``) so that it wins over them at a restart (loader). Idempotent.
        LOG_DIR_NOT_FOUND; KAFKA_STORAGE_ERROR (destination offline or holding such a
        directory already); INVALID_REPLICA_ASSIGNMENT (cordoned); REPLICA_NOT_AVAILABLE (not
        offline here)."""
        dest = os.path.normpath(dest_path) if dest_path else dest_path
        if dest not in self._dirs:
            return ErrorCode.LOG_DIR_NOT_FOUND
        target = os.path.join(dest, partition_dir_name(tp))
        with self._admin_lock:
            if not self.is_partition_offline(tp):
                here = self._logs_dir(tp) == dest
                return ErrorCode.NONE if here else ErrorCode.REPLICA_NOT_AVAILABLE
            if self.failures.is_offline(dest) or os.path.lexists(target):
                return ErrorCode.KAFKA_STORAGE_ERROR
            if dest in self._cordoned:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT
            try:
                fresh = Log.create(
                    tp,
                    target,
                    dest,
                    settings=self.settings,
                    clock=self.clock,
                    failures=self.failures,
                )
                stamp = os.path.join(target, REHOMED_FILE)
                with self.failures.guard(dest, f"writing {stamp}"), open(stamp, "w") as f:
                    f.write(f"{self.clock.wall_ms()}\n")
            except KafkaError as exc:
                return exc.code
            with self._lock:
                old = self._logs.pop(tp, None)
                self._logs[tp] = fresh
                self._offline_partitions.discard(tp)
                self._preferred.pop(tp, None)
        if old is not None:
            with contextlib.suppress(Exception):  # its files sit on the failed disk
                old.close()
        return ErrorCode.NONE

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

    def set_cordoned(self, paths: Iterable[str]) -> None:
        """KIP-1066 ``cordoned.log.dirs``: configured directories that take no new replicas
        (placement skips them; moves into them are refused). Unknown paths are ignored."""
        self._cordoned = frozenset(os.path.normpath(p) for p in paths) & frozenset(self._dirs)

    @property
    def cordoned_dirs(self) -> frozenset[str]:
        return self._cordoned

    def _logs_dir(self, tp: TopicPartition) -> str | None:
        with self._lock:
            lg = self._logs.get(tp)
            return lg.logdir_path if lg is not None else None

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
        copying = self._copying()
        out = []
        for tp, live, fut in pairs:
            if live is None:
                continue
            out.append(
                MoveStatus(
                    tp=tp,
                    source=live.logdir_path,
                    destination=fut.logdir_path,
                    bytes_copied=max(fut.size, copying.get(tp, 0)),
                    bytes_total=live.size,
                    offset_lag=max(live.log_end_offset - fut.log_end_offset, 0),
                )
            )
        return out

    def _copying(self) -> dict[TopicPartition, int]:
        """Bytes each running move has copied into its future replica (its mover's count)."""
        jobs = self._mover.jobs() if self._mover is not None else []
        return {job.tp: job.bytes_copied for job in jobs}

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
            if not moving and mover_idle and not self._housekeeper.deletes_pending():
                return True
            self._stop.wait(0.01)
        return False

    # --- failure handling (KIP-112) --------------------------------------------------------

    def add_offline_listener(self, listener: OfflineListener) -> None:
        """``listener(path)`` is called once per directory going offline, on the failure
        channel's handler thread (after the storage engine has reacted)."""
        self._listeners.append(listener)

    def _on_dir_failure(self, path: str, cause: BaseException) -> None:
        """The one handler, run once per failed directory on the failure channel's thread:
        under the manager lock, stop moves touching ``path`` and drop its future replicas
        from memory (files stay); then release its lock and tell the listeners. Replicas
        there fail every operation from now on because the channel reports it offline."""
        d = self._dirs.get(path)
        if d is None:
            return
        with self._lock:
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
        copying = self._copying()
        out: list[LogDirDescription] = []
        for path, d in self._dirs.items():
            if wanted is not None and path not in wanted:
                continue
            usage = None
            if not self.failures.is_offline(path):
                with contextlib.suppress(KafkaStorageError):
                    usage = self._disk_usage(path)
            if usage is None:
                error = ErrorCode.KAFKA_STORAGE_ERROR
                out.append(LogDirDescription(path, d.directory_id, error, -1, -1))
                continue
            here = [(lg, f) for lg, f in replicas if lg.logdir_path == path]
            parts = describe_replicas(here, lives, topics, copying)
            out.append(LogDirDescription(path, d.directory_id, ErrorCode.NONE, *usage, parts))
        return out

    # --- checkpoints, retention, deletes (the housekeeper's) -------------------------------

    def replicas_in_dir(self, path: str) -> list[Log]:
        """The live replicas in ``path``, then the future ones (a snapshot)."""
        with self._lock:
            logs = [lg for lg in self._logs.values() if lg.logdir_path == path]
            futures = [lg for lg in self._futures.values() if lg.logdir_path == path]
        return [*logs, *futures]

    def log_dir(self, path: str) -> LogDir:
        return self._dirs[path]

    def checkpoint_dir(
        self, path: str, *, missing_ok: bool = False, files: Collection[str] = ALL_CHECKPOINTS
    ) -> None:
        """Write checkpoint ``files`` of ``path`` (default all three) from memory."""
        self._housekeeper.checkpoint_dir(path, missing_ok=missing_ok, files=files)

    def checkpoint_all(self, files: Collection[str]) -> None:
        """Write checkpoint ``files`` in every online directory (errors take it offline)."""
        self._housekeeper.checkpoint_all(files)

    def flush_and_checkpoint(self) -> None:
        """Flush every log, then checkpoint every online directory (errors go offline)."""
        self._housekeeper.flush_and_checkpoint()

    def run_retention(self) -> int:
        return self._housekeeper.run_retention()

    def run_housekeeping(self) -> None:
        """Run whatever periodic task is due by the injected clock (retention, checkpoints)."""
        self._housekeeper.run()

    def schedule_delete(self, path: str, logdir_path: str) -> None:
        """Delete a ``-delete`` directory after ``file.delete.delay.ms``, on the deleter thread."""
        self._housekeeper.schedule_delete(path, logdir_path)

    # --- shutdown --------------------------------------------------------------------------

    def close(self) -> None:
        """Clean shutdown: stop movers (futures stay and resume at the next start), flush,
        checkpoint, write the clean-shutdown marker in every directory that is still fine."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._housekeeper.stop()
        if self._mover is not None:
            self._mover.shutdown()
        self._housekeeper.stop_deleter()
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
        self.failures.close()

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
