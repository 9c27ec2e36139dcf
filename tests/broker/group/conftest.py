"""Fixtures for the group coordinator's unit tests: fake time and an in-memory offsets log."""

from __future__ import annotations

from typing import Any

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.group.coordinator import GroupCoordinator
from spindle.broker.group.settings import GroupSettings

from ..fakes import FakeClock

__all__ = ["FakeClock", "MemoryLog", "make_coordinator"]


class MemoryLog:
    """An OffsetsLog in memory: records per partition, optionally failing appends."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        self.fail_with: ErrorCode | None = None

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        if self.fail_with is not None:
            raise KafkaError("injected append failure", self.fail_with)
        self.partitions.setdefault(partition, []).extend(records)

    def read_all(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        return list(self.partitions.get(partition, []))


def make_coordinator(store: MemoryLog, clock: FakeClock, **settings: Any) -> GroupCoordinator:
    values: dict[str, Any] = {
        "group.initial.rebalance.delay.ms": 0,
        "group.min.session.timeout.ms": 1000,
        "offsets.topic.num.partitions": 4,
    }
    values.update(settings)
    coord = GroupCoordinator(
        settings=GroupSettings.model_validate(values), clock=clock, store=store
    )
    return coord


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store() -> MemoryLog:
    return MemoryLog()


@pytest.fixture
async def coord(store: MemoryLog, clock: FakeClock) -> GroupCoordinator:
    c = make_coordinator(store, clock)
    for p in range(4):
        await c.load(p)
    return c
