"""Pure parts of the server: .properties parsing, settings split, idempotent-producer rules."""

from __future__ import annotations

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.replication.producer_state import INT32_MAX, DuplicateBatch, ProducerStateTable
from spindle.broker.server.config import (
    ConfigError,
    parse_listeners,
    parse_properties,
    settings_from_properties,
)

TP = TopicPartition("t", 0)


def test_properties_follow_java_syntax() -> None:
    text = "# comment\n! also a comment\nnode.id = 3\nlog.dirs: /a,\\\n   /b\nempty.key\nlisteners=PLAINTEXT://127.0.0.1:0\n"
    assert parse_properties(text) == {
        "node.id": "3",
        "log.dirs": "/a,/b",
        "empty.key": "",
        "listeners": "PLAINTEXT://127.0.0.1:0",
    }


def test_settings_split_between_broker_and_storage() -> None:
    broker, storage = settings_from_properties(
        {
            "node.id": "2",
            "log.dirs": "/x,/y",
            "socket.request.max.bytes": "1000",
            "log.segment.bytes": "1048576",
        }
    )
    assert broker.node_id == 2
    assert broker.socket_request_max_bytes == 1000
    assert storage.log_dirs == ["/x", "/y"]
    assert storage.log_segment_bytes == 1048576


def test_bad_values_and_listeners_are_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"node\.id"):
        settings_from_properties({"log.dirs": "/x"})
    with pytest.raises(ConfigError, match=r"listeners"):
        settings_from_properties({"node.id": "1", "log.dirs": "/x", "listeners": "127.0.0.1:9092"})
    assert parse_listeners("PLAINTEXT://:9092,INTERNAL://[::1]:9093")[1].host == "::1"


def test_in_order_sequences_are_accepted_and_retries_are_duplicates() -> None:
    table = ProducerStateTable()
    table.check(TP, 7, 0, 0, 5)
    table.record(TP, 7, 0, 0, 5, 100, 104)
    table.check(TP, 7, 0, 5, 5)
    table.record(TP, 7, 0, 5, 5, 105, 109)
    with pytest.raises(DuplicateBatch) as dup:
        table.check(TP, 7, 0, 0, 5)
    assert dup.value.meta.base_offset == 100
    with pytest.raises(KafkaError) as gap:
        table.check(TP, 7, 0, 11, 1)
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epochs_fence_old_producers_and_restart_sequences() -> None:
    table = ProducerStateTable()
    table.record(TP, 7, 3, 0, 1, 0, 0)
    with pytest.raises(KafkaError) as old:
        table.check(TP, 7, 2, 1, 1)
    assert old.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as bumped:
        table.check(TP, 7, 4, 5, 1)
    assert bumped.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    table.check(TP, 7, 4, 0, 1)


def test_sequence_wraps_after_int32_max() -> None:
    table = ProducerStateTable()
    table.record(TP, 9, 0, INT32_MAX - 1, 2, 0, 1)
    table.check(TP, 9, 0, 0, 1)
    with pytest.raises(KafkaError):
        table.check(TP, 9, 0, 1, 1)


def test_only_the_last_five_batches_are_remembered() -> None:
    table = ProducerStateTable()
    for i in range(6):
        table.record(TP, 1, 0, i, 1, i, i)
    with pytest.raises(KafkaError) as old:
        table.check(TP, 1, 0, 0, 1)  # batch 0 fell out of the cache: no longer a known duplicate
    assert old.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(DuplicateBatch):
        table.check(TP, 1, 0, 1, 1)
