"""Fixtures for the storage tests: a fake clock, settings over tmp dirs, managers that close."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from spindle.broker.storage import LogManager, StorageSettings

from ..fakes import FakeClock

__all__ = ["FakeClock", "crash", "make_settings"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def dirs(tmp_path: Path) -> list[str]:
    return [str(tmp_path / f"disk{i}") for i in range(3)]


def make_settings(dirs: list[str], **overrides: Any) -> StorageSettings:
    values: dict[str, Any] = {"log.dirs": dirs, "file.delete.delay.ms": 0}
    values.update(overrides)
    return StorageSettings.model_validate(values)


@pytest.fixture
def open_manager() -> Iterator[Callable[..., LogManager]]:
    """``open_manager(dirs, **settings)`` → a LogManager closed (cleanly) at teardown."""
    opened: list[LogManager] = []

    def factory(
        dirs: list[str], *, clock: Any = None, hook: Any = None, **overrides: Any
    ) -> LogManager:
        kwargs: dict[str, Any] = {"cluster_id": "test-cluster", "node_id": 1, "background": False}
        if clock is not None:
            kwargs["clock"] = clock
        if hook is not None:
            kwargs["hook"] = hook
        lm = LogManager.open(make_settings(dirs, **overrides), **kwargs)
        opened.append(lm)
        return lm

    yield factory
    for lm in opened:
        lm.close()


def crash(lm: LogManager) -> None:
    """Drop a manager as a crash would: no flush, no checkpoint, no clean-shutdown marker."""
    lm._abort()
    lm._closed = True
