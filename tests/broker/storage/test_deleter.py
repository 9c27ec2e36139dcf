"""The log deleter's schedule, on fake time."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from spindle.broker.storage import LogManager

from .conftest import FakeClock, make_settings


def _wakeups(thread_name: str) -> int:
    """How often the thread named ``thread_name`` went to sleep of its own accord (the
    kernel's count of its voluntary context switches)."""
    (tid,) = [t.native_id for t in threading.enumerate() if t.name == thread_name]
    status = Path(f"/proc/self/task/{tid}/status").read_text()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


def test_an_idle_deleter_sleeps_until_a_delete_is_queued_then_deletes_it_when_due(
    tmp_path: Path,
) -> None:
    """Nothing queued, the deleter thread does not wake (a thread that polls takes the GIL
    from the event loop each time); a queued delete still runs once its delay has passed."""
    clock = FakeClock()
    settings = make_settings([str(tmp_path / "d0")], **{"file.delete.delay.ms": 60_000})
    lm = LogManager.open(settings, cluster_id="c", node_id=1, clock=clock, background=False)
    try:
        time.sleep(0.1)
        before = _wakeups("log-deleter")
        time.sleep(0.5)  # a deleter polling every 50 ms would have woken ~10 times
        assert _wakeups("log-deleter") - before <= 1
        doomed = tmp_path / "d0" / "t-0.abc-delete"
        doomed.mkdir()
        lm.schedule_delete(str(doomed), str(tmp_path / "d0"))
        time.sleep(0.2)
        assert doomed.exists()  # not due yet
        clock.advance(61)
        assert lm.await_idle(10)
        assert not doomed.exists()
    finally:
        lm.close()
