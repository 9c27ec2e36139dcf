"""Display helpers shared by the views: byte sizes, fractions, times. Pure.

Unknown is never shown as zero: a field the operator has not filled yet is ``None`` in the
JSON endpoints and "—" on the pages (DESIGN.md: the volume and rebalance issues fill bytes
and proposals; the dashboard shows what exists).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

DASH = "—"
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def as_int(value: Any) -> int | None:
    """An integer field, or ``None`` when absent or not an integer (booleans are not)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def human_bytes(value: int | float | None) -> str:
    """Binary units like kubectl's quantities (1.5 GiB); "—" for unknown."""
    if value is None:
        return DASH
    size = float(value)
    for unit in _UNITS:
        if abs(size) < 1024 or unit == _UNITS[-1]:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def percent(fraction: float | None, digits: int = 1) -> str:
    return DASH if fraction is None else f"{100 * fraction:.{digits}f}%"


def fraction(part: int | float | None, whole: int | float | None) -> float | None:
    """part/whole clamped to [0, 1], or ``None`` when either is unknown or whole is 0."""
    if part is None or whole is None or whole <= 0:
        return None
    return max(0.0, min(1.0, float(part) / float(whole)))


def parse_time(value: Any) -> dt.datetime | None:
    """An RFC 3339 timestamp as Kubernetes writes it, or ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def duration(seconds: float | None) -> str:
    """A short duration (2h 5m, 40s); "—" for unknown."""
    if seconds is None:
        return DASH
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def rate(bytes_per_second: float | None) -> str:
    return DASH if bytes_per_second is None else f"{human_bytes(bytes_per_second)}/s"
