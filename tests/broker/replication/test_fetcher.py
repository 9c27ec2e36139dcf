"""Follower fetching around a failed log directory (KIP-112): a replica whose directory went
offline is left out of the follower's fetches, so the partitions it follows from the same
leader in healthy directories keep replicating -- and the leader never sees the dead replica
fetch, which would make it ask to put the replica back into the ISR."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from spindle.broker.common.errors import KafkaStorageError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.replication.fetcher import FetchSettings, ReplicaFetcher
from spindle.broker.storage import LogManager

from ..storage.conftest import make_settings


def test_a_replica_in_a_failed_directory_is_left_out_of_fetches(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    logs = LogManager.open(make_settings(dirs), cluster_id="c", node_id=2, background=False)
    try:
        healthy, failed = TopicPartition("t", 0), TopicPartition("t", 1)
        logs.change_replica_dir(healthy, dirs[0])
        logs.change_replica_dir(failed, dirs[1])
        logs.get_or_create_log(healthy)
        logs.get_or_create_log(failed)
        fetcher = ReplicaFetcher(
            node_id=2,
            leader_id=1,
            endpoint=lambda _b: None,
            logs=logs,
            settings=FetchSettings(),
        )
        fetcher.set_partitions([healthy, failed])
        asked = [
            p.partition for t in fetcher._request([healthy, failed]).topics for p in t.partitions
        ]
        assert asked == [0, 1]
        with pytest.raises(KafkaStorageError), logs.failures.guard(dirs[1], "append"):
            raise OSError(errno.EROFS, "Read-only file system")
        assert logs.is_partition_offline(failed)
        asked = [
            p.partition for t in fetcher._request([healthy, failed]).topics for p in t.partitions
        ]
        assert asked == [0]
    finally:
        logs.close()
