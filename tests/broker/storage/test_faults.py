"""A failed log directory goes offline once and the others keep serving (KIP-112), on real
file systems: a tmpfs remounted read-only, a full tmpfs, lost permissions, a dir replaced by a
file. Each test checks: the failed directory is offline exactly once, the other directories
accept appends and serve reads, and no byte already in a good directory changed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch, validate
from spindle.broker.storage import Log, LogManager

from .faults import Child, assert_bytes_kept, log_bytes, needs_root, remount_ro, tmpfs

pytestmark = [needs_root, pytest.mark.root]
Opener = Callable[..., LogManager]


@pytest.fixture
def victim_dirs(tmp_path: Path) -> Iterator[list[str]]:
    """Three log dirs; the second is its own small tmpfs (the one that fails)."""
    dirs = [str(tmp_path / "good0"), str(tmp_path / "victim"), str(tmp_path / "good2")]
    with tmpfs(dirs[1], size="2m"):
        yield dirs


def _spread(lm: LogManager, dirs: list[str]) -> dict[str, Log]:
    """One partition per directory, each with a few batches."""
    logs = {}
    for i, d in enumerate(dirs):
        tp = TopicPartition("fault", i)
        lm.change_replica_dir(tp, d)
        log = lm.get_or_create_log(tp)
        assert log.logdir_path == d
        for j in range(5):
            log.append(build_batch([f"{d}-{j}".encode() * 10]))
        logs[d] = log
    return logs


def _spread_watched(
    open_manager: Opener, dirs: list[str]
) -> tuple[LogManager, dict[str, Log], list[str], dict[str, bytes]]:
    """A manager over ``dirs`` with :func:`_spread` partitions, the offline dirs its listener
    was told of, and the bytes of the two good dirs before the fault."""
    lm = open_manager(dirs)
    calls: list[str] = []
    lm.add_offline_listener(calls.append)
    logs = _spread(lm, dirs)
    return lm, logs, calls, log_bytes([dirs[0], dirs[2]])


def _assert_only_victim_failed(
    lm: LogManager,
    logs: dict[str, Log],
    dirs: list[str],
    calls: list[str],
    before: dict[str, bytes],
) -> None:
    victim = dirs[1]
    assert calls == [victim]
    assert lm.offline_dirs == [victim]
    assert (lm.offline_log_directory_count, lm.offline_replica_count) == (1, 1)
    with pytest.raises(KafkaStorageError):  # offline at once, without touching the disk
        logs[victim].append(build_batch([b"again"]))
    assert calls == [victim]
    errors = {d.path: d.error for d in lm.describe_dirs()}
    assert errors == {
        dirs[0]: ErrorCode.NONE,
        victim: ErrorCode.KAFKA_STORAGE_ERROR,
        dirs[2]: ErrorCode.NONE,
    }
    good = [dirs[0], dirs[2]]
    for d in good:
        r = logs[d].append(build_batch([b"still serving"]))
        data = logs[d].read(0, 1 << 20).records
        assert [h.base_offset for h in validate(data)][-1] == r.base_offset
    # A new replica avoids the failed directory.
    fresh = lm.get_or_create_log(TopicPartition("fresh", 0))
    assert fresh.logdir_path in good
    lm.flush_and_checkpoint()
    assert_bytes_kept(before, good)


def test_read_only_remount_takes_only_that_dir_offline_once(
    open_manager: Opener, victim_dirs: list[str]
) -> None:
    lm, logs, calls, before = _spread_watched(open_manager, victim_dirs)
    remount_ro(victim_dirs[1])
    with pytest.raises(KafkaStorageError, match="Read-only file system"):
        logs[victim_dirs[1]].append(build_batch([b"lost"]))
    _assert_only_victim_failed(lm, logs, victim_dirs, calls, before)
    # Offline stays offline until restart, even once the disk is writable again.
    subprocess.run(["mount", "-o", "remount,rw", victim_dirs[1]], check=True)
    victim_data = logs[victim_dirs[1]].dir_path
    with pytest.raises(KafkaStorageError):
        logs[victim_dirs[1]].read(0, 100)
    # After a restart the repaired directory serves again, with every acknowledged batch.
    lm.close()
    again = open_manager(victim_dirs)
    assert again.offline_dirs == []
    revived = again.get_log(TopicPartition("fault", 1))
    assert revived is not None
    assert revived.dir_path == victim_data
    assert [h.base_offset for h in validate(revived.read(0, 1 << 20).records)] == list(range(5))


def test_full_disk_takes_only_that_dir_offline_once(
    open_manager: Opener, victim_dirs: list[str]
) -> None:
    lm, logs, calls, before = _spread_watched(open_manager, victim_dirs)
    big = build_batch([os.urandom(1000) for _ in range(100)])

    def fill() -> None:
        for _ in range(100):  # 2 MiB tmpfs: full within 21 batches of 100 KB
            logs[victim_dirs[1]].append(big)

    with pytest.raises(KafkaStorageError, match="No space left on device"):
        fill()
    _assert_only_victim_failed(lm, logs, victim_dirs, calls, before)


def _first_failure(lm: LogManager, log: Log, how: str) -> None:
    """The first operation that touches the failed directory, as Kafka's LogDirFailureTest
    varies it: an append, a segment roll, a checkpoint, a flush."""
    if how == "append":
        log.append(build_batch([b"lost"]))
    elif how == "roll":
        log.roll()
    elif how == "checkpoint":
        lm.checkpoint_dir(log.logdir_path)
    else:
        log.flush()


@pytest.mark.parametrize("how", ["append", "roll", "checkpoint", "flush"])
def test_directory_replaced_by_a_file_takes_only_that_dir_offline_once(
    open_manager: Opener, dirs: list[str], how: str
) -> None:
    lm, logs, calls, before = _spread_watched(open_manager, dirs)
    os.rename(dirs[1], dirs[1] + ".gone")  # Kafka's own injection: the dir becomes a file
    Path(dirs[1]).write_text("I used to be a log directory")
    with pytest.raises(KafkaStorageError, match="Not a directory"):
        _first_failure(lm, logs[dirs[1]], how)
    _assert_only_victim_failed(lm, logs, dirs, calls, before)


@pytest.fixture
def owned_dirs() -> Iterator[list[str]]:
    """Three log dirs owned by root (the child's user) with mode 0755; permissions restored and
    everything removed afterwards."""
    base = tempfile.mkdtemp(prefix="spindle-perm-", dir="/tmp")
    dirs = [os.path.join(base, n) for n in ("good0", "victim", "good2")]
    for d in dirs:
        os.makedirs(d, mode=0o755)
    try:
        yield dirs
    finally:
        for d in dirs:
            if os.path.isdir(d):
                os.chmod(d, 0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_unreadable_directory_at_start_is_offline_and_the_others_serve(
    owned_dirs: list[str],
) -> None:
    dirs = owned_dirs
    os.chmod(dirs[1], 0o000)
    child = Child({"dirs": dirs}, obeys_file_modes=True)
    try:
        state = child.call({"op": "state"})
        assert state["offline_dirs"] == [dirs[1]]
        assert state["errors"] == {dirs[0]: "NONE", dirs[1]: "KAFKA_STORAGE_ERROR", dirs[2]: "NONE"}
        for p in range(4):
            created = child.call({"op": "create", "tp": ["cold", p]})
            assert created["dir"] in (dirs[0], dirs[2])
            assert child.call({"op": "append", "tp": ["cold", p], "values": ["v"]})["ok"]
        assert child.call({"op": "close"}) == {"ok": True}
        assert child.proc.wait(30) == 0
    finally:
        child.kill()


def test_permission_loss_takes_only_that_dir_offline_once(owned_dirs: list[str]) -> None:
    # Root ignores permissions, so the storage engine runs in a child that obeys file modes.
    dirs = owned_dirs
    child = Child({"dirs": dirs, "settings": {"log.segment.bytes": 600}}, obeys_file_modes=True)
    try:
        tps = {d: ["perm", i] for i, d in enumerate(dirs)}
        for d, tp in tps.items():
            assert child.call({"op": "create", "tp": tp, "dir": d}) == {"ok": True, "dir": d}
            for j in range(3):
                assert child.call({"op": "append", "tp": tp, "values": [f"{j}" * 100]})["ok"]
        before = log_bytes([dirs[0], dirs[2]])
        os.chmod(dirs[1], 0o000)  # the owner (the child) loses access; open fds stay usable
        failed = child.call({"op": "append", "tp": tps[dirs[1]], "values": ["x" * 300]})
        assert failed["error"] == "KAFKA_STORAGE_ERROR"
        assert "Permission denied" in failed["message"]
        again = child.call({"op": "append", "tp": tps[dirs[1]], "values": ["y"]})
        assert again["error"] == "KAFKA_STORAGE_ERROR"
        for d in (dirs[0], dirs[2]):
            for _ in range(4):  # rolls new segments: creates files in the good dirs
                assert child.call({"op": "append", "tp": tps[d], "values": ["z" * 300]})["ok"]
            assert len(child.call({"op": "read_all", "tp": tps[d]})["hex"]) > 0
        state = child.call({"op": "state"})
        assert state["listener_calls"] == [dirs[1]]
        assert state["offline_dirs"] == [dirs[1]]
        assert (state["offline_log_directory_count"], state["offline_replica_count"]) == (1, 1)
        assert state["errors"] == {
            dirs[0]: "NONE",
            dirs[1]: "KAFKA_STORAGE_ERROR",
            dirs[2]: "NONE",
        }
        assert child.call({"op": "close"}) == {"ok": True}
        assert child.proc.wait(30) == 0
        assert_bytes_kept(before, [dirs[0], dirs[2]])
    finally:
        child.kill()
