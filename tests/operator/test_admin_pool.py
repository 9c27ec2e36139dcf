"""The operator's one Kafka admin port keeps its broker connections (``brokers.AdminPool``):
a call that fails is retried on a new connection -- also when the failure is an ``Admin``
call's ``BrokerError``, which a connection with stale cluster metadata keeps raising (a unit
test: the Kafka client is faked at its constructor, the boundary; the retry logic is real)."""

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
def clients(monkeypatch: pytest.MonkeyPatch) -> brokers.AdminPool:
    FakeAdmin.opened = []
    monkeypatch.setattr(brokers, "KafkaAdminClient", FakeAdmin)
    monkeypatch.setattr(brokers, "PROBE_BACKOFF_S", (0.0, 0.0))
    return brokers.AdminPool()


def test_a_broker_error_is_retried_on_a_new_connection(clients: brokers.AdminPool) -> None:
    seen: list[brokers.Admin] = []

    def view(admin: brokers.Admin) -> str:
        seen.append(admin)
        if len(seen) == 1:
            raise brokers.BrokerError(
                "DescribeLogDirs on cluster demo failed: UnknownBrokerIdError"
            )
        return "view"

    assert clients.run(["b:9092"], "the view of cluster demo", view) == "view"
    assert len(seen) == 2
    first, second = FakeAdmin.opened
    assert first is not second
    assert first.closed
    assert not second.closed


def test_a_call_failing_every_time_names_what_and_why(clients: brokers.AdminPool) -> None:
    def view(admin: brokers.Admin) -> str:
        raise brokers.BrokerError("UnknownBrokerIdError: 1")

    with pytest.raises(BrokerUnreachable, match=r"the view .* failed after 3 tries: BrokerError"):
        clients.run(["b:9092"], "the view of cluster demo", view)
    assert len(FakeAdmin.opened) == 3


def test_a_pooled_call_gets_the_clients_own_error_and_a_passs_call_a_broker_error(
    clients: brokers.AdminPool,
) -> None:
    class Failing:
        def describe_topics(self) -> Any:
            raise brokers.kafka_errors.KafkaConnectionError("gone")

    pooled = brokers.Admin(Failing(), "demo", backoff=None)  # type: ignore[arg-type]
    with pytest.raises(brokers.kafka_errors.KafkaConnectionError):
        pooled.partition_states()
    in_place = brokers.Admin(Failing(), "demo", backoff=(0.0,))  # type: ignore[arg-type]
    with pytest.raises(brokers.BrokerError, match="Metadata on cluster demo failed after 2 tries"):
        in_place.partition_states()
