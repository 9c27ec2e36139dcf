"""The composition root (``operator.wiring``) and the roller's monopoly: a Broker is asked at
its ``--bootstrap`` override or its Service; an event-driven reconcile gets what the probe
last heard, never a new request; and no module but the roller deletes a broker Pod."""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import pytest
from spindle.operator import specs
from spindle.operator.decisions.volume_state import BrokerUnreachable, DirReport
from spindle.operator.wiring import Settings, Wiring

from .specs.bodies import broker_body

OPERATOR = Path(__file__).resolve().parents[2] / "operator"


class FakeAdmin:
    def __init__(self) -> None:
        self.answers: list[list[DirReport] | BrokerUnreachable] = []
        self.asked: list[list[str]] = []

    def partition_states(self, servers: Any) -> dict[Any, Any]:
        return {}

    def describe_dirs(self, servers: list[str], broker_id: int) -> list[DirReport]:
        self.asked.append(servers)
        answer = self.answers.pop(0)
        if isinstance(answer, BrokerUnreachable):
            raise answer
        return answer


class NoIds:
    def read_or_error(self, *args: Any) -> tuple[None, None]:
        return None, None


def _wiring(admin: FakeAdmin, **settings: Any) -> Wiring:
    return Wiring(
        Settings(**settings),
        api=None,  # type: ignore[arg-type]
        admin=admin,  # type: ignore[arg-type]
        directory_ids=NoIds(),  # type: ignore[arg-type]
    )


def test_a_broker_is_asked_at_its_clusters_override_else_at_its_service() -> None:
    broker = specs.BrokerSpec.from_body(broker_body())
    assert _wiring(FakeAdmin()).servers(broker) == [
        f"{broker.name}.{broker.namespace}.svc:{broker.port}"
    ]
    wired = _wiring(FakeAdmin(), bootstrap={broker.cluster: "a:1,b:2"})
    assert wired.servers(broker) == ["a:1", "b:2"]


def test_a_reconcile_gets_what_the_probe_last_heard_and_asks_nothing() -> None:
    admin = FakeAdmin()
    wired = _wiring(admin)
    broker = specs.BrokerSpec.from_body(broker_body())
    with pytest.raises(BrokerUnreachable, match="not been probed yet"):
        wired.last_probe(broker)
    report = DirReport(path="/d/0", error=None, replicas=0, used_bytes=0,
                       described_at=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC))  # fmt: skip
    admin.answers = [[report], BrokerUnreachable("down")]
    assert wired.probe(broker) == [report]
    assert wired.last_probe(broker) == [report]
    with pytest.raises(BrokerUnreachable, match="down"):
        wired.probe(broker)
    with pytest.raises(BrokerUnreachable, match="down"):
        wired.last_probe(broker)
    assert len(admin.asked) == 2  # the two probes; last_probe never asks


def test_only_the_roller_deletes_a_broker_pod() -> None:
    """Every broker restart goes through ``reconcile.roller`` (house style 16); the planner
    Job's own Pods (``workloads.planner``) are not brokers."""
    deletes = re.compile(r"delete\(\s*PODS|PODS\.path\(")
    found = {
        str(path.relative_to(OPERATOR))
        for path in OPERATOR.rglob("*.py")
        if deletes.search(path.read_text())
    }
    assert found == {"reconcile/roller.py", "workloads/planner.py"}
