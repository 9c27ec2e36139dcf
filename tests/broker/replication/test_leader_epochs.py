"""Leader-epoch rules of replication (pure): fencing, the leader's divergence check, and where
a follower truncates to -- including the scenarios KIP-101 and KIP-279 were written for."""

from __future__ import annotations

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.replication.leader_epochs import (
    Truncation,
    check_current_epoch,
    diverging_epoch,
    truncation_point,
)
from spindle.broker.storage.leader_epoch import EpochEntry, LeaderEpochCache

TP = TopicPartition("t", 0)


@pytest.mark.parametrize(
    ("requested", "code"),
    [
        (-1, None),
        (5, None),
        (4, ErrorCode.FENCED_LEADER_EPOCH),
        (6, ErrorCode.UNKNOWN_LEADER_EPOCH),
    ],
)
def test_current_leader_epoch_is_fenced_as_kafka_does(
    requested: int, code: ErrorCode | None
) -> None:
    if code is None:
        check_current_epoch(TP, 5, requested)
        return
    with pytest.raises(KafkaError) as info:
        check_current_epoch(TP, 5, requested)
    assert info.value.code is code


@pytest.mark.parametrize(
    ("leader_end", "last_epoch", "fetch_offset", "expected"),
    [
        ((3, 10), -1, 12, None),  # no epoch sent: not checked
        ((3, 10), 3, 10, None),  # a prefix of the leader's log
        ((3, 10), 3, 8, None),
        ((3, 10), 3, 12, (3, 10)),  # the follower has epoch-3 records the leader does not
        ((2, 7), 3, 7, (2, 7)),  # the leader never had epoch 3
    ],
)
def test_leader_reports_divergence_only_when_the_follower_is_past_the_epochs_end(
    leader_end: tuple[int, int],
    last_epoch: int,
    fetch_offset: int,
    expected: tuple[int, int] | None,
) -> None:
    assert diverging_epoch(leader_end, last_epoch, fetch_offset) == expected


def _cut(leader_end: tuple[int, int], *pairs: tuple[int, int], leo: int, hw: int = 0) -> Truncation:
    """Where a follower whose epoch cache holds ``pairs`` truncates to, given the leader's
    answer ``leader_end``."""
    cache = LeaderEpochCache(EpochEntry(e, o) for e, o in pairs)
    return truncation_point(
        leader_end,
        local_end_for=lambda epoch: cache.end_offset_for(epoch, leo),
        log_end_offset=leo,
        high_watermark=hw,
    )


def test_kip101_scenario_1_a_restarted_follower_keeps_committed_records_above_its_hw() -> None:
    # The follower had offsets 0-1 (epoch 0) but its high watermark was still 1 when it
    # restarted. Truncating to the HW would drop offset 1, which the leader had committed.
    assert _cut((0, 2), (0, 0), leo=2, hw=1) == Truncation(2, True)


def test_kip101_scenario_2_a_follower_drops_the_old_leaders_uncommitted_tail() -> None:
    # Old leader wrote offsets 0-2 at epoch 0; the new leader (epoch 1) had only 0-1 and wrote
    # a different offset 2. The old leader, now following, asks for epoch 0: it ended at 2.
    assert _cut((0, 2), (0, 0), leo=3, hw=3) == Truncation(2, True)


def test_kip279_the_follower_cuts_to_its_own_epoch_below_the_leaders_answer_and_asks_again() -> (
    None
):
    # Fast leader changes: the follower has epochs 1 and 3; the leader never had 3 and answers
    # epoch 2 ending at 20. The follower never had epoch 2, so it cuts to where its epoch 1
    # ends (15) and asks again for epoch 1.
    point = _cut((2, 20), (1, 0), (3, 15), leo=30)
    assert point == Truncation(15, False)
    # Asked again for epoch 1, the leader says it ended at 12: the follower ends at 12.
    assert _cut((1, 12), (1, 0), leo=15) == Truncation(12, True)


def test_a_leader_without_epochs_leaves_the_follower_its_high_watermark() -> None:
    assert _cut((-1, -1), (4, 0), leo=9, hw=6) == Truncation(6, True)


def test_an_answer_without_an_epoch_truncates_to_the_leaders_end() -> None:
    assert _cut((-1, 5), (4, 0), leo=9) == Truncation(5, True)


def test_never_truncates_beyond_the_local_log_end() -> None:
    assert _cut((4, 50), (4, 0), leo=9) == Truncation(9, True)
