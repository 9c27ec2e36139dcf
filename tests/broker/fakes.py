"""Fakes shared by the broker's unit tests: time that moves only when a test moves it."""

from __future__ import annotations

import threading


class FakeClock:
    """Manually advanced time; ``sleep`` advances it (no real waiting). Thread-safe: storage
    threads (movers, throttles) sleep on it too."""

    def __init__(self, wall_ms: int = 1_700_000_000_000) -> None:
        self._wall_ms = wall_ms
        self._mono = 1000.0
        self._lock = threading.Lock()

    def wall_ms(self) -> int:
        return self._wall_ms

    def monotonic(self) -> float:
        return self._mono

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._mono += seconds
            self._wall_ms += int(seconds * 1000)
