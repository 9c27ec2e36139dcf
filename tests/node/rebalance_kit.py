"""Measuring instruments of the rebalance scenario on the node (``test_rebalance_on_node``):
what arrives on a broker's disks over time, and a live producer whose every acknowledged
record must be read back."""

from __future__ import annotations

import contextlib
import itertools
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controlplane import LocalControlPlane
from controlplane.node import cluster_dns_command

#: ``Scenario.wait``: (what, probe, timeout) -> the probe's answer, or fails saying what.
Wait = Callable[[str, Callable[[], Any], float], Any]


class Sampler:
    """(seconds, bytes) of a broker's record data (``.log`` segments on its volumes, read on
    this machine where the provisioner mounted them: what arrived, whoever reports it), every
    0.2 s in a thread of its own while running."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def _bytes(self) -> int:
        total = 0
        for path in self.paths:
            for f in path.rglob("*.log"):
                with contextlib.suppress(OSError):  # a segment deleted while listed
                    total += f.stat().st_size
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self._bytes()))
            self._stop.wait(0.2)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.monotonic(), self._bytes()))

    def crossing(self, level: int) -> float:
        """When the bytes reached ``level`` (linear between the two samples around it)."""
        for (t0, b0), (t1, b1) in itertools.pairwise(self.samples):
            if b0 < level <= b1:
                return t0 + (t1 - t0) * (level - b0) / (b1 - b0)
        raise AssertionError(f"never reached {level} bytes: {self.samples[-1]}")

    def rate(self) -> tuple[float, float, int]:
        """The rate the bytes arrived at between 10 % and 90 % of what arrived (start-up and
        the last partition's tail left out), two ways: the least-squares slope of every sample
        in that band, and bytes over the time between the two crossings; and the bytes that
        arrived. A throttle lets data through in steps (one fetch response, then a wait that
        pays for it), and the two-point figure is off by up to a step at each end; the slope
        weighs every step, so it is the figure held to the band."""
        start = self.samples[0][1]
        total = self.samples[-1][1] - start
        lo, hi = start + total // 10, start + total * 9 // 10
        band = [(t, b) for t, b in self.samples if lo <= b <= hi]
        assert len({b for _, b in band}) >= 5, f"too few steps to measure: {self.samples}"
        slope = statistics.linear_regression([t for t, _ in band], [b for _, b in band]).slope
        two_point = (hi - lo) / (self.crossing(hi) - self.crossing(lo))
        return slope, two_point, total


class LiveProducer:
    """``live_producer.py`` on the node: an idempotent acks=all producer writing to every
    partition of the live topic until stopped, then reading back everything it was told was
    written (its report in ``verify.json``)."""

    def __init__(
        self, kube: LocalControlPlane, bootstrap: str, topic: str, partitions: int, work: Path,
        wait: Wait,
    ) -> None:  # fmt: skip
        self.work, self.wait = work, wait
        layout = kube.node_layout
        assert layout is not None
        command = cluster_dns_command(layout, [
            sys.executable, str(Path(__file__).with_name("live_producer.py")), bootstrap,
            topic, str(partitions), str(work),
        ])  # fmt: skip
        self.log = work / "live.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT,
                env={**kube.env, "SPINDLE_RDKAFKA_DEBUG": "eos"},
            )  # fmt: skip

    def acked(self) -> int:
        with contextlib.suppress(OSError, ValueError):
            return int(json.loads((self.work / "progress.json").read_text())["acked"])
        return 0

    def wait_acked(self, more: int, what: str) -> None:
        """Wait until ``more`` records beyond those acknowledged now are acknowledged."""
        target = self.acked() + more

        def going() -> bool:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            return self.acked() >= target

        self.wait(f"{more} more records acknowledged {what}", going, 120)

    def finish(self) -> dict[str, Any]:
        """Stop producing; the verifying consumer's report."""
        (self.work / "stop").touch()
        try:
            self.proc.wait(timeout=600)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        assert self.proc.returncode == 0, self.log.read_text()[-3000:]
        report: dict[str, Any] = json.loads((self.work / "verify.json").read_text())
        return report
