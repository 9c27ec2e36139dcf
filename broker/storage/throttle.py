"""One global byte-rate throttle shared by all replica movers (Kafka's
``replica.alter.log.dirs.io.max.bytes.per.second``, changeable at run time).

Each copy reserves its bytes on a single time line: a reservation starts when the previous one
ends (or now, if the line is idle) and lasts ``bytes / rate``; the caller waits until its start.
Over any window the copied bytes are thus ``rate * window`` plus at most one chunk, which is why
movers copy in chunks of about 1/20 s of the rate when throttled.

Unthrottled, a copy step is sized by time instead (:func:`unthrottled_step`): each step costs
the event loop's thread a hand-over of the GIL and the copying thread some Python between two
system calls, so fast disks get few large steps, while a slow disk keeps steps short enough
for a cancel or a rate change to take effect promptly.

Thread-safe. Time comes from the injected clock.
"""

from __future__ import annotations

import threading

from spindle.broker.common.clock import Clock

UNLIMITED = (1 << 63) - 1
_MAX_CHUNK = 8 << 20
_MIN_CHUNK = 64 << 10

STEP_MIN = 8 << 20
"""Smallest (and first) unthrottled copy step: the fixed step before steps were sized by time."""
STEP_MAX = 64 << 20
"""Largest unthrottled copy step. ``bench/move.py --size-gb 1 --append-rounds 5`` (appends
during a move over appends without one, median of 5, quiet 2-core machine), by fixed step
size: 8 MiB 0.839-0.857, 32 MiB 0.867, 64 MiB 0.876-0.884, 128 MiB 0.879, 256 MiB 0.866,
1 GiB 0.889-0.896; beyond 64 MiB nothing is gained, and a step's write-back starts only when
it is whole (1 GiB steps slowed the move to 0.96x a plain copy)."""
STEP_SECONDS = 0.05
"""What an unthrottled step should take: 64 MiB steps at page-cache speed (~2-3 GB/s) take
20-30 ms; a disk at 200 MB/s gets ~10 MiB steps."""


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

    def chunk_size(self, unthrottled: int = STEP_MIN) -> int:
        """How many bytes one copy step should move at the current rate; ``unthrottled``
        (the caller's :func:`unthrottled_step`) when there is no limit."""
        rate = self._rate
        if rate >= UNLIMITED:
            return unthrottled
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


def unthrottled_step(copied: int, seconds: float) -> int:
    """The next unthrottled step after one that copied ``copied`` bytes in ``seconds``: what
    takes about :data:`STEP_SECONDS` at that pace, between :data:`STEP_MIN` and
    :data:`STEP_MAX`."""
    if seconds <= 0:
        return STEP_MAX
    return max(STEP_MIN, min(STEP_MAX, int(copied * STEP_SECONDS / seconds)))
