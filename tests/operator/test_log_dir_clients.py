"""The operator's kept broker connections (``brokers.LogDirClients``): a call that fails is
retried on a new connection -- also when the failure is a ``ClusterAdmin`` call's
``BrokerError``, which a connection with stale cluster metadata keeps raising (a unit test:
the Kafka client is faked at its constructor, the boundary; the retry logic is real)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from spindle.operator import brokers
from spindle.operator.decisions.volume_state import BrokerUnreachable


class FakeAdmin:
    opened: ClassVar[list[FakeAdmin]] = []

    def __init__(self, **config: Any) -> None:
        self.config = config
        self.closed = False
        FakeAdmin.opened.append(self)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> brokers.LogDirClients:
    FakeAdmin.opened = []
    monkeypatch.setattr(brokers, "KafkaAdminClient", FakeAdmin)
    monkeypatch.setattr(brokers, "PROBE_BACKOFF_S", (0.0, 0.0))
    return brokers.LogDirClients()


def test_a_broker_error_is_retried_on_a_new_connection(clients: brokers.LogDirClients) -> None:
    seen: list[FakeAdmin] = []

    def view(client: Any) -> str:
        seen.append(client)
        if len(seen) == 1:
            raise brokers.BrokerError(
                "DescribeLogDirs on cluster demo failed: UnknownBrokerIdError"
            )
        return "view"

    assert clients._call(["b:9092"], "the view of cluster demo", view) == "view"
    first, second = seen
    assert first is not second
    assert first.closed
    assert not second.closed


def test_a_call_failing_every_time_names_what_and_why(clients: brokers.LogDirClients) -> None:
    def view(client: Any) -> str:
        raise brokers.BrokerError("UnknownBrokerIdError: 1")

    with pytest.raises(BrokerUnreachable, match=r"the view .* failed after 3 tries: BrokerError"):
        clients._call(["b:9092"], "the view of cluster demo", view)
    assert len(FakeAdmin.opened) == 3
