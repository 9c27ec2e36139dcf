"""HiGHS as the planner uses it: a solver quiet from its first byte, and rows added in bulk.

``highspy.Highs()`` prints its banner ("Running HiGHS …") to the process's standard output
while it is being constructed, before ``output_flag`` can be turned off. The planner's standard
output is its report (``spindle-rebalance plan`` prints the summary there, spark-submit passes
it on), so the banner is kept out at the file-descriptor level: C++ writes it, not Python.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Mapping

import highspy
import numpy as np

_LOCK = threading.Lock()
_LIBC = ctypes.CDLL(None)


def quiet_highs(options: Mapping[str, bool | int | float]) -> highspy.Highs:
    """A solver built with standard output (fd 1) sent to /dev/null, then ``options`` set
    (``output_flag`` False always)."""
    with _LOCK:
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            with open(os.devnull, "wb") as null:
                os.dup2(null.fileno(), 1)
            h = highspy.Highs()  # type: ignore[no-untyped-call]
            _LIBC.fflush(None)  # C stdio buffers the banner when stdout is a pipe
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    h.setOptionValue("output_flag", False)
    for name, value in options.items():
        h.setOptionValue(name, value)
    return h


class Rows:
    """Constraint rows gathered in compressed form (lower, upper, columns, values) and
    appended to a solver in one ``addRows`` call: a row at a time through highspy costs a
    crossing into C++ each, which the models' thousands of rows would pay."""

    def __init__(self) -> None:
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.starts: list[int] = []
        self.idx: list[int] = []
        self.val: list[float] = []

    def add(self, cols: list[int], vals: list[float], lo: float, hi: float) -> None:
        """One row ``lo <= sum(vals * x[cols]) <= hi``, columns distinct."""
        self.starts.append(len(self.idx))
        self.idx.extend(cols)
        self.val.extend(vals)
        self.lo.append(lo)
        self.hi.append(hi)

    def add_merged(self, cols: list[int], vals: list[float], lo: float, hi: float) -> None:
        """Like ``add``, for rows written term by term: a column's repeated terms summed,
        zero terms dropped, and a row left with none not added."""
        merged: dict[int, float] = {}
        for c, v in zip(cols, vals, strict=True):
            merged[c] = merged.get(c, 0.0) + v
        items = [(c, v) for c, v in merged.items() if v != 0.0]
        if items:
            self.add([c for c, _ in items], [v for _, v in items], lo, hi)

    def add_to(self, h: highspy.Highs) -> None:
        """Append these rows to solver ``h`` (nothing when there are none)."""
        if not self.lo:
            return
        h.addRows(
            len(self.lo),
            np.asarray(self.lo, np.float64),
            np.asarray(self.hi, np.float64),
            len(self.idx),
            np.asarray(self.starts, np.int32),
            np.asarray(self.idx, np.int32),
            np.asarray(self.val, np.float64),
        )
