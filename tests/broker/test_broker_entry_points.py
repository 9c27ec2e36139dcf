"""The broker starts from the repository root, where the ``operator/`` folder would shadow the
standard library's ``operator`` for a plain ``python -m``: through the console script and
through ``python -P -m spindle.broker`` (the current directory left off ``sys.path``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "command",
    [
        [str(Path(sys.executable).with_name("spindle-broker")), "--help"],
        [sys.executable, "-P", "-m", "spindle.broker", "--help"],
    ],
    ids=["console-script", "python-P-m"],
)
def test_broker_entry_points_work_from_the_repository_root(command: list[str]) -> None:
    assert (REPO / "operator" / "__init__.py").exists()  # the folder that shadows the stdlib
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "usage: spindle-broker" in done.stdout
    assert "python -P -m spindle.broker" in done.stdout
