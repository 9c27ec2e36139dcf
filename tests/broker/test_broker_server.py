"""The broker process as a server: config validation, framing limits, pipelining, long-poll
fetch, ListOffsets, UNSUPPORTED_VERSION and graceful shutdown, all over real sockets."""

from __future__ import annotations

import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import ProduceResponse
from kafka.record.memory_records import MemoryRecords
from spindle.broker.common.errors import ErrorCode
from spindle.broker.records.batch import build_batch
from spindle.broker.server.config import ConfigError, settings_from_properties
from spindle.broker.server.connection import SMALL_BUFFER_BYTES

from .conftest import Broker, Etcd, make_broker
from .wire import (
    Wire,
    alter_replica_log_dirs,
    create_topic,
    fetch_all_values,
    fetch_request,
    init_producer_id,
    list_offsets,
    produce_batch_request,
    produce_request,
)


def _run_broker(config: Path) -> subprocess.CompletedProcess[str]:
    """A broker process on ``config`` run to its end (for configs it must refuse)."""
    return subprocess.run(
        [sys.executable, "-P", "-m", "spindle.broker", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )


def test_unknown_config_key_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown configuration key 'log\.dirz'"):
        settings_from_properties({"node.id": "1", "log.dirz": "/tmp/x"})
    with pytest.raises(ConfigError, match=r"socket\.request\.max\.bytes"):
        settings_from_properties(
            {"node.id": "1", "log.dirs": "/tmp/x", "socket.request.max.bytes": "ten"}
        )
    cfg = tmp_path / "bad.properties"
    cfg.write_text(
        "node.id=1\nlog.dirs=/tmp/x\nlisteners=PLAINTEXT://127.0.0.1:0\nnot.a.kafka.key=3\n"
    )
    proc = _run_broker(cfg)
    assert proc.returncode == 2
    assert "unknown configuration key 'not.a.kafka.key'" in proc.stderr


def test_pipelined_requests_are_answered_in_order(module_broker: Broker) -> None:
    with Wire(module_broker.port) as wire:
        create_topic(wire, "pipelined")
        frames = b"".join(
            Wire.encode(
                MetadataRequest[12](topics=None, allow_auto_topic_creation=False)
                if i % 2
                else produce_request("pipelined", 0, [f"m{i}".encode()]),
                corr=1000 + i,
            )
            for i in range(20)
        )
        wire.send_raw(frames)
        for i in range(20):
            cls, version = (MetadataResponse, 12) if i % 2 else (ProduceResponse, 9)
            resp = wire.recv(cls, version)
            assert resp.header.correlation_id == 1000 + i


def test_pipelined_megabyte_produces_and_a_mixed_fetch_arrive_whole(module_broker: Broker) -> None:
    # Four ~0.9 MB produce requests sent at once exceed what a connection buffers (its 2 MiB
    # READ_LIMIT_BYTES), so reading pauses and resumes between them; a fetch of two partitions
    # then answers one from the file (sendfile) and one from memory in the same response.
    big = [os.urandom(300_000) for _ in range(3)]
    with Wire(module_broker.port) as wire:
        create_topic(wire, "bulk", partitions=2)
        frames = b"".join(
            Wire.encode(produce_request("bulk", 0, big), corr=2000 + i) for i in range(4)
        )
        wire.send_raw(frames + Wire.encode(produce_request("bulk", 1, [b"small"]), corr=2004))
        for i in range(5):
            resp = wire.recv(ProduceResponse, 9)
            assert resp.header.correlation_id == 2000 + i
            part = resp.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, 3 * i if i < 4 else 0)
        req = fetch_request("bulk", partition_max_bytes=8 << 20, max_bytes=16 << 20)
        req.topics[0].partitions.append(
            FetchRequest.FetchTopic.FetchPartition(
                partition=1,
                current_leader_epoch=-1,
                fetch_offset=0,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=8 << 20,
            )
        )
        parts = wire.call(req, FetchResponse).responses[0].partitions
        values = {p.partition_index: _values(p.records) for p in parts}
        assert values == {0: big * 4, 1: [b"small"]}


def test_frames_split_anywhere_and_around_the_small_buffer_arrive_whole(
    module_broker: Broker,
) -> None:
    # Frames just under, at and just over what the connection gathers in its small buffer
    # (SMALL_BUFFER_BYTES), between tiny ones, sent in pieces cut at arbitrary bytes (single
    # bytes included) so the broker reads them split across its buffers in every way.
    rng = random.Random(17)
    with Wire(module_broker.port) as wire:
        create_topic(wire, "split")
        wire.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # (lengths of 60 KB and up to 1 MB take the same varint bytes)
        overhead = len(Wire.encode(produce_request("split", 0, [b"x" * 60_000]), corr=0)) - 60_004
        targets = [SMALL_BUFFER_BYTES + d for d in (-5, -4, -3, 0, 10, 200_000)]
        values = [rng.randbytes(t - overhead) for t in targets]
        frames = []
        for i, value in enumerate(values):
            frames.append(Wire.encode(produce_request("split", 0, [value]), corr=3000 + 2 * i))
            frames.append(
                Wire.encode(
                    MetadataRequest[12](topics=None, allow_auto_topic_creation=False),
                    corr=3001 + 2 * i,
                )
            )
        assert [len(f) - 4 for f in frames[::2]] == targets
        data = b"".join(frames)
        pos = 0
        while pos < len(data):
            step = rng.choice([1, 3, 4, 5, 1000, 40_000, 70_000])
            wire.send_raw(data[pos : pos + step])
            pos += step
            time.sleep(0.001)
        for i in range(len(frames)):
            cls, version = (MetadataResponse, 12) if i % 2 else (ProduceResponse, 9)
            resp = wire.recv(cls, version)
            assert resp.header.correlation_id == 3000 + i
            if not i % 2:
                part = resp.responses[0].partition_responses[0]
                assert (part.error_code, part.base_offset) == (0, i // 2)
        req = fetch_request("split", partition_max_bytes=8 << 20, max_bytes=16 << 20)
        parts = wire.call(req, FetchResponse).responses[0].partitions
        assert _values(parts[0].records) == values


def test_large_frames_of_changing_sizes_on_reused_buffers_arrive_intact(
    module_broker: Broker,
) -> None:
    # Large frames get pooled buffers, resized to each frame (server/frame_pool.py): one at a
    # time (each buffer is back in the pool before the next frame) and pipelined, growing and
    # shrinking, every record must read back exactly as sent -- no byte of an earlier frame.
    rng = random.Random(29)
    sizes = [900_000, 150_000, 1_000_000, 70_000, 700_000, 400_000, 1_040_000, 80_000]
    with Wire(module_broker.port) as wire:
        create_topic(wire, "pooled")
        values = [rng.randbytes(n) for n in sizes]
        for i, value in enumerate(values):
            resp = wire.call(produce_request("pooled", 0, [value]), ProduceResponse, corr=i)
            assert resp.responses[0].partition_responses[0].base_offset == i
        piped = [rng.randbytes(n) for n in reversed(sizes)]
        wire.send_raw(
            b"".join(
                Wire.encode(produce_request("pooled", 0, [v]), corr=100 + i)
                for i, v in enumerate(piped)
            )
        )
        for i in range(len(piped)):
            resp = wire.recv(ProduceResponse, 9)
            assert resp.header.correlation_id == 100 + i
            assert resp.responses[0].partition_responses[0].error_code == 0
        assert fetch_all_values(wire, "pooled") == values + piped


def test_requests_before_a_bad_frame_are_answered_before_it_closes(module_broker: Broker) -> None:
    with Wire(module_broker.port) as wire:
        wire.send_raw(
            Wire.encode(MetadataRequest[12](topics=None, allow_auto_topic_creation=False), corr=77)
            + struct.pack(">i", -1)
        )
        assert wire.recv(MetadataResponse, 12).header.correlation_id == 77
        assert wire.is_closed_by_peer()


def test_oversized_frame_closes_only_that_connection(module_broker: Broker) -> None:
    with Wire(module_broker.port) as bad, Wire(module_broker.port) as good:
        bad.send_raw(struct.pack(">i", 104_857_600 + 1) + b"\x00" * 16)
        assert bad.is_closed_by_peer()
        resp = good.call(
            ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
            ApiVersionsResponse,
        )
        assert resp.error_code == 0
    assert "larger than socket.request.max.bytes" in module_broker.log_text()


def test_api_versions_too_new_gets_unsupported_version_in_v0(module_broker: Broker) -> None:
    with Wire(module_broker.port) as wire:
        # header v2 for ApiVersions v7 (unknown to the broker), then an unreadable body
        raw = struct.pack(">hhih", 18, 7, 55, 3) + b"cli" + b"\x00" + b"\x99\x98"
        wire.send_raw(struct.pack(">i", len(raw)) + raw)
        payload = wire.recv_frame()
        assert struct.unpack(">i", payload[:4])[0] == 55
        resp = ApiVersionsResponse.decode(payload[4:], version=0)
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert any(k.api_key == 35 and k.max_version == 4 for k in resp.api_keys)


def test_unsupported_produce_version_closes_the_connection(module_broker: Broker) -> None:
    with Wire(module_broker.port) as wire:
        raw = struct.pack(">hhih", 0, 99, 1, 1) + b"c" + b"\x00" * 10
        wire.send_raw(struct.pack(">i", len(raw)) + raw)
        assert wire.is_closed_by_peer()


def test_long_poll_fetch_returns_when_data_arrives(module_broker: Broker) -> None:
    with Wire(module_broker.port) as fetcher, Wire(module_broker.port) as producer:
        create_topic(producer, "longpoll")
        req = fetch_request("longpoll", max_wait_ms=30_000, min_bytes=1)
        fetcher.send(req, corr=7)
        done = threading.Event()
        result: list[object] = []

        def wait() -> None:
            result.append(fetcher.recv(FetchResponse, 12))
            done.set()

        t = threading.Thread(target=wait)
        t.start()
        assert not done.wait(0.5), "fetch with min_bytes=1 answered before any data existed"
        producer.call(produce_request("longpoll", 0, [b"hello"]), ProduceResponse)
        t.join(30)
        resp = result[0]
        part = resp.responses[0].partitions[0]  # type: ignore[attr-defined]
        assert part.error_code == 0
        assert part.high_watermark == 1
        assert b"hello" in part.records


def test_list_offsets_earliest_and_latest(module_broker: Broker) -> None:
    with Wire(module_broker.port) as wire:
        create_topic(wire, "offsets")
        for i in range(3):
            wire.call(produce_request("offsets", 0, [b"a", b"b"]), ProduceResponse, corr=i)
        answers = {}
        for ts in (-2, -1):
            (part,) = list_offsets(wire, "offsets", ts)
            assert part.error_code == 0
            answers[ts] = part.offset
        assert answers == {-2: 0, -1: 6}


def test_sigterm_shuts_down_cleanly_and_data_survives_restart(tmp_path: Path, etcd: Etcd) -> None:
    broker = make_broker(tmp_path, etcd, dirs=2)
    broker.start()
    try:
        with Wire(broker.port) as wire:
            create_topic(wire, "durable", partitions=2)
            for p in (0, 1):
                resp = wire.call(produce_request("durable", p, [b"x" * 100] * 10), ProduceResponse)
                assert resp.responses[0].partition_responses[0].error_code == 0
        assert broker.stop() == 0
        for d in broker.log_dirs:
            assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown")), d
        broker.start()
        with Wire(broker.port) as wire:
            parts = list_offsets(wire, "durable", -1, partitions=(0, 1))
            assert [p.offset for p in parts] == [10, 10]
    finally:
        broker.stop()


def test_unreachable_etcd_stops_start_up_with_a_clear_message(tmp_path: Path) -> None:
    cfg = tmp_path / "server.properties"
    cfg.write_text(
        f"node.id=1\nlog.dirs={tmp_path / 'd'}\nlisteners=PLAINTEXT://127.0.0.1:0\n"
        "spindle.etcd.endpoints=http://127.0.0.1:9\n"
    )
    proc = _run_broker(cfg)
    assert proc.returncode == 1
    assert "cannot start: no etcd endpoint answered" in proc.stderr


def test_list_offsets_by_timestamp_finds_the_first_later_batch(module_broker: Broker) -> None:
    with Wire(module_broker.port) as wire:
        create_topic(wire, "by-time")
        for i, ts in enumerate((1_000, 2_000, 3_000)):
            batch = build_batch([b"a", b"b"], timestamp_ms=ts)
            req = produce_batch_request("by-time", 0, batch, acks=1)
            assert (
                wire.call(req, ProduceResponse, corr=i)
                .responses[0]
                .partition_responses[0]
                .error_code
                == 0
            )
        found = {}
        for ts in (0, 1_500, 3_000, 9_999):
            (part,) = list_offsets(wire, "by-time", ts)
            assert part.error_code == 0
            found[ts] = part.offset
        assert found == {0: 0, 1_500: 2, 3_000: 4, 9_999: -1}


def test_acked_records_are_readable_after_a_crash_restart(tmp_path: Path, etcd: Etcd) -> None:
    broker = make_broker(tmp_path, etcd, dirs=2)
    broker.start()
    try:
        with Wire(broker.port) as wire:
            create_topic(wire, "crashy")
            for i in range(10):
                resp = wire.call(
                    produce_request("crashy", 0, [f"r{i}".encode()]), ProduceResponse, corr=i
                )
                assert resp.responses[0].partition_responses[0].error_code == 0
        broker.kill()  # SIGKILL: no clean shutdown, checkpoints may lag
        broker.start()
        with Wire(broker.port) as wire:
            assert fetch_all_values(wire, "crashy") == [f"r{i}".encode() for i in range(10)]
    finally:
        broker.stop()


def test_missing_replica_is_recreated_in_the_directory_the_metadata_assigns(
    tmp_path: Path, etcd: Etcd
) -> None:
    import shutil

    broker = make_broker(tmp_path, etcd, dirs=3)
    broker.start()
    try:
        crowded = broker.log_dirs[2]
        with Wire(broker.port) as wire:
            alter_replica_log_dirs(wire, crowded, ["c1", "c2", "c3"])
            for n in ("c1", "c2", "c3"):
                create_topic(wire, n)
        assert {"c1-0", "c2-0", "c3-0"} <= set(os.listdir(crowded))
        broker.stop()
        shutil.rmtree(os.path.join(crowded, "c1-0"))
        broker.start()
        # Least-loaded placement would pick an empty dir; the metadata says the crowded one.
        assert os.path.isdir(os.path.join(crowded, "c1-0"))
    finally:
        broker.stop()


def test_idempotent_duplicates_are_dropped_across_a_restart(tmp_path: Path, etcd: Etcd) -> None:

    broker = make_broker(tmp_path, etcd, dirs=1)
    broker.start()
    try:
        with Wire(broker.port) as wire:
            create_topic(wire, "idem")
            init = init_producer_id(wire)
        pid, epoch = init.producer_id, init.producer_epoch

        def produce(wire: Wire, seq: int) -> tuple[int, int]:
            batch = build_batch(
                [b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=seq
            )
            req = produce_batch_request("idem", 0, batch, acks=-1)
            part = wire.call(req, ProduceResponse).responses[0].partition_responses[0]
            return part.error_code, part.base_offset

        with Wire(broker.port) as wire:
            assert produce(wire, 0) == (0, 0)
            assert produce(wire, 2) == (0, 2)
        assert broker.stop() == 0
        broker.start()
        with Wire(broker.port) as wire:
            assert produce(wire, 2) == (0, 2)  # the retry of an acked batch: not written again
            assert produce(wire, 9)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            assert produce(wire, 4) == (0, 4)
            assert fetch_all_values(wire, "idem") == [b"a", b"b"] * 3
    finally:
        broker.stop()


def _values(records: bytes) -> list[bytes]:
    out: list[bytes] = []
    batches = MemoryRecords(records)
    while batches.has_next():
        out += [r.value for r in batches.next_batch()]
    return out


def test_metadata_creates_a_missing_topic_only_when_the_request_allows_it(
    module_broker: Broker,
) -> None:
    """Kafka's Metadata v4+: ``allow_auto_topic_creation`` false answers an unknown topic
    UNKNOWN_TOPIC_OR_PARTITION and creates nothing; true creates it (auto.create.topics.enable
    is on by default)."""
    with Wire(module_broker.port) as wire:
        for allow, corr in ((False, 1), (True, 2), (False, 3)):
            resp = wire.call(
                MetadataRequest[12](
                    topics=[
                        MetadataRequest[12].MetadataRequestTopic(topic_id=None, name="on-demand")
                    ],
                    allow_auto_topic_creation=allow,
                    include_topic_authorized_operations=False,
                ),
                MetadataResponse,
                corr=corr,
            )
            (topic,) = resp.topics
            if corr == 1:
                assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                assert topic.error_code in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
                assert len(topic.partitions) >= 1
