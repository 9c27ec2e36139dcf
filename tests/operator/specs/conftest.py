"""Fixtures for the pure builder tests: a validated Broker spec."""

from __future__ import annotations

import pytest
from spindle.operator.specs import BrokerSpec

from .bodies import broker_body


@pytest.fixture
def broker() -> BrokerSpec:
    return BrokerSpec.from_body(broker_body())
