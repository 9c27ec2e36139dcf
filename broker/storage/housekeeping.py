"""Periodic and deferred storage work: checkpoints, retention and deletion (the scheduled-task
half of Kafka's ``LogManager``).

- **Checkpoints.** Each directory's ``recovery-point-offset-checkpoint``,
  ``log-start-offset-checkpoint`` and ``replication-offset-checkpoint`` are written from memory,
  one writer per directory at a time, atomically (all three files renamed into place). The
  periodic recovery-point checkpoint only records where each log has been flushed (its rolled
  segments, below; by the mover before a swap; at shutdown); it flushes nothing itself, as Kafka's
  ``checkpointLogRecoveryOffsets`` does not: fsyncing every log's tail every minute held each
  partition's lock (which appends on the event loop wait for) for a journal commit per file,
  tens to hundreds of milliseconds under load, and made the page cache's write-back the
  broker's own. After a crash, start-up re-validates whatever lies past the recovery point.
- **Rolled segments.** Every tick, each log's segments rolled since its last flush are
  flushed (``Log.flush_rolled``: the data without the partition lock, then the index files
  under it) and its recovery point moves to the active segment; Kafka schedules the same flush
  when a segment rolls. The append that rolls no longer waits for it on the event loop.
- **Retention.** Segments past ``log.retention.ms``/``log.retention.bytes`` are deleted.
- **Schedule.** :meth:`Housekeeper.run` runs whichever task is due by the injected clock;
  with ``background`` a ``log-housekeeping`` thread calls it twice a second, otherwise tests
  call it themselves.
- **Deletion.** ``-delete`` directories are removed by one ``log-deleter`` thread once
  ``file.delete.delay.ms`` has passed, never in an offline directory.

Thread-safe: movers, the housekeeping thread and shutdown all checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
from collections.abc import Collection
from typing import TYPE_CHECKING

from spindle.broker.common.errors import KafkaStorageError
from spindle.broker.storage.checkpoint import (
    LOG_START_OFFSET,
    RECOVERY_POINT,
    REPLICATION_OFFSET,
    format_checkpoint,
    write_all_atomically,
)

if TYPE_CHECKING:
    from spindle.broker.storage.manager import LogManager

log = logging.getLogger(__name__)

ALL_CHECKPOINTS = (RECOVERY_POINT, LOG_START_OFFSET, REPLICATION_OFFSET)
HOUSEKEEPING_TICK_S = 0.5


class Housekeeper:
    """Checkpoints, retention and the deleter of one LogManager (see module docstring)."""

    def __init__(self, manager: LogManager) -> None:
        self._manager = manager
        self._deleter = _Deleter(manager)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_run: dict[str, float] = {}

    def start(self, *, background: bool) -> None:
        self._deleter.start()
        if background:
            self._thread = threading.Thread(target=self._loop, name="log-housekeeping", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the housekeeping thread (after the task it may be running)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def stop_deleter(self) -> None:
        """Stop the deleter; deletes not done yet stay on disk and are redone at start-up."""
        self._deleter.stop()

    def deletes_pending(self) -> bool:
        return not self._deleter.idle()

    # --- checkpoints -----------------------------------------------------------------------

    def checkpoint_dir(
        self, path: str, *, missing_ok: bool = False, files: Collection[str] = ALL_CHECKPOINTS
    ) -> None:
        """Write checkpoint ``files`` of ``path`` (default all three) from memory."""
        manager = self._manager
        failures = manager.failures
        if failures.is_offline(path):
            if missing_ok:
                return
            failures.check(path)
        # A future replica about to be swapped in carries the live log's offsets with it.
        replicas = manager.replicas_in_dir(path)
        values = {
            RECOVERY_POINT: {lg.tp: lg.recovery_point for lg in replicas},
            LOG_START_OFFSET: {lg.tp: lg.log_start_offset for lg in replicas},
            REPLICATION_OFFSET: {lg.tp: lg.high_watermark for lg in replicas},
        }
        d = manager.log_dir(path)
        # One writer per directory: movers, housekeeping and shutdown all checkpoint, and two
        # writers sharing one .tmp file would rename each other's file away.
        with d.checkpoint_lock, failures.guard(path, "writing checkpoints"):
            write_all_atomically({d.file(n): format_checkpoint(values[n]) for n in files})

    def checkpoint_all(self, files: Collection[str]) -> None:
        """Write checkpoint ``files`` in every online directory (errors take it offline)."""
        for path in self._manager.online_dirs:
            with contextlib.suppress(KafkaStorageError):
                self.checkpoint_dir(path, files=files)

    def flush_and_checkpoint(self) -> None:
        """Flush every log, then checkpoint every online directory (errors go offline)."""
        for lg in list(self._manager.logs().values()):
            with contextlib.suppress(KafkaStorageError):
                lg.flush()
        for path in self._manager.online_dirs:
            with contextlib.suppress(KafkaStorageError):
                self.checkpoint_dir(path)

    def flush_rolled(self) -> None:
        """Flush every log's segments rolled since its last flush (errors go offline)."""
        for lg in list(self._manager.logs().values()):
            with contextlib.suppress(KafkaStorageError):
                lg.flush_rolled()

    # --- retention and the schedule --------------------------------------------------------

    def run_retention(self) -> int:
        deleted = 0
        for lg in list(self._manager.logs().values()):
            try:
                deleted += lg.apply_retention()
            except KafkaStorageError:
                continue
        return deleted

    def run(self) -> None:
        """Run whatever periodic task is due by the injected clock (retention, checkpoints)."""
        now = self._manager.clock.wall_ms()
        s = self._manager.settings
        self.flush_rolled()
        if self._due("retention", now, s.log_retention_check_interval_ms):
            self.run_retention()
        # Each records offsets held in memory (module docstring: no flush here).
        if self._due("recovery", now, s.log_flush_offset_checkpoint_interval_ms):
            self.checkpoint_all([RECOVERY_POINT])
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

    def _loop(self) -> None:
        while not self._stop.wait(HOUSEKEEPING_TICK_S):
            try:
                self.run()
            except Exception:
                log.exception("housekeeping failed")

    # --- deletion --------------------------------------------------------------------------

    def schedule_delete(self, path: str, logdir_path: str) -> None:
        """Delete a ``-delete`` directory after ``file.delete.delay.ms``, on the deleter thread."""
        self._deleter.add(path, logdir_path, self._manager.settings.file_delete_delay_ms / 1000)


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

    def _next(self) -> tuple[str, str] | None:
        """The next due delete (waiting for it), or None once stopped."""
        clock = self._manager.clock
        with self._cond:
            while not self._stopped:
                if self._queue and self._queue[0][0] <= clock.monotonic():
                    break
                # Queued: look again every 50 ms (the clock may be a test's, which no real
                # wait follows). Nothing queued: sleep until add() or stop(); a thread waking
                # 20 times a second takes the GIL from the event loop 20 times a second.
                self._cond.wait(0.05 if self._queue else None)
            if self._stopped:
                return None
            _, path, logdir_path = self._queue.pop(0)
            self._busy = True
            return path, logdir_path

    def _run(self) -> None:
        failures = self._manager.failures
        while (due := self._next()) is not None:
            path, logdir_path = due
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
