"""Does a live object already carry what a builder set? The test of apply-one-way.

The comparison asks "does the live object carry every field the builder set, with the same
value?": fields the API server fills in (defaults, status, resourceVersion) never count as
differences, so a reconcile of an unchanged Broker writes nothing. Pure (moved out of
``spindle.operator.kube.apply`` so that the roller's decision can use it without a port).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spindle.operator.quantity import QuantityError, parse_quantity

# Keys whose values are quantities: "1Gi" and "1024Mi" are the same size.
QUANTITY_KEYS = frozenset({"storage", "cpu", "memory", "ephemeral-storage"})


def _same_quantity(a: Any, b: Any) -> bool:
    try:
        return parse_quantity(a) == parse_quantity(b)
    except (QuantityError, TypeError):
        return False


def differences(desired: Any, actual: Any, path: str = "") -> list[str]:
    """Paths where ``actual`` lacks or contradicts a value of ``desired``.

    Dicts: only the desired keys are checked. Lists: same length, items compared in order.
    A desired empty list or dict matches a missing one (the server omits empty fields).
    """
    if isinstance(desired, Mapping):
        if not desired and not actual:
            return []
        if not isinstance(actual, Mapping):
            return [path or "."]
        found: list[str] = []
        for key, value in desired.items():
            sub = f"{path}.{key}"
            if key in QUANTITY_KEYS and _same_quantity(value, actual.get(key)):
                continue
            found.extend(differences(value, actual.get(key), sub))
        return found
    if isinstance(desired, list):
        if not desired and not actual:
            return []
        if not isinstance(actual, list) or len(actual) != len(desired):
            return [path or "."]
        found = []
        for index, (want, have) in enumerate(zip(desired, actual, strict=True)):
            found.extend(differences(want, have, f"{path}[{index}]"))
        return found
    return [] if desired == actual else [path or "."]


def is_subset(desired: Any, actual: Any) -> bool:
    return not differences(desired, actual)
