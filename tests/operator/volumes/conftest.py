"""LogVolume tests: a real broker process on loopback (its log directories real tmpfs mounts)
watched by a real operator process on the local control plane.

The broker tests' etcd and broker factory are shared here; the broker's protocol package is
imported first, as in tests/broker/conftest.py (kafka-python's import-time warning).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import spindle.broker.protocol.apis  # noqa: F401  (import order matters, see docstring)

from ...broker.conftest import etcd as etcd
from ...broker.conftest import make_broker as make_broker
from ..conftest import free_port, healthy, temporary_namespace


@pytest.fixture(scope="session")
def broker_factory() -> Callable[..., Any]:
    """``make_broker`` for test modules (which cannot import conftest in importlib mode)."""
    return make_broker


@pytest.fixture(scope="session")
def session_helpers() -> dict[str, Any]:
    """The operator conftest's helpers, for module-scoped fixtures."""
    return {"free_port": free_port, "healthy": healthy, "temporary_namespace": temporary_namespace}
