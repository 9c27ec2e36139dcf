"""Pure parts of the server: .properties parsing, settings split, idempotent-producer rules,
socket options."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

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
from spindle.broker.server.connection import set_send_buffer

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


def test_broker_level_min_insync_replicas_is_a_known_key() -> None:
    broker, _ = settings_from_properties(
        {"node.id": "1", "log.dirs": "/x", "min.insync.replicas": "2"}
    )
    assert broker.min_insync_replicas == 2
    with pytest.raises(ConfigError, match=r"min\.insync\.replicas"):
        settings_from_properties({"node.id": "1", "log.dirs": "/x", "min.insync.replicas": "0"})


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


def test_socket_send_buffer_defaults_to_kafkas_and_refuses_zero() -> None:
    base = {"node.id": "1", "log.dirs": "/x"}
    assert settings_from_properties(base)[0].socket_send_buffer_bytes == 102_400
    os_default = settings_from_properties({**base, "socket.send.buffer.bytes": "-1"})[0]
    assert os_default.socket_send_buffer_bytes == -1
    with pytest.raises(ConfigError, match=r"socket\.send\.buffer\.bytes"):
        settings_from_properties({**base, "socket.send.buffer.bytes": "0"})


async def test_connections_get_the_configured_send_buffer() -> None:
    buffers: list[int] = []

    def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        before = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        set_send_buffer(writer, -1)  # the OS default stays
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == before
        set_send_buffer(writer, 50_000)
        buffers.append(sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))
        writer.close()

    server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    for _ in range(100):
        if buffers:
            break
        await asyncio.sleep(0.05)
    writer.close()
    server.close()
    await server.wait_closed()
    assert buffers == [100_000]  # Linux doubles SO_SNDBUF for its bookkeeping (socket(7))


def test_settled_heap_is_frozen_and_later_garbage_still_collected() -> None:
    # In a child process: freezing is for the whole process, not this test run's heap.
    code = (
        "import gc, weakref\n"
        "from spindle.broker.server.__main__ import settle_heap\n"
        "settle_heap()\n"
        "frozen = gc.get_freeze_count()\n"
        "class Node: pass\n"
        "a, b = Node(), Node()\n"
        "a.other, b.other = b, a\n"
        "alive = weakref.ref(a)\n"
        "del a, b\n"
        "gc.collect()\n"
        "print(frozen, alive() is None)\n"
    )
    out = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert int(out[0]) > 10_000  # the imported broker's heap
    assert out[1] == "True"  # a cycle made after start-up is still freed
