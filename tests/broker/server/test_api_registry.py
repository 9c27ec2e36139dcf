"""The handler registry matches the served-API table: no advertised API without a handler."""

from __future__ import annotations

from typing import Any

import pytest
from spindle.broker.protocol.apis import SUPPORTED_APIS, ApiKey, Request
from spindle.broker.server.apis import FAMILIES, RegistryError, build_registry
from spindle.broker.server.apis.base import ApiContext
from spindle.broker.server.security.authorizer import RequestContext


async def _handler(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    return {}


def test_every_advertised_api_has_exactly_one_handler() -> None:
    table = build_registry()
    assert set(table) == set(SUPPORTED_APIS)


def test_an_advertised_api_without_a_handler_refuses_to_build() -> None:
    without_configs = tuple(f for f in FAMILIES if ApiKey.DESCRIBE_CONFIGS not in f)
    assert len(without_configs) == len(FAMILIES) - 1
    with pytest.raises(RegistryError, match="DESCRIBE_CONFIGS"):
        build_registry(without_configs)


def test_a_handler_for_an_api_not_advertised_refuses_to_build() -> None:
    served = {k: v for k, v in SUPPORTED_APIS.items() if k != ApiKey.DESCRIBE_CLUSTER}
    with pytest.raises(RegistryError, match="DESCRIBE_CLUSTER"):
        build_registry(FAMILIES, served)


def test_an_api_served_by_two_families_refuses_to_build() -> None:
    with pytest.raises(RegistryError, match="METADATA has two handlers"):
        build_registry((*FAMILIES, {ApiKey.METADATA: _handler}))
