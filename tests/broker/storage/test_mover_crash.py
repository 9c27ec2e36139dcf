"""Crash-point tests for moves (seed 000, "Handle failure…"): a real child process moving a
replica is SIGKILLed at each step, restarted, and must come back with exactly the acknowledged
bytes and no orphan ``-future``/``-delete`` directory.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest
from spindle.broker.common.errors import ErrorCode, KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch, validate
from spindle.broker.storage import Log, LogManager

from .faults import Child

TS = 1_700_000_000_000
SETTINGS = {"log.segment.bytes": 4096, "file.delete.delay.ms": 0}
Opener = Callable[..., LogManager]


def _batch(values: list[str], base_offset: int) -> bytes:
    """The batch the child built, with the base offset the broker gave it."""
    return build_batch([v.encode() for v in values], base_offset=base_offset, timestamp_ms=TS)


def _all_bytes(log: Log) -> bytes:
    data = b""
    for state in log.segment_states():
        data += Path(state.log_path).read_bytes()
    return data


Acked = dict[tuple[str, int], list[tuple[int, list[str]]]]
InFlight = tuple[tuple[str, int], list[str]] | None


def _produce_move_and_kill(dirs: list[str], step: str, count: int) -> tuple[Acked, InFlight]:
    """Child: two partitions in dirs[0], move mv-0 to dirs[1] while producing, SIGKILL at
    ``step``. Returns the acknowledged batches and the one append in flight, if any."""
    child = Child({"dirs": dirs, "settings": SETTINGS, "pause_at": step, "pause_count": count})
    acked: Acked = {}
    in_flight: InFlight = None
    try:
        for p in (0, 1):
            assert child.call({"op": "create", "tp": ["mv", p], "dir": dirs[0]})["ok"]
            acked[("mv", p)] = []
            for i in range(60):
                values = [f"p{p}-{i}-" + "x" * 150]
                r = child.call({"op": "append", "tp": ["mv", p], "values": values})
                acked[("mv", p)].append((r["base"], values))
        assert child.call({"op": "move", "tp": ["mv", 0], "dir": dirs[1]})["code"] == "NONE"
        # Keep producing to both partitions until the child stops at the step. After the
        # first few hundred, at a pace the mover can overtake: its copy threads run at nice
        # 10, and on a busy machine appends flat out could keep it from ever catching up.
        paused = None
        for i in range(60, 20_000):
            if i > 500:
                time.sleep(0.002)
            key = ("mv", i % 2)
            values = [f"p{key[1]}-{i}-late"]
            child.send({"op": "append", "tp": list(key), "values": values})
            in_flight = (key, values)
            answer = child.receive()
            if "paused" in answer:
                paused = answer
                break
            acked[key].append((answer["base"], values))
            in_flight = None
        assert paused == {"paused": step, "tp": "mv-0"}
    finally:
        child.kill()
    return acked, in_flight


def _layout(d: str) -> list[str]:
    """Replica directory names of mv-0 in ``d``, the uuid part masked."""
    names = [n for n in os.listdir(d) if n.startswith("mv-0")]
    return sorted(n if n == "mv-0" else "mv-0.*" + n[n.rindex("-") :] for n in names)


LAYOUT_AT_KILL = {
    "copy_progress": (["mv-0"], ["mv-0.*-future"]),
    "caught_up": (["mv-0"], ["mv-0.*-future"]),
    "after_live_renamed": (["mv-0.*-delete"], ["mv-0.*-future"]),
    "after_future_renamed": (["mv-0.*-delete"], ["mv-0"]),
}


@pytest.mark.parametrize(
    ("step", "count"),
    [
        ("copy_progress", 3),  # mid-copy
        ("caught_up", 1),  # future complete and flushed, nothing renamed yet
        ("after_live_renamed", 1),  # live is -delete, future not yet renamed
        ("after_future_renamed", 1),  # future has the live name, -delete not yet removed
    ],
)
def test_move_killed_at_each_step_recovers_acknowledged_bytes_without_orphans(
    step: str, count: int, tmp_path: Path, open_manager: Opener
) -> None:
    dirs = [str(tmp_path / f"d{i}") for i in range(3)]
    acked, in_flight = _produce_move_and_kill(dirs, step, count)
    assert (_layout(dirs[0]), _layout(dirs[1])) == LAYOUT_AT_KILL[step]

    lm = open_manager(dirs)
    assert lm.await_idle(60)
    for (topic, p), batches in acked.items():
        log = lm.get_log(TopicPartition(topic, p))
        assert log is not None
        if p == 0:
            assert log.logdir_path == dirs[1]
        expected = b"".join(_batch(v, b) for b, v in batches)
        actual = _all_bytes(log)
        if in_flight is not None and in_flight[0] == (topic, p) and actual != expected:
            # The one unacknowledged append may or may not have reached the disk.
            expected += _batch(in_flight[1], batches[-1][0] + 1)
        assert actual == expected
    leftovers = [n for d in dirs for n in os.listdir(d) if n.endswith(("-future", "-delete"))]
    assert leftovers == []


def _file_bytes(directory: Path) -> dict[str, bytes]:
    """Every file of ``directory`` by name, with its bytes, except the offset and time
    indexes: start-up re-validates segments past the recovery point and writes their indexes
    (the swap does not fsync or write what the catch-up copied under the lock)."""
    return {
        n: (directory / n).read_bytes()
        for n in os.listdir(directory)
        if not n.endswith((".index", ".timeindex"))
    }


def test_lone_future_with_a_directory_offline_is_left_untouched_and_the_partition_offline(
    tmp_path: Path, open_manager: Opener
) -> None:
    dirs = [str(tmp_path / f"d{i}") for i in range(3)]
    _produce_move_and_kill(dirs, "after_live_renamed", 1)
    future_name = next(n for n in os.listdir(dirs[1]) if n.endswith("-future"))
    future_files = _file_bytes(Path(dirs[1], future_name))
    # The live copy could be on a directory we cannot read: the future must not be promoted.
    os.rename(dirs[2], dirs[2] + ".gone")
    Path(dirs[2]).write_text("broken disk")
    lm = open_manager(dirs)
    tp = TopicPartition("mv", 0)
    assert lm.offline_dirs == [dirs[2]]
    assert lm.get_log(tp) is None
    assert lm.is_partition_offline(tp)
    assert lm.offline_replica_count == 1
    with pytest.raises(KafkaStorageError):
        lm.get_or_create_log(tp)
    assert lm.change_replica_dir(tp, dirs[0]) is ErrorCode.KAFKA_STORAGE_ERROR
    assert lm.get_log(TopicPartition("mv", 1)) is not None
    lm.close()
    assert _file_bytes(Path(dirs[1], future_name)) == future_files


def test_resumed_move_recopies_future_segments_that_no_longer_match_the_source(
    tmp_path: Path, open_manager: Opener
) -> None:
    dirs = [str(tmp_path / f"d{i}") for i in range(3)]
    _produce_move_and_kill(dirs, "copy_progress", 4)
    future = next(n for n in os.listdir(dirs[1]) if n.endswith("-future"))
    copied = sorted(n for n in os.listdir(Path(dirs[1], future)) if n.endswith(".log"))
    assert len(copied) >= 3
    # Before the crash the source was truncated and re-appended: same offsets, other bytes.
    second = Path(dirs[0], "mv-0", copied[1])
    raw = bytearray(second.read_bytes())
    last = validate(raw)[-1]
    batch = bytearray(raw[last.position : last.position + last.size].replace(b"-", b"_"))
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    raw[last.position :] = batch
    second.write_bytes(raw)
    source_now = {n: Path(dirs[0], "mv-0", n).read_bytes() for n in copied}

    lm = open_manager(dirs)
    assert lm.await_idle(60)
    log = lm.get_log(TopicPartition("mv", 0))
    assert log is not None
    assert log.logdir_path == dirs[1]
    for name, content in source_now.items():
        assert Path(dirs[1], "mv-0", name).read_bytes() == content
