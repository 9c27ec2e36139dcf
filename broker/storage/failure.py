"""The one failure channel for disk I/O (KIP-112; Kafka's ``LogDirFailureChannel``).

Every disk operation of the storage engine runs inside :meth:`LogDirFailureChannel.guard` with
the log directory it touches. An ``OSError`` there marks that directory offline exactly once,
calls the single handler (the LogManager's), and is re-raised as ``KafkaStorageError`` so the
protocol layer answers KAFKA_STORAGE_ERROR. Later operations on an offline directory fail at
once, without touching the disk: offline stays offline until the broker restarts.

Thread-safe: appends, readers, movers and the housekeeping thread all report here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from spindle.broker.common.errors import KafkaStorageError

log = logging.getLogger(__name__)


class LogDirFailureChannel:
    """Offline state of every log directory, and the guard that changes it."""

    def __init__(self, handler: Callable[[str, BaseException], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}
        self._handler = handler

    def set_handler(self, handler: Callable[[str, BaseException], None]) -> None:
        self._handler = handler

    def is_offline(self, dir_path: str) -> bool:
        return dir_path in self._offline

    @property
    def offline_dirs(self) -> list[str]:
        with self._lock:
            return sorted(self._offline)

    def check(self, dir_path: str) -> None:
        """Raise ``KafkaStorageError`` if ``dir_path`` is offline (no disk access)."""
        reason = self._offline.get(dir_path)
        if reason is not None:
            raise KafkaStorageError(f"log directory {dir_path} is offline: {reason}")

    def mark_offline(self, dir_path: str, cause: BaseException) -> bool:
        """Take ``dir_path`` offline; True the first time only (the handler runs then)."""
        with self._lock:
            if dir_path in self._offline:
                return False
            self._offline[dir_path] = f"{type(cause).__name__}: {cause}"
        log.error("log directory %s is offline after an I/O error: %s", dir_path, cause)
        if self._handler is not None:
            self._handler(dir_path, cause)
        return True

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
