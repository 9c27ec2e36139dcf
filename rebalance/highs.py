"""One way to make a HiGHS solver: quiet from its first byte.

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
