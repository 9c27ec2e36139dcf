"""The balance band every soft goal uses, written once.

Cruise Control's balance goals keep a value within ``[(2 - f) * mean, f * mean]`` for a
balance threshold ``f`` (e.g. 1.10: within 10 % of the mean either way). The greedy, the
exchanges, the exact model, the report and the reachability check all need the same band;
computing it here keeps them from drifting apart. The floor is ``(2 - f) * mean`` evaluated
in exactly that order, so callers that scale it further (``band_floor(f, u) * total``) get
the same floating-point value as the expression they replace -- plans stay byte-identical.
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np
import numpy.typing as npt

Value = TypeVar("Value", float, npt.NDArray[np.float64])


def band_floor(factor: float, mean: Value) -> Value:
    """The band's lower edge, ``(2 - factor) * mean``."""
    return (2 - factor) * mean


def count_band(factor: float, mean: float) -> tuple[int, int]:
    """A count goal's band as whole numbers, widened outward: ``(floor(lower), ceil(upper))``.

    Counts are integers, so an edge that falls between two counts is rounded away from the
    mean; otherwise a mean of 10.5 with a 1.0 factor would admit no count at all."""
    return math.floor(band_floor(factor, mean)), math.ceil(factor * mean)
