"""Integration tests across the parts: the broker tests' real etcd fixture, shared here.

The broker's protocol package is imported first, as in tests/broker/conftest.py: it loads
kafka-python's schema classes with the library's import-time DeprecationWarning silenced
(pytest turns warnings into errors), which must happen before any test module imports kafka.
"""

from __future__ import annotations

import spindle.broker.protocol.apis  # noqa: F401  (import order matters, see docstring)

from ..broker.conftest import etcd as etcd
