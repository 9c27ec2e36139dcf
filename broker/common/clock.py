"""Injected time: code asks a ``Clock`` rather than the ``time`` module, so tests can fake it."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall and monotonic time, in the units Kafka uses."""

    def wall_ms(self) -> int:
        """Milliseconds since the epoch (record timestamps, segment roll by time)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (timeouts, throttles)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread (movers and throttles run in threads)."""
        ...


class SystemClock:
    """The real clock."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
