"""One global byte-rate throttle shared by all replica movers (Kafka's
``replica.alter.log.dirs.io.max.bytes.per.second``, changeable at run time).

Each copy reserves its bytes on a single time line: a reservation starts when the previous one
ends (or now, if the line is idle) and lasts ``bytes / rate``; the caller waits until its start.
Over any window the copied bytes are thus ``rate * window`` plus at most one chunk, which is why
movers copy in chunks of about 1/20 s of the rate when throttled.

Thread-safe. Time comes from the injected clock.
"""

from __future__ import annotations

import threading

from spindle.broker.common.clock import Clock

UNLIMITED = (1 << 63) - 1
_MAX_CHUNK = 8 << 20
_MIN_CHUNK = 64 << 10


class Throttle:
    """Shared reservation line for mover I/O (see module docstring)."""

    def __init__(self, bytes_per_second: int, *, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._rate = bytes_per_second
        self._next = 0.0

    @property
    def rate(self) -> int:
        return self._rate

    def set_rate(self, bytes_per_second: int) -> None:
        """Change the rate now; reservations made at the old rate do not carry over."""
        if bytes_per_second <= 0:
            raise ValueError(f"throttle must be a positive bytes/second, got {bytes_per_second}")
        with self._lock:
            self._rate = bytes_per_second
            self._next = min(self._next, self._clock.monotonic())

    def chunk_size(self) -> int:
        """How many bytes one copy step should move at the current rate."""
        rate = self._rate
        if rate >= UNLIMITED:
            return _MAX_CHUNK
        return max(_MIN_CHUNK, min(_MAX_CHUNK, rate // 20))

    def reserve(self, nbytes: int) -> float:
        """Book ``nbytes``; returns how long the caller must wait before copying them."""
        with self._lock:
            if self._rate >= UNLIMITED:
                return 0.0
            now = self._clock.monotonic()
            start = max(self._next, now)
            self._next = start + nbytes / self._rate
            return start - now

    def acquire(self, nbytes: int, cancelled: threading.Event | None = None) -> bool:
        """Wait for ``nbytes`` of budget; False if ``cancelled`` was set while waiting."""
        wait = self.reserve(nbytes)
        deadline = self._clock.monotonic() + wait
        while wait > 0:
            if cancelled is not None and cancelled.is_set():
                return False
            self._clock.sleep(min(wait, 0.05))
            wait = deadline - self._clock.monotonic()
        return not (cancelled is not None and cancelled.is_set())
