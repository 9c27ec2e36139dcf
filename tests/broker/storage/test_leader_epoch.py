"""The leader-epoch cache (KIP-101/279): its rules as Kafka's ``LeaderEpochFileCache`` has
them, and its checkpoint file format. Pure: no disk here (see ``test_log_epochs.py``)."""

from __future__ import annotations

import pytest
from spindle.broker.storage.checkpoint import CheckpointFormatError
from spindle.broker.storage.leader_epoch import EpochEntry, LeaderEpochCache


def _cache(*pairs: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(EpochEntry(e, o) for e, o in pairs)


def _pairs(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries]


def test_assign_keeps_epochs_and_start_offsets_strictly_increasing() -> None:
    cache = LeaderEpochCache()
    assert cache.latest_epoch is None
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # same epoch, later offset: nothing new
    assert cache.assign(2, 10)
    assert cache.assign(3, 10)  # same start: epoch 2 had no records, it goes
    assert _pairs(cache) == [(0, 0), (3, 10)]
    # An epoch at or below the latest, or a start at or below the latest start, removes the
    # entries it contradicts (Kafka's maybeTruncateNonMonotonicEntries).
    assert cache.assign(1, 4)
    assert _pairs(cache) == [(0, 0), (1, 4)]
    assert cache.assign(0, 0)
    assert _pairs(cache) == [(0, 0)]
    with pytest.raises(ValueError, match="not valid"):
        cache.assign(-1, 3)


def test_start_epochs_takes_only_newer_epochs_and_skips_unstamped_batches() -> None:
    cache = _cache((1, 0))
    assert cache.start_epochs([(-1, 5), (1, 6), (3, 7), (3, 9), (2, 11), (4, 12)])
    assert _pairs(cache) == [(1, 0), (3, 7), (4, 12)]
    assert not cache.start_epochs([(-1, 20), (4, 21)])


@pytest.mark.parametrize(
    ("requested", "answer"),
    [
        (-1, (-1, -1)),  # UNDEFINED_EPOCH
        (5, (5, 120)),  # the latest epoch ends at the log end
        (3, (3, 100)),  # an older epoch ends where the next one starts
        (4, (3, 100)),  # an epoch never led: the largest known one below it
        (2, (2, 40)),  # below every entry: the first entry's start
        (7, (-1, -1)),  # above the latest: unknown
    ],
)
def test_end_offset_for_answers_as_kafka_does(requested: int, answer: tuple[int, int]) -> None:
    cache = _cache((3, 40), (5, 100))
    assert cache.end_offset_for(requested, log_end_offset=120) == answer


def test_end_offset_for_an_empty_cache_is_undefined() -> None:
    assert LeaderEpochCache().end_offset_for(0, log_end_offset=10) == (-1, -1)


def test_truncating_the_end_drops_epochs_starting_at_or_after_the_new_end() -> None:
    cache = _cache((0, 0), (2, 10), (4, 20))
    assert not cache.truncate_from_end(21)
    assert cache.truncate_from_end(20)
    assert _pairs(cache) == [(0, 0), (2, 10)]
    assert cache.truncate_from_end(0)
    assert _pairs(cache) == []


def test_raising_the_log_start_moves_the_epoch_holding_it() -> None:
    cache = _cache((0, 0), (2, 10), (4, 20))
    assert not cache.truncate_from_start(0)
    assert cache.truncate_from_start(15)
    assert _pairs(cache) == [(2, 15), (4, 20)]
    assert cache.truncate_from_start(20)
    assert _pairs(cache) == [(4, 20)]
    assert not cache.truncate_from_start(20)
    assert cache.truncate_from_start(25)
    assert _pairs(cache) == [(4, 25)]


def test_checkpoint_text_is_kafkas_format_and_round_trips() -> None:
    cache = _cache((0, 0), (3, 1520))
    assert cache.format() == b"0\n2\n0 0\n3 1520\n"
    assert LeaderEpochCache.parse(cache.format().decode()) == cache
    assert LeaderEpochCache.parse("0\n0\n") == LeaderEpochCache()


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0\n", "0\n1\nzero 0\n", "0\n1\n-1 0\n"],
    ids=["empty", "version", "count", "short-line", "not-a-number", "negative"],
)
def test_a_malformed_checkpoint_is_a_disk_error_naming_the_file(text: str) -> None:
    with pytest.raises(CheckpointFormatError, match="/d/t-0/leader-epoch-checkpoint"):
        LeaderEpochCache.parse(text, path="/d/t-0/leader-epoch-checkpoint")
