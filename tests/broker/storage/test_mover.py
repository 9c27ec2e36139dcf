"""The replica mover (KIP-113): copy while appending, swap, cancel, order, throttle, failures."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch, validate
from spindle.broker.storage import Log, LogManager
from spindle.broker.storage.descriptions import describe_replicas
from spindle.broker.storage.mover import MOVER_NICE
from spindle.broker.storage.segment import SegmentState
from spindle.broker.storage.throttle import STEP_MIN, STEP_SECONDS

from .conftest import FakeClock, crash
from .faults import needs_root, tmpfs

Opener = Callable[..., LogManager]


def _values(log: Log) -> list[bytes]:
    """Every record value in the log, in offset order (parses records of our own batches)."""
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20).records
        for h in validate(chunk):
            # build_batch writes one record of a 16-byte tag per batch in these tests
            body = chunk[h.position + 61 : h.position + h.size]
            out.append(body[-17:-1])
            offset = h.next_offset
    return out


def _tagged(i: int) -> bytes:
    return build_batch([f"{i:016d}".encode()])


def _fill(log: Log, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        log.append(_tagged(i))


def _fill_padded(log: Log, n: int, start: int = 0) -> None:
    """Batches of 10 KB that still carry their 16-byte tag last, where _values reads it."""
    padding = b"p" * 10_000
    for i in range(start, start + n):
        log.append(build_batch([padding + f"{i:016d}".encode()]))


def _future_log(lm: LogManager, tp: TopicPartition, logdir: str) -> Log:
    """A future replica of ``tp`` made by hand in ``logdir`` (``<topic>-<partition>.0-future``),
    with the manager's settings, clock and failure channel."""
    name = f"{tp.topic}-{tp.partition}.0-future"
    return Log.create(
        tp,
        os.path.join(logdir, name),
        logdir,
        settings=lm.settings,
        clock=lm.clock,
        failures=lm.failures,
        is_future=True,
    )


def _no_leftovers(dirs: list[str]) -> list[str]:
    return [n for d in dirs for n in os.listdir(d) if n.endswith(("-future", "-delete"))]


class PauseAfterSegmentCopy:
    """A mover hook that holds each copy after a segment is copied (``paused`` is set) until
    the test sets ``gate``; from then on copies run freely."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.paused = threading.Event()

    def __call__(self, step: str, tp: TopicPartition) -> None:
        if step == "segment_copied" and not self.gate.is_set():
            self.paused.set()
            self.gate.wait(30)


def test_appends_continue_during_a_move_and_every_batch_survives_once_in_order(
    open_manager: Opener, dirs: list[str]
) -> None:
    # The copy runs at 32 MiB/s: a second or so for the 32 MB below, yet well above what one
    # Python producer of 80-byte batches can append, so the future always catches up.
    lm = open_manager(
        dirs,
        **{
            "log.segment.bytes": 4 << 20,
            "replica.alter.log.dirs.io.max.bytes.per.second": 32 << 20,
        },
    )
    tp = TopicPartition("busy", 0)
    log = lm.get_or_create_log(tp)
    _fill_padded(log, 3200)
    dest = next(d for d in dirs if d != log.logdir_path)
    stop = threading.Event()
    appended: list[int] = []
    during_move = 0

    def producer() -> None:
        nonlocal during_move
        i = 3200
        while not stop.is_set():
            log.append(_tagged(i))
            appended.append(i)
            if lm.get_future_log(tp) is not None:
                during_move += 1
            i += 1

    thread = threading.Thread(target=producer)
    thread.start()
    try:
        assert lm.change_replica_dir(tp, dest) is ErrorCode.NONE
        assert lm.await_idle(60)
    finally:
        stop.set()
        thread.join()
    assert log.logdir_path == dest
    assert during_move > 100  # the producer was not held up by the copy
    expected = [f"{i:016d}".encode() for i in range(3200 + len(appended))]
    assert _values(log) == expected
    assert _no_leftovers(dirs) == []


def test_new_destination_cancels_the_running_move_and_deletes_its_future(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs, **{"replica.alter.log.dirs.io.max.bytes.per.second": 200_000})
    tp = TopicPartition("c", 0)
    lm.change_replica_dir(tp, dirs[0])
    log = lm.get_or_create_log(tp)
    _fill(log, 10_000)  # ~790 KB at 200 KB/s: still copying when we change our mind
    assert lm.change_replica_dir(tp, dirs[1]) is ErrorCode.NONE
    first_future = lm.get_future_log(tp)
    assert first_future is not None
    first_path = first_future.dir_path
    assert first_path.endswith("-future")
    assert os.path.isdir(first_path)
    assert lm.change_replica_dir(tp, dirs[1]) is ErrorCode.NONE  # same destination: no-op
    assert lm.get_future_log(tp) is first_future
    assert lm.change_replica_dir(tp, dirs[2]) is ErrorCode.NONE
    assert lm.get_future_log(tp) is not first_future
    assert not os.path.exists(first_path)  # renamed to -delete, removed asynchronously
    # Back to the current directory: the move is cancelled, nothing moves.
    assert lm.change_replica_dir(tp, dirs[0]) is ErrorCode.NONE
    assert lm.moves_in_progress() == []
    assert lm.await_idle(30)
    assert log.logdir_path == dirs[0]
    assert _no_leftovers(dirs) == []
    lm.set_alter_log_dirs_throttle(None)
    assert lm.change_replica_dir(tp, dirs[2]) is ErrorCode.NONE
    assert lm.await_idle(30)
    assert log.logdir_path == dirs[2]
    assert _values(log) == [f"{i:016d}".encode() for i in range(10_000)]


def test_one_mover_takes_partitions_in_lexicographic_order_and_describe_shows_lag(
    open_manager: Opener, dirs: list[str]
) -> None:
    gate = threading.Event()
    started: list[TopicPartition] = []

    def hook(step: str, tp: TopicPartition) -> None:
        if step == "segment_copied" and (not started or started[-1] != tp):
            started.append(tp)
            gate.wait(30)

    lm = open_manager(
        dirs, hook=hook, **{"num.replica.alter.log.dirs.threads": 1, "log.segment.bytes": 4096}
    )
    tps = [TopicPartition(t, 0) for t in ("m", "z", "a", "k")]
    for tp in tps:
        lm.change_replica_dir(tp, dirs[0])
        _fill(lm.get_or_create_log(tp), 200)
    for tp in tps:
        assert lm.change_replica_dir(tp, dirs[1]) is ErrorCode.NONE
    while not started:
        threading.Event().wait(0.01)
    # The first copy is paused after one chunk: its future lags behind the live log.
    futures = {p.tp: p for d in lm.describe_dirs(dirs=[dirs[1]]) for p in d.partitions}
    first = started[0]
    assert futures[first].is_future
    assert 0 < futures[first].offset_lag < 200
    assert all(futures[tp].offset_lag == 200 for tp in tps if tp != first)
    status = {m.tp: m for m in lm.move_status()}
    assert set(status) == set(tps)
    assert 0 < status[first].bytes_copied < status[first].bytes_total
    assert all(status[tp].bytes_copied == 0 for tp in tps if tp != first)
    assert all((m.source, m.destination) == (dirs[0], dirs[1]) for m in status.values())
    gate.set()
    assert lm.await_idle(30)
    assert started == [first, *sorted(tp for tp in tps if tp != first)]
    assert all(lm.get_log(tp).logdir_path == dirs[1] for tp in tps)  # type: ignore[union-attr]


def test_change_replica_dir_refuses_while_a_directory_is_offline(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    tps = [TopicPartition("e", i) for i in range(3)]
    for tp, d in zip(tps, dirs, strict=True):
        lm.change_replica_dir(tp, d)
        lm.get_or_create_log(tp).append(build_batch([b"x"]))
    os.rename(dirs[2], dirs[2] + ".gone")
    Path(dirs[2]).write_text("file")
    with pytest.raises(KafkaStorageError):
        lm.get_log(tps[2]).append(build_batch([b"y"]))  # type: ignore[union-attr]
    assert lm.change_replica_dir(tps[0], dirs[2]) is ErrorCode.KAFKA_STORAGE_ERROR  # dest offline
    assert (
        lm.change_replica_dir(tps[2], dirs[0]) is ErrorCode.KAFKA_STORAGE_ERROR
    )  # replica offline
    assert lm.change_replica_dir(tps[0], dirs[1]) is ErrorCode.KAFKA_STORAGE_ERROR  # a dir offline
    assert lm.change_replica_dir(tps[0], dirs[0]) is ErrorCode.NONE  # already there


@needs_root
@pytest.mark.root
def test_move_into_a_disk_that_fills_up_stops_cleanly_and_the_source_keeps_serving(
    open_manager: Opener, tmp_path: Path
) -> None:
    dirs = [str(tmp_path / "src"), str(tmp_path / "small"), str(tmp_path / "other")]
    with tmpfs(dirs[1], size="1m"):
        lm = open_manager(dirs, **{"log.segment.bytes": 256 * 1024})
        calls: list[str] = []
        lm.add_offline_listener(calls.append)
        tp = TopicPartition("big", 0)
        lm.change_replica_dir(tp, dirs[0])
        log = lm.get_or_create_log(tp)
        _fill(log, 30_000)  # ~2.4 MB: does not fit in 1 MiB
        assert lm.change_replica_dir(tp, dirs[1]) is ErrorCode.NONE
        assert lm.await_idle(30)
        assert calls == [dirs[1]]
        assert lm.offline_dirs == [dirs[1]]
        assert log.logdir_path == dirs[0]
        assert lm.moves_in_progress() == []
        assert not any(p.is_future for d in lm.describe_dirs() for p in d.partitions)
        _fill(log, 10, start=30_000)
        assert _values(log) == [f"{i:016d}".encode() for i in range(30_010)]
        lm.close()


def test_truncation_and_retention_during_a_move_end_in_the_same_log(
    open_manager: Opener, dirs: list[str]
) -> None:
    hook = PauseAfterSegmentCopy()
    gate, paused = hook.gate, hook.paused
    lm = open_manager(dirs, hook=hook, **{"log.segment.bytes": 4096, "log.retention.bytes": 20_000})
    tp = TopicPartition("tr", 0)
    lm.change_replica_dir(tp, dirs[0])
    log = lm.get_or_create_log(tp)
    _fill(log, 500)  # ~40 KB over ~10 segments
    assert lm.change_replica_dir(tp, dirs[1]) is ErrorCode.NONE
    assert paused.wait(30)
    log.truncate_to(450)  # a follower diverged: the copy must start over
    log.high_watermark = 450
    assert lm.run_retention() > 0  # and old segments go meanwhile
    start = log.log_start_offset
    gate.set()
    assert lm.await_idle(30)
    assert log.logdir_path == dirs[1]
    assert log.log_start_offset == start
    assert _values(log) == [f"{i:016d}".encode() for i in range(start, 450)]
    _fill(log, 5, start=450)
    assert _values(log)[-1] == f"{454:016d}".encode()


def test_destination_failing_mid_swap_gives_the_live_replica_its_name_back(
    open_manager: Opener, dirs: list[str]
) -> None:
    def hook(step: str, tp: TopicPartition) -> None:
        if step == "after_live_renamed":  # the destination dies between the two renames
            os.rename(dirs[1], dirs[1] + ".gone")
            Path(dirs[1]).write_text("dead disk")

    lm = open_manager(dirs, hook=hook, **{"log.segment.bytes": 4096})
    tp = TopicPartition("undo", 0)
    lm.change_replica_dir(tp, dirs[0])
    log = lm.get_or_create_log(tp)
    _fill(log, 300)
    live_path = log.dir_path
    assert lm.change_replica_dir(tp, dirs[1]) is ErrorCode.NONE
    assert lm.await_idle(30)
    assert lm.offline_dirs == [dirs[1]]
    assert log.dir_path == live_path
    assert os.path.isdir(live_path)
    assert [n for n in os.listdir(dirs[0]) if n.startswith("undo-0")] == ["undo-0"]
    _fill(log, 10, start=300)
    lm.close()
    again = open_manager(dirs, **{"log.segment.bytes": 4096})
    reopened = again.get_log(tp)
    assert reopened is not None
    assert _values(reopened) == [f"{i:016d}".encode() for i in range(310)]


def test_longest_topic_name_moves_and_resumes_with_its_future_name_cut_to_255(
    open_manager: Opener, dirs: list[str]
) -> None:
    tp = TopicPartition("t" * 249, 7)  # Kafka's longest legal topic name

    fired = threading.Event()

    def hook(step: str, moving: TopicPartition) -> None:
        if step == "segment_copied":
            fired.set()
            raise RuntimeError("simulated crash in the middle of the copy")

    lm = open_manager(dirs, hook=hook, **{"log.segment.bytes": 4096})
    lm.change_replica_dir(tp, dirs[0])
    log = lm.get_or_create_log(tp)
    _fill(log, 200)
    assert lm.change_replica_dir(tp, dirs[1]) is ErrorCode.NONE
    future = lm.get_future_log(tp)
    assert future is not None
    name = os.path.basename(future.dir_path)
    assert len(name) == 255
    assert name.endswith("-7." + name[-39:-7] + "-future")
    assert fired.wait(30)  # the copy stopped part-way: the future stays, cut name and all
    crash(lm)
    again = open_manager(dirs, **{"log.segment.bytes": 4096})
    assert again.offline_dirs == []
    assert again.await_idle(30)
    moved = again.get_log(tp)
    assert moved is not None
    assert moved.logdir_path == dirs[1]
    assert _values(moved) == [f"{i:016d}".encode() for i in range(200)]
    assert _no_leftovers(dirs) == []


def test_source_failing_mid_move_stops_the_move_and_leaves_the_future_on_disk(
    open_manager: Opener, dirs: list[str]
) -> None:
    broke = threading.Event()

    def hook(step: str, tp: TopicPartition) -> None:
        if step == "segment_copied" and not broke.is_set():
            broke.set()
            os.rename(dirs[0], dirs[0] + ".gone")
            Path(dirs[0]).write_text("dead disk")

    lm = open_manager(dirs, hook=hook, **{"log.segment.bytes": 4096})
    calls: list[str] = []
    lm.add_offline_listener(calls.append)
    tp, other = TopicPartition("src", 0), TopicPartition("other", 0)
    lm.change_replica_dir(tp, dirs[0])
    lm.change_replica_dir(other, dirs[2])
    log, bystander = lm.get_or_create_log(tp), lm.get_or_create_log(other)
    _fill(log, 300)
    _fill(bystander, 10)
    assert lm.change_replica_dir(tp, dirs[1]) is ErrorCode.NONE
    future = lm.get_future_log(tp)
    assert future is not None
    assert lm.await_idle(30)
    assert calls == [dirs[0]]
    assert lm.moves_in_progress() == []
    assert lm.is_partition_offline(tp)
    assert os.path.isdir(future.dir_path)  # files of a stopped move are not deleted
    with pytest.raises(KafkaStorageError):
        log.append(_tagged(300))
    _fill(bystander, 5, start=10)
    assert _values(bystander) == [f"{i:016d}".encode() for i in range(15)]


def test_many_partitions_moving_back_and_forth_under_load_lose_and_duplicate_nothing(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(
        dirs,
        **{
            "log.segment.bytes": 1 << 20,
            "num.replica.alter.log.dirs.threads": 2,
            # Far above what the producers append, so every move catches up.
            "replica.alter.log.dirs.io.max.bytes.per.second": 32 << 20,
        },
    )
    tps = [TopicPartition("stress", p) for p in range(4)]
    logs = {}
    for i, tp in enumerate(tps):
        lm.change_replica_dir(tp, dirs[i % 3])
        logs[tp] = lm.get_or_create_log(tp)
        _fill_padded(logs[tp], 300)  # 3 MB each: every move takes a while
    counts = dict.fromkeys(tps, 300)
    stop = threading.Event()
    errors: list[BaseException] = []

    def producer(mine: list[TopicPartition]) -> None:
        try:
            while not stop.is_set():
                for tp in mine:
                    logs[tp].append(_tagged(counts[tp]))
                    counts[tp] += 1
                    logs[tp].read(max(0, counts[tp] - 5), 200)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=producer, args=(tps[k::2],)) for k in range(2)]
    for t in threads:
        t.start()
    try:
        for round_ in range(3):
            for i, tp in enumerate(tps):
                assert lm.change_replica_dir(tp, dirs[(i + round_ + 1) % 3]) is ErrorCode.NONE
            assert lm.await_idle(60)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    assert all(n > 400 for n in counts.values())  # producing went on throughout
    for i, tp in enumerate(tps):
        log = lm.get_log(tp)
        assert log is logs[tp]
        assert log.logdir_path == dirs[(i + 3) % 3]
        assert _values(log) == [f"{n:016d}".encode() for n in range(counts[tp])]
    assert _no_leftovers(dirs) == []


def test_truncation_during_a_move_restarts_the_copy_from_the_first_segment(
    open_manager: Opener, dirs: list[str]
) -> None:
    hook = PauseAfterSegmentCopy()
    gate, paused = hook.gate, hook.paused
    lm = open_manager(dirs, hook=hook, **{"log.segment.bytes": 4096})
    tp = TopicPartition("restart", 0)
    lm.change_replica_dir(tp, dirs[0])
    log = lm.get_or_create_log(tp)
    _fill(log, 300)
    assert lm.change_replica_dir(tp, dirs[1]) is ErrorCode.NONE
    assert paused.wait(30)
    log.truncate_to(290)
    _fill(log, 20, start=1000)  # different data at the same offsets
    gate.set()
    assert lm.await_idle(30)
    assert lm.offline_dirs == []
    assert log.logdir_path == dirs[1]
    expected = [f"{i:016d}".encode() for i in [*range(290), *range(1000, 1020)]]
    assert _values(log) == expected


def test_clean_shutdown_in_the_middle_of_a_segment_copy_resumes_to_identical_bytes(
    open_manager: Opener, dirs: list[str]
) -> None:
    reached, gate = threading.Event(), threading.Event()
    seen = {"n": 0}

    def hook(step: str, tp: TopicPartition) -> None:
        if step == "copy_progress":
            seen["n"] += 1
            if seen["n"] == 2:
                reached.set()
                gate.wait(30)

    settings = {
        "log.segment.bytes": 512 * 1024,
        "replica.alter.log.dirs.io.max.bytes.per.second": 1_000_000,  # 64 KiB chunks
    }
    lm = open_manager(dirs, hook=hook, **settings)
    tp = TopicPartition("half", 0)
    lm.change_replica_dir(tp, dirs[0])
    log = lm.get_or_create_log(tp)
    _fill(log, 10_000)  # ~780 KB: two segments, each several chunks
    assert lm.change_replica_dir(tp, dirs[1]) is ErrorCode.NONE
    assert reached.wait(30)
    closer = threading.Thread(target=lm.close)
    closer.start()  # cancels the copy between two chunks of the first segment
    threading.Event().wait(0.1)
    gate.set()
    closer.join(30)
    assert not closer.is_alive()
    assert [n for n in os.listdir(dirs[1]) if n.endswith("-future")]
    again = open_manager(dirs, **{"log.segment.bytes": 512 * 1024})
    assert again.await_idle(60)
    moved = again.get_log(tp)
    assert moved is not None
    assert moved.logdir_path == dirs[1]
    assert _values(moved) == [f"{i:016d}".encode() for i in range(10_000)]
    assert _no_leftovers(dirs) == []


def _nice(tid: int) -> int:
    """The nice value of a thread of this process, as the kernel reports it (field 19)."""
    stat = Path(f"/proc/self/task/{tid}/stat").read_text()
    return int(stat.rpartition(")")[2].split()[16])


def _ionice(tid: int) -> str:
    """``ionice -p``'s view (util-linux) of a thread's I/O class and level."""
    return subprocess.run(
        ["ionice", "-p", str(tid)], check=True, capture_output=True, text=True
    ).stdout.strip()


class ThreadsAtSteps:
    """A mover hook noting which thread ran each step, and that thread's priorities then."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, int, str]] = {}

    def __call__(self, step: str, tp: TopicPartition) -> None:
        if step not in self.seen:
            tid = threading.get_native_id()
            self.seen[step] = (tid, _nice(tid), _ionice(tid))


def test_copies_run_at_low_cpu_and_io_priority_and_the_swap_at_the_brokers_own(
    open_manager: Opener, dirs: list[str]
) -> None:
    hook = ThreadsAtSteps()
    lm = open_manager(dirs, hook=hook, **{"log.segment.bytes": 64 << 10})
    tp = TopicPartition("nice", 0)
    log = lm.get_or_create_log(tp)
    _fill_padded(log, 20)
    dest = next(d for d in dirs if d != log.logdir_path)
    assert lm.change_replica_dir(tp, dest) is ErrorCode.NONE
    assert lm.await_idle(60)
    me = threading.get_native_id()
    copy_tid, copy_nice, copy_io = hook.seen["copy_progress"]
    swap_tid, swap_nice, swap_io = hook.seen["caught_up"]
    assert copy_tid != me
    assert (copy_nice, copy_io) == (MOVER_NICE, "best-effort: prio 7")
    # The swap holds the partition lock appends wait for: it must not be a low-priority holder.
    assert swap_tid not in (me, copy_tid)
    assert (swap_nice, swap_io) == (_nice(me), _ionice(me))
    assert hook.seen["after_future_renamed"][0] == swap_tid
    assert _nice(me) != MOVER_NICE  # the priority is the copy thread's, not the process's
    assert log.logdir_path == dest


class FsyncSpy:
    """Records every fsync (thread name, path, whether that thread held ``lock``), then syncs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lock: Any = None
        self.calls: list[tuple[str, str, bool]] = []
        real = os.fsync

        def spy(fd: int) -> None:
            owned = self.lock is not None and self.lock._is_owned()
            path = os.readlink(f"/proc/self/fd/{fd}")
            self.calls.append((threading.current_thread().name, path, owned))
            real(fd)

        monkeypatch.setattr(os, "fsync", spy)


def test_the_swap_fsyncs_only_the_source_directory_while_appends_wait_for_its_lock(
    open_manager: Opener, dirs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lm = open_manager(dirs, **{"log.segment.bytes": 256 << 10})
    tp = TopicPartition("swap", 0)
    log = lm.get_or_create_log(tp)
    _fill_padded(log, 100)
    source, dest = log.logdir_path, next(d for d in dirs if d != log.logdir_path)
    spy = FsyncSpy(monkeypatch)
    spy.lock = log.lock
    stop = threading.Event()

    def producer() -> None:  # appends keep arriving, so the catch-up copies under the lock
        i = 100
        while not stop.is_set():
            log.append(_tagged(i))
            i += 1

    thread = threading.Thread(target=producer, name="producer")
    thread.start()
    try:
        assert lm.change_replica_dir(tp, dest) is ErrorCode.NONE
        assert lm.await_idle(60)
    finally:
        stop.set()
        thread.join()
    assert log.logdir_path == dest
    swap = [(path, owned) for name, path, owned in spy.calls if name.endswith("-swap_0")]
    assert [path for path, owned in swap if owned] == [source]
    # The destination's rename is made durable too, after the lock was released.
    assert (dest, False) in swap
    # Under the lock otherwise only the producer's own rolls (which flush the rolled segment).
    assert {name for name, _, owned in spy.calls if owned and not name.endswith("-swap_0")} <= {
        "producer"
    }


def test_a_move_under_steady_appends_ends_however_slowly_the_disk_fsyncs(
    open_manager: Opener, dirs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy disk: every fsync takes 150 ms, and a producer appends ~10 MB/s, so more than
    the 1 MiB the swap may copy under the lock arrives during each. The mover flushes the
    future once and copies what arrived meanwhile without another flush, and the move ends
    while the appends go on, every batch once and in order. It used to flush again after each
    round until a flush left at most 1 MiB behind, which here never happened: the move ran
    for as long as the appends did."""
    lm = open_manager(dirs)
    tp = TopicPartition("busy", 0)
    log = lm.get_or_create_log(tp)
    _fill_padded(log, 500)  # 5 MB: more than the swap may copy
    dest = next(d for d in dirs if d != log.logdir_path)
    real = os.fsync

    def slow(fd: int) -> None:
        time.sleep(0.15)
        real(fd)

    monkeypatch.setattr(os, "fsync", slow)
    stop = threading.Event()
    appended = [500]

    def producer() -> None:
        while not stop.is_set():
            _fill_padded(log, 1, appended[0])
            appended[0] += 1
            time.sleep(0.001)  # ~10 KB a millisecond

    thread = threading.Thread(target=producer, name="producer")
    thread.start()
    try:
        assert lm.change_replica_dir(tp, dest) is ErrorCode.NONE
        deadline = time.monotonic() + 60
        while log.logdir_path != dest and time.monotonic() < deadline:
            time.sleep(0.05)
        moved_while_appending = log.logdir_path == dest and thread.is_alive()
    finally:
        stop.set()
        thread.join()
    assert moved_while_appending, f"still not moved after {appended[0] - 500} appends"
    assert lm.await_idle(60)
    assert _values(log) == [f"{i:016d}".encode() for i in range(appended[0])]


def test_a_swapped_log_keeps_the_futures_recovery_point_not_its_unflushed_end(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs)
    tp = TopicPartition("adopt", 0)
    live = lm.get_or_create_log(tp)
    _fill(live, 5)
    future = _future_log(lm, tp, dirs[1])
    for i in range(5):
        future.append(_tagged(i))
        if i == 2:
            future.flush()  # offsets 0-2 durable
    with live.lock:
        live.adopt(future)
    assert (live.log_end_offset, live.recovery_point) == (5, 3)
    live.flush()
    assert live.recovery_point == 5


def test_segment_snapshots_share_index_lists_and_adopting_a_longer_one_copies_only_new_entries(
    open_manager: Opener, dirs: list[str]
) -> None:
    lm = open_manager(dirs, **{"log.index.interval.bytes": 0})  # an entry per batch
    tp = TopicPartition("snap", 0)
    live = lm.get_or_create_log(tp)
    _fill(live, 6)
    future = _future_log(lm, tp, dirs[1])

    def adopt(state: SegmentState, start: int) -> None:
        fd = os.open(state.log_path, os.O_RDONLY)
        try:
            future.copy_segment_bytes(
                state, fd, start, state.size - start, source_logdir=live.logdir_path
            )
        finally:
            os.close(fd)
        future.adopt_segment_state(state)

    _, (first,) = live.snapshot()
    taken = first.index[: first.index_len]
    assert len(taken) == 6
    adopt(first, 0)
    (mine,) = future.segment_states()
    _fill(live, 4, start=6)
    _, (second,) = live.snapshot()
    assert second.index is first.index  # shared, not copied under the lock
    adopt(second, first.size)
    (now,) = future.segment_states()
    assert now.index is mine.index  # extended in place
    assert now.index[: now.index_len] == second.index[: second.index_len]
    assert now.time_index[: now.time_index_len] == second.time_index[: second.time_index_len]
    live.truncate_to(3)  # the source rebuilds its index into a new list
    assert first.index[: first.index_len] == taken
    assert [o for o, _ in live.segment_states()[0].index] == [0, 1, 2]


class PacedClock(FakeClock):
    """Fake time in which every reading is ``per_call`` seconds after the previous one: each
    copy step then seems to take that long, a fast or a slow disk at will."""

    def __init__(self, per_call: float) -> None:
        super().__init__()
        self.per_call = per_call

    def monotonic(self) -> float:
        self.advance(self.per_call)
        return super().monotonic()


@pytest.mark.parametrize("per_call", [0.005, 1.0])
def test_unthrottled_copy_steps_grow_to_64_mib_where_they_are_quick_and_stay_at_8_where_slow(
    open_manager: Opener, dirs: list[str], per_call: float
) -> None:
    """~100 MB in one segment: 8 MiB, then 64 MiB, then the rest where a step seems to take
    5 ms; 8 MiB steps, as every unthrottled step was before, where a step seems to take a
    second. Fewer steps, fewer hand-overs of the GIL between the copy and the appends."""
    seen = {"n": 0}

    def hook(step: str, tp: TopicPartition) -> None:
        if step == "copy_progress":
            seen["n"] += 1

    lm = open_manager(dirs, clock=PacedClock(per_call), hook=hook)
    tp = TopicPartition("steps", 0)
    lm.change_replica_dir(tp, dirs[0])
    log = lm.get_or_create_log(tp)
    _fill_padded(log, 10_000)
    assert lm.change_replica_dir(tp, dirs[1]) is ErrorCode.NONE
    assert lm.await_idle(60)
    moved = lm.get_log(tp)
    assert moved is not None
    assert moved.logdir_path == dirs[1]
    assert seen["n"] == (3 if per_call < STEP_SECONDS else -(-moved.size // STEP_MIN))
    assert _values(moved) == [f"{i:016d}".encode() for i in range(10_000)]


def test_a_future_replica_taken_just_before_its_swap_still_describes_itself_after_it(
    open_manager: Opener, dirs: list[str]
) -> None:
    """DescribeLogDirs takes the replicas under the manager's lock and reads them after it; a
    swap in between (the future is listed until the swap ends) must not leave the future with
    no segments -- its log end offset was ``_segments[-1]``, an IndexError that closed the
    asking client's connection in the middle of a benchmark."""
    taken: list[Log] = []

    def hook(step: str, moving: TopicPartition) -> None:
        if step == "after_future_renamed":
            fut = lm.get_future_log(moving)
            assert fut is not None
            taken.append(fut)

    lm = open_manager(dirs, hook=hook, **{"log.segment.bytes": 4096})
    tp = TopicPartition("race", 0)
    lm.change_replica_dir(tp, dirs[0])
    live = lm.get_or_create_log(tp)
    _fill(live, 100)
    assert lm.change_replica_dir(tp, dirs[1]) is ErrorCode.NONE
    assert lm.await_idle(30)
    assert live.logdir_path == dirs[1]
    (fut,) = taken
    assert (fut.log_end_offset, fut.size) == (100, live.size)
    (described,) = describe_replicas([(fut, True)], {tp: live}, None)
    assert (described.tp, described.size, described.offset_lag) == (tp, live.size, 0)
    assert _values(live) == [f"{i:016d}".encode() for i in range(100)]
