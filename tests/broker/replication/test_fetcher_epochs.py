"""The follower fetcher's leader-epoch handling on a real log (no leader here: the answers a
leader would send are given): a new leader epoch makes a partition truncate before it is
fetched again, the OffsetsForLeaderEpoch question carries the current and the latest epoch, a
``divergingEpoch`` cuts the log -- asking again when the follower never had the answered
epoch (KIP-279) -- and a replica without epochs falls back to its high watermark."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch
from spindle.broker.replication.fetcher import FetchSettings, ReplicaFetcher
from spindle.broker.storage import Log, LogManager

from ..storage.conftest import make_settings

TP = TopicPartition("t", 0)


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager.open(
        make_settings([str(tmp_path / "d")]), cluster_id="c", node_id=2, background=False
    )
    yield manager
    manager.close()


def _follower_log(logs: LogManager, epochs: list[int]) -> Log:
    """A follower's replica holding one batch per entry of ``epochs`` (its stamp)."""
    replica = logs.get_or_create_log(TP)
    fetched = b"".join(
        build_batch([b"x"], base_offset=o, partition_leader_epoch=e) for o, e in enumerate(epochs)
    )
    replica.append(fetched, assign_offsets=False)
    return replica


def _fetcher(logs: LogManager) -> ReplicaFetcher:
    return ReplicaFetcher(
        node_id=2, leader_id=1, endpoint=lambda _b: None, logs=logs, settings=FetchSettings()
    )


def _diverging(epoch: int, end_offset: int) -> SimpleNamespace:
    part = SimpleNamespace(
        partition_index=0,
        error_code=0,
        records=b"",
        high_watermark=0,
        diverging_epoch=SimpleNamespace(epoch=epoch, end_offset=end_offset),
    )
    return SimpleNamespace(responses=[SimpleNamespace(topic="t", partitions=[part])])


def test_a_new_leader_epoch_truncates_first_and_asks_with_both_epochs(logs: LogManager) -> None:
    _follower_log(logs, [0, 0, 1, 1])
    fetcher = _fetcher(logs)
    fetcher.set_partitions([TP], {TP: 2})
    assert fetcher.truncating == {TP}
    assert fetcher._epoch_asks() == {TP: (2, 1)}
    request = fetcher._request([TP])
    (sent,) = request.topics[0].partitions
    assert (sent.current_leader_epoch, sent.last_fetched_epoch) == (2, 1)
    fetcher.truncating.clear()
    fetcher.set_partitions([TP], {TP: 2})  # same epoch: nothing to find out again
    assert fetcher.truncating == set()
    fetcher.set_partitions([TP], {TP: 3})
    assert fetcher.truncating == {TP}


def test_diverging_epoch_cuts_the_log_where_it_parts_from_the_leader(logs: LogManager) -> None:
    replica = _follower_log(logs, [0, 0, 0, 1, 1, 1])
    fetcher = _fetcher(logs)
    fetcher.set_partitions([TP], {TP: 2})
    fetcher.truncating.clear()
    fetcher._apply(_diverging(1, 4))  # the leader's epoch 1 ended at 4
    assert replica.log_end_offset == 4
    assert [(e.epoch, e.start_offset) for e in replica.epochs.entries] == [(0, 0), (1, 3)]
    assert fetcher.truncating == set()


def test_an_epoch_the_follower_never_had_cuts_to_its_own_and_asks_again(logs: LogManager) -> None:
    replica = _follower_log(logs, [1, 1, 3, 3, 3])
    fetcher = _fetcher(logs)
    fetcher.set_partitions([TP], {TP: 4})
    fetcher.truncating.clear()
    fetcher._apply(_diverging(2, 4))  # the leader had epoch 2, not 3: cut to where 1 ended
    assert replica.log_end_offset == 2
    assert fetcher.truncating == {TP}
    assert fetcher._epoch_asks() == {TP: (4, 1)}  # next question: where did epoch 1 end?


def test_an_epoch_led_here_without_appending_goes_so_the_next_fetch_asks_from_the_last_real_one(
    logs: LogManager,
) -> None:
    """This replica led epoch 3 and lost it before appending; the new leader never had 3 and
    answers a fetch sent with last fetched epoch 3 divergingEpoch (1, 4), which cuts nothing.
    The empty epoch must still go: it used to stay the latest, so every fetch was answered
    divergingEpoch again and the replica never fetched another record nor rejoined the ISR."""
    replica = _follower_log(logs, [1, 1, 1, 1])
    replica.assign_leader_epoch(3)
    fetcher = _fetcher(logs)
    fetcher.set_partitions([TP], {TP: 4})
    fetcher.truncating.clear()
    fetcher._apply(_diverging(1, 4))
    assert replica.log_end_offset == 4
    assert fetcher.truncating == set()
    (sent,) = fetcher._request([TP]).topics[0].partitions
    assert (sent.fetch_offset, sent.last_fetched_epoch) == (4, 1)


def test_a_replica_without_epochs_truncates_to_its_high_watermark(logs: LogManager) -> None:
    replica = _follower_log(logs, [-1] * 5)
    replica.high_watermark = 2
    fetcher = _fetcher(logs)
    fetcher.set_partitions([TP], {TP: 1})
    assert fetcher._epoch_asks() == {}
    assert replica.log_end_offset == 2
    assert fetcher.truncating == set()


def _out_of_range(leader_log_start: int) -> SimpleNamespace:
    part = SimpleNamespace(
        partition_index=0,
        error_code=1,  # OFFSET_OUT_OF_RANGE
        records=b"",
        high_watermark=-1,
        log_start_offset=leader_log_start,
    )
    return SimpleNamespace(responses=[SimpleNamespace(topic="t", partitions=[part])])


def test_a_follower_below_the_leaders_log_start_starts_over_there_and_fetches_again(
    logs: LogManager,
) -> None:
    """Retention or DeleteRecords on the leader while this follower was away: its log end (3)
    is below the leader's log start (10); it used to ask from 3 forever."""
    replica = _follower_log(logs, [0, 0, 1])
    fetcher = _fetcher(logs)
    fetcher.set_partitions([TP], {TP: 1})
    fetcher.truncating.clear()
    fetcher._apply(_out_of_range(10))
    assert (replica.log_start_offset, replica.log_end_offset, replica.high_watermark) == (
        10,
        10,
        10,
    )
    assert replica.epochs.entries == []
    (sent,) = fetcher._request([TP]).topics[0].partitions
    assert (sent.fetch_offset, sent.last_fetched_epoch) == (10, -1)
    replica.append(
        build_batch([b"y"], base_offset=10, partition_leader_epoch=1), assign_offsets=False
    )
    assert replica.log_end_offset == 11
    assert [(e.epoch, e.start_offset) for e in replica.epochs.entries] == [(1, 10)]


def test_a_follower_beyond_the_leaders_log_end_asks_where_the_logs_part(logs: LogManager) -> None:
    replica = _follower_log(logs, [0, 0, 1])
    fetcher = _fetcher(logs)
    fetcher.set_partitions([TP], {TP: 1})
    fetcher.truncating.clear()
    fetcher._apply(_out_of_range(0))
    assert replica.log_end_offset == 3
    assert fetcher.truncating == {TP}


async def test_a_partition_no_longer_followed_when_the_leaders_epoch_answer_arrives_is_not_cut(
    logs: LogManager,
) -> None:
    """The OffsetsForLeaderEpoch answer arrives after the partition left this fetcher (this
    broker was elected its leader meanwhile): the answer is about a log this fetcher no
    longer follows, and cutting it would drop records the new leader holds (and the batches
    its producer state knows)."""
    replica = _follower_log(logs, [0, 0, 1, 1])
    fetcher = _fetcher(logs)
    fetcher.set_partitions([TP], {TP: 2})

    class Leader:
        async def call(self, request: object, response_cls: object, *, timeout_s: float) -> object:
            fetcher.set_partitions(())  # led here now: the fetcher stops following it
            part = SimpleNamespace(partition=0, error_code=0, leader_epoch=1, end_offset=2)
            return SimpleNamespace(topics=[SimpleNamespace(topic="t", partitions=[part])])

    await fetcher._truncate(Leader(), timeout_s=1)  # type: ignore[arg-type]
    assert replica.log_end_offset == 4
