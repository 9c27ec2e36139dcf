"""What every broker benchmark reports the same way: medians of rounds, memory, machine load.

A user lives with the steady state, not with the luckiest round: a JIT-compiled broker gets
faster over its first rounds, and on a shared machine any round may be hit by somebody else's
load. So each benchmark runs a declared warm-up round (not counted) and then its rounds; the
headline figure of a metric is the **median** round, with min and max beside it and the best
round kept as context only. A metric whose rounds spread more than :data:`SPREAD_LIMIT` around
the median asks for more rounds (see :func:`wide`).

Memory is read from ``/proc/<pid>/status``: ``VmHWM`` (peak resident set) after clearing it
through ``/proc/<pid>/clear_refs`` at the start of each phase, so a phase's peak is its own;
where the kernel refuses the reset, a sampler thread reads ``VmRSS`` every 20 ms instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import itertools
import os
import statistics
import threading
import time
from collections.abc import Iterator, Sequence

SPREAD_LIMIT = 0.15
"""(max - min) / median above which a metric is called wide and gets more rounds."""


def summary(values: Sequence[float], *, digits: int = 1) -> dict[str, float]:
    """Median (the headline), min, max and relative spread of one metric's counted rounds
    (for a throughput the max is the best round: context only)."""
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    return {
        "median": round(med, digits),
        "min": round(lo, digits),
        "max": round(hi, digits),
        "spread": round((hi - lo) / med, 3) if med else 0.0,
        "n": len(values),
    }


def wide(values: Sequence[float]) -> bool:
    """True if the rounds of a metric spread more than :data:`SPREAD_LIMIT` of their median."""
    if len(values) < 2:
        return False
    med = statistics.median(values)
    return med > 0 and (max(values) - min(values)) / med > SPREAD_LIMIT


M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
CLIENT_MMAP_THRESHOLD = 32 << 20
"""glibc's largest mmap threshold on 64-bit (``DEFAULT_MMAP_THRESHOLD_MAX``)."""
CLIENT_TRIM_THRESHOLD = 256 << 20


def steady_client_allocator() -> bool:
    """Fix glibc's malloc thresholds in this process (the benchmark's client) so that its
    heap is not given back to the kernel and faulted in again between batches.

    Why: a consumer reading through confluent-kafka makes a ``bytes`` object of every
    message (10,000 of 1 KiB a ``consume()`` call, freed with the list), and librdkafka
    allocates a ~4 MB buffer for every fetch answer. With glibc's *dynamic* thresholds the
    top of the heap was trimmed and faulted back in again and again from a process's second
    consumer on: measured, one broker at a time, 5 GiB read four times, minor faults 72 K on
    the first read and 630-690 K on each later one (``perf -e page-faults``: 86 % in
    ``_int_malloc`` on the Python thread), the client's CPU 5.7 -> 7.4 s a read and the
    read 1365 -> ~1000 MB/s -- alike for Spindle and Kafka, so the client, not the broker,
    set the pace. With both thresholds fixed (which also turns off glibc's adjusting of
    them): 25-60 K faults, ~5.6 CPU-s, every read as fast as the first (Spindle 1307-1374,
    Kafka 1202-1364 MB/s). The client keeps at most the largest heap it needed.
    Returns whether libc accepted both settings (False off glibc)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_MMAP_THRESHOLD, CLIENT_MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, CLIENT_TRIM_THRESHOLD)
    )


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages (what ``uptime`` prints)."""
    return [round(x, 2) for x in os.getloadavg()]


def _status_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(f"{field} not in /proc/{pid}/status")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used so far (all its threads): what a phase
    cost the broker, which the machine's load does not change much (its wall time it does)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[float, float, float]:
    """Seconds of CPU time the whole machine has spent busy, in total (busy + idle + iowait,
    summed over its CPUs) and stolen by the hypervisor, from ``/proc/stat``: over a phase,
    busy / total says whether the machine had any CPU left, i.e. whether the phase measured
    the broker or the machine."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    tick = os.sysconf("SC_CLK_TCK")
    busy = user + nice + system + irq + softirq
    return busy / tick, (busy + idle + iowait) / tick, steal / tick


def own_cpu() -> float:
    """User + system CPU seconds of this process (all its threads): a benchmark's client,
    librdkafka's threads included."""
    t = os.times()
    return t.user + t.system


def rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` now, MiB."""
    return _status_kb(pid, "VmRSS") / 1024


class PeakRss:
    """Peak resident set of one process over a phase (``with probe.phase() as peak: ...``;
    ``peak[0]`` holds MiB afterwards)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def _reset(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w", encoding="ascii") as f:
                f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
            return True
        except OSError:
            return False

    @contextlib.contextmanager
    def phase(self) -> Iterator[list[float]]:
        out = [0.0]
        reset = self._reset()
        stop = threading.Event()
        sampled = [rss_mb(self.pid)]

        def sample() -> None:
            while not stop.wait(0.02):
                with contextlib.suppress(OSError, KeyError):
                    sampled[0] = max(sampled[0], rss_mb(self.pid))

        sampler = None if reset else threading.Thread(target=sample, daemon=True)
        if sampler is not None:
            sampler.start()
        try:
            yield out
        finally:
            stop.set()
            if sampler is not None:
                sampler.join()
            peak = sampled[0]
            if reset:
                with contextlib.suppress(OSError, KeyError):
                    peak = max(peak, _status_kb(self.pid, "VmHWM") / 1024)
            out[0] = round(peak, 1)


def growth(after_rounds: Sequence[float]) -> dict[str, float | bool | list[float]]:
    """Resident set after each counted round and whether it kept growing: ``grows`` is True
    if the last round ends more than 10% (and 16 MiB) above the first and every round's
    resident set was at least the one before (steady creep, not noise)."""
    first, last = after_rounds[0], after_rounds[-1]
    creeping = all(b >= a for a, b in itertools.pairwise(after_rounds))
    grows = len(after_rounds) > 2 and creeping and last - first > max(16.0, 0.1 * first)
    return {
        "after_each_round_mb": [round(x, 1) for x in after_rounds],
        "growth_mb": round(last - first, 1),
        "grows": grows,
    }


def thread_times(tid: int) -> tuple[float, float]:
    """(seconds on a CPU, seconds waiting for one in the run queue) of thread ``tid`` of this
    process so far (``/proc/self/task/<tid>/schedstat``). Wall time minus both is time the
    thread slept: on a lock, the GIL, or I/O."""
    with open(f"/proc/self/task/{tid}/schedstat", encoding="ascii") as f:
        run_ns, wait_ns, _ = f.read().split()
    return int(run_ns) / 1e9, int(wait_ns) / 1e9


class ThreadClock:
    """Where some threads' wall time went over one or more stretches: on a CPU, waiting for
    one, asleep (:meth:`pause` ends a stretch, :meth:`resume` starts the next)."""

    def __init__(self, tids: list[int]) -> None:
        self.tids = tids
        self.wall = self.run = self.wait = 0.0
        self.resume()

    def resume(self) -> None:
        self._running = True
        self._start = time.perf_counter()
        self._times = [thread_times(t) for t in self.tids]

    def pause(self) -> None:
        if not self._running:
            return
        self._running = False
        self.wall += time.perf_counter() - self._start
        now = [thread_times(t) for t in self.tids]
        self.run += sum(b[0] - a[0] for a, b in zip(self._times, now, strict=True))
        self.wait += sum(b[1] - a[1] for a, b in zip(self._times, now, strict=True))

    def shares(self) -> dict[str, float]:
        """Each as a fraction of the stretches' wall time (summed over the threads); ends the
        running stretch, if any."""
        self.pause()
        wall, run, wait = self.wall, self.run, self.wait
        return {
            "cpu_s": round(run, 3),
            "on_cpu": round(run / wall, 3),
            "runqueue_wait": round(wait / wall, 3),
            "asleep": round(max(0.0, len(self.tids) - (run + wait) / wall), 3),
        }
