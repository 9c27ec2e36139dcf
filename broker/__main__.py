"""``python -m spindle.broker``: the same as the ``spindle-broker`` console script.

The console script is the way to start a broker. ``python -m`` puts the current directory first
on ``sys.path``, and from the repository root the ``operator/`` source folder then shadows the
standard library's ``operator``, which Python's own start-up (runpy, collections) imports before
any Spindle code runs, so nothing here can catch it. From the repository root use
``python -P -m spindle.broker`` (or ``PYTHONSAFEPATH=1``), which leaves the current directory
off ``sys.path``.
"""

from __future__ import annotations

import sys

from spindle.broker.server.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
