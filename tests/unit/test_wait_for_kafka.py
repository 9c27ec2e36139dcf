"""The main job's wait for Kafka (scripts/lib/wait_for_kafka.py) names what is missing and
prints nothing else while it waits; a closed port is "not yet", not an error."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "lib" / "wait_for_kafka.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", str(SCRIPT), *args], capture_output=True, text=True, timeout=60
    )


def test_an_unresolvable_bootstrap_name_is_reported_once_at_the_timeout() -> None:
    done = _run("--timeout", "1", "no-such-broker.invalid:9092")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("not ready after 1 s: no-such-broker.invalid does not resolve")
    assert len(done.stderr.splitlines()) == 1


def test_a_port_nobody_listens_on_is_waited_for() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = _run("--timeout", "1", f"127.0.0.1:{port}")
    assert done.returncode == 1
    assert f"127.0.0.1:{port} does not accept" in done.stderr
