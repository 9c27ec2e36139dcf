"""Re-homing a replica whose directory failed for real (tmpfs remounted read-only), live
(``LogManager.recreate_offline_replica``, the storage half of Spindle's AlterReplicaLogDirs
extension), and what a restart does once the failed directory is readable again: the
re-created copy wins, the old one is set aside as ``-stray`` (never deleted)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch
from spindle.broker.storage import LogManager
from spindle.broker.storage.logdir import StorageStartupError
from spindle.broker.storage.names import STRAY_SUFFIX

from .conftest import make_settings
from .faults import needs_root, remount_ro, tmpfs

TP = TopicPartition("t", 0)


@needs_root
def test_a_rehomed_replica_is_new_and_empty_and_wins_over_the_old_copy_at_restart(
    tmp_path: Path, open_manager: Callable[..., LogManager]
) -> None:
    with (
        tmpfs(str(tmp_path / "a")) as a,
        tmpfs(str(tmp_path / "b")) as b,
        tmpfs(str(tmp_path / "c")) as c,
    ):
        lm = open_manager([a, b, c])
        old = lm.get_or_create_log(TP)
        assert old.logdir_path == a  # first in log.dirs order: all empty
        for i in range(5):
            old.append(build_batch([f"r{i}".encode()]))
        lm.set_cordoned([c])
        # Not offline yet: nothing to re-home.
        assert lm.recreate_offline_replica(TP, b) is ErrorCode.REPLICA_NOT_AVAILABLE
        remount_ro(a)
        with pytest.raises(KafkaStorageError):
            old.append(build_batch([b"lost"]))
        assert lm.is_partition_offline(TP)
        assert lm.recreate_offline_replica(TP, a) is ErrorCode.KAFKA_STORAGE_ERROR
        assert lm.recreate_offline_replica(TP, c) is ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert lm.recreate_offline_replica(TP, str(tmp_path / "x")) is ErrorCode.LOG_DIR_NOT_FOUND
        assert lm.recreate_offline_replica(TP, b) is ErrorCode.NONE
        assert lm.recreate_offline_replica(TP, b) is ErrorCode.NONE  # asked again: nothing done
        fresh = lm.get_log(TP)
        assert fresh is not None
        assert fresh.logdir_path == b
        assert (fresh.log_start_offset, fresh.log_end_offset) == (0, 0)
        assert not lm.is_partition_offline(TP)
        fresh.append(build_batch([b"refetched"]))
        lm.close()

        subprocess.run(["mount", "-o", "remount,rw", a], check=True)  # the disk is back
        again = open_manager([a, b, c])
        kept = again.get_log(TP)
        assert kept is not None
        assert kept.logdir_path == b
        assert kept.log_end_offset == 1
        strays = [n for n in os.listdir(a) if n.startswith("t-0.") and n.endswith(STRAY_SUFFIX)]
        assert len(strays) == 1
        assert not os.path.exists(os.path.join(a, "t-0"))
        assert any(f.endswith(".log") for f in os.listdir(os.path.join(a, strays[0])))


def test_two_copies_neither_rehomed_still_refuse_start_up(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for path in (a, b):
        with LogManager.open(make_settings([path]), cluster_id="c", node_id=1) as lm:
            lm.get_or_create_log(TP)
    with pytest.raises(StorageStartupError, match="two live replicas of partition t-0"):
        LogManager.open(make_settings([a, b]), cluster_id="c", node_id=1, background=False)
