"""Fixtures for the pure decision tests: a validated Broker spec (the builders' own)."""

from __future__ import annotations

import pytest
from spindle.operator.specs import BrokerSpec

from ..specs.bodies import broker_body


@pytest.fixture
def broker() -> BrokerSpec:
    return BrokerSpec.from_body(broker_body())
