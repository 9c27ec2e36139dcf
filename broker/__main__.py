"""``python -m spindle.broker``: the same as the ``spindle-broker`` console script."""

from __future__ import annotations

import sys

from spindle.broker.server.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
