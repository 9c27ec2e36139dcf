"""The one failure channel for disk I/O (KIP-112; Kafka's ``LogDirFailureChannel``).

Every disk operation of the storage engine runs inside :meth:`LogDirFailureChannel.guard` with
the log directory it touches. An ``OSError`` there marks that directory offline exactly once,
puts it on the channel's queue, and is re-raised as ``KafkaStorageError`` so the protocol layer
answers KAFKA_STORAGE_ERROR. Later operations on an offline directory fail at once, without
touching the disk: offline stays offline until the broker restarts.

One thread, ``log-dir-failure-handler``, drains the queue and runs the single handler (the
LogManager's) once per directory, as Kafka's ``ReplicaManager.LogDirFailureHandler`` does; the
handler can therefore take the locks it needs, whatever thread hit the error. The thread that
hit it waits until the handler has run, so whoever sees the error sees the storage engine's
reaction (moves stopped, listeners told); it does not wait when ``may_wait`` says it holds a
lock the handler needs, nor on the handler's own thread.

Thread-safe: appends, readers, movers and the housekeeping thread all report here.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType

from spindle.broker.common.errors import KafkaStorageError

log = logging.getLogger(__name__)

Handler = Callable[[str, BaseException], None]

HANDLER_WAIT_S = 60.0
"""How long a thread that hit an error waits for the handler before going on (logged)."""

_WRITE_SIDE_ERRNOS = {
    errno.ENOSPC,
    errno.EROFS,
    errno.EDQUOT,
    errno.EFBIG,
    errno.EACCES,
    errno.EPERM,
    errno.ENOTDIR,
    errno.ENOENT,
}


def copy_failure_dir(
    exc: OSError, dest_logdir: str, source_logdir: str, src_fd: int, src_pos: int
) -> str:
    """Which directory a failed copy between two of them is blamed on: write-side errors
    (full, read-only, permissions) on the destination; otherwise a one-byte read of the
    source decides."""
    if exc.errno in _WRITE_SIDE_ERRNOS:
        return dest_logdir
    try:
        os.pread(src_fd, 1, src_pos)
    except OSError:
        return source_logdir
    return dest_logdir


class LogDirFailureChannel:
    """Offline state of every log directory, the guard that changes it, and the queue of
    directories whose failure the handler has yet to handle (see module docstring)."""

    def __init__(
        self, handler: Handler | None = None, *, may_wait: Callable[[], bool] | None = None
    ) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}
        self._handled: dict[str, threading.Event] = {}
        self._handler = handler
        self._may_wait = may_wait
        self._queue: queue.SimpleQueue[tuple[str, BaseException] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        if handler is not None:
            self._thread = threading.Thread(
                target=self._drain, name="log-dir-failure-handler", daemon=True
            )
            self._thread.start()

    def is_offline(self, dir_path: str) -> bool:
        return dir_path in self._offline

    @property
    def offline_dirs(self) -> list[str]:
        with self._lock:
            return sorted(self._offline)

    def check(self, dir_path: str) -> None:
        """Raise ``KafkaStorageError`` if ``dir_path`` is offline (no disk access), once its
        failure has been handled (if this thread may wait for that)."""
        reason = self._offline.get(dir_path)
        if reason is not None:
            self._wait(dir_path, self._handled[dir_path])
            raise KafkaStorageError(f"log directory {dir_path} is offline: {reason}")

    def mark_offline(self, dir_path: str, cause: BaseException) -> bool:
        """Take ``dir_path`` offline; True the first time only (its failure is queued for the
        handler then). Returns once the handler has run, if this thread may wait for it."""
        with self._lock:
            first = dir_path not in self._offline
            if first:
                # The event first: ``check`` reads ``_offline`` without the lock.
                self._handled[dir_path] = threading.Event()
                self._offline[dir_path] = f"{type(cause).__name__}: {cause}"
            handled = self._handled[dir_path]
        if first:
            log.error("log directory %s is offline after an I/O error: %s", dir_path, cause)
            if self._thread is None:
                handled.set()
            else:
                self._queue.put((dir_path, cause))
        self._wait(dir_path, handled)
        return first

    def _wait(self, dir_path: str, handled: threading.Event) -> None:
        if handled.is_set() or threading.current_thread() is self._thread:
            return
        if self._may_wait is not None and not self._may_wait():
            return
        if not handled.wait(HANDLER_WAIT_S):
            log.error("the failure of %s was not handled within %.0f s", dir_path, HANDLER_WAIT_S)

    def wait_handled(self, timeout: float | None = None) -> bool:
        """Wait until every directory taken offline so far has been handled; True if so."""
        with self._lock:
            events = list(self._handled.values())
        return all(e.wait(timeout) for e in events)

    def _drain(self) -> None:
        assert self._handler is not None
        while True:
            item = self._queue.get()
            if item is None:
                return
            dir_path, cause = item
            try:
                self._handler(dir_path, cause)
            except Exception:
                log.exception("the failure handler of %s failed", dir_path)
            finally:
                self._handled[dir_path].set()

    def close(self) -> None:
        """Handle what is queued, then stop the handler thread (idempotent)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            if thread is not threading.current_thread():
                thread.join()

    @contextmanager
    def guard(self, dir_path: str, what: str) -> Iterator[None]:
        """Run one disk operation on ``dir_path``; ``what`` names it in the error."""
        self.check(dir_path)
        try:
            yield
        except OSError as exc:
            self.mark_offline(dir_path, exc)
            raise KafkaStorageError(
                f"{what} failed in log directory {dir_path}: {exc}; the directory is now offline"
            ) from exc


class OwnedLock:
    """A re-entrant lock that knows whether the calling thread holds it (the LogManager's):
    a thread holding the lock the handler needs must not wait for the handler."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._owner: int | None = None
        self._depth = 0

    def __enter__(self) -> None:
        self._lock.acquire()
        self._owner = threading.get_ident()
        self._depth += 1

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
        self._lock.release()

    def owned(self) -> bool:
        """True if the calling thread holds the lock."""
        return self._owner == threading.get_ident()
