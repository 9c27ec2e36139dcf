"""Shared fixtures for the broker tests.

The protocol package is imported first: it loads kafka-python's schema classes with the
library's import-time DeprecationWarning silenced (pytest turns warnings into errors).
"""

from __future__ import annotations

import spindle.broker.protocol.apis  # noqa: F401  (import order matters, see docstring)
