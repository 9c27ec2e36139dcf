"""Kubernetes resource quantities (``10Gi``, ``500M``, ``1e9``) as exact byte counts.

The storage diff must compare sizes written in different units (``1Gi`` against
``1024Mi``), and a float would round large sizes, so quantities parse to ``Fraction`` and
then to whole bytes. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# Same grammar as the apiserver's (k8s.io/apimachinery/pkg/api/resource/quantity.go).
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<bin>[KMGTPE]i)|[eE](?P<exp>[+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int) -> Fraction:
    """Return the exact value of a Kubernetes quantity."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise QuantityError(f"{value!r} is not a Kubernetes quantity (expected e.g. 10Gi or 500M)")
    number = Fraction(match["num"])
    if match["bin"]:
        return number * _BINARY[match["bin"]]
    if match["exp"] is not None:
        return number * Fraction(10) ** int(match["exp"])
    return number * _DECIMAL[match["dec"] or ""]


def quantity_bytes(value: str | int) -> int:
    """Whole bytes of a storage quantity, rounded up as the apiserver rounds storage."""
    exact = parse_quantity(value)
    whole = exact.numerator // exact.denominator
    return whole if whole == exact else whole + 1


def format_bytes(count: int) -> str:
    """Short binary rendering for display columns, always with a unit: ``202`` → ``202B``,
    ``1536Mi`` → ``1.5Gi``. A bare number beside ``973.4Mi`` (``202/973.4Mi``) read as
    mebibytes, so bytes say ``B`` too."""
    if abs(count) < 1024:
        return f"{count}B"
    value = float(count)
    for unit in ("Ki", "Mi", "Gi", "Ti", "Pi"):
        value /= 1024
        if abs(value) < 1024 or unit == "Pi":
            text = f"{value:.1f}".rstrip("0").rstrip(".")
            return f"{text}{unit}"
    raise AssertionError("unreachable")
