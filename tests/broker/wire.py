"""A blocking raw-socket Kafka client for tests that need exact bytes on the wire."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

from kafka.protocol.admin import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.record import MemoryRecords
from spindle.broker.records.batch import build_batch


class Wire:
    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def encode(msg: Any, corr: int, client_id: str = "wire") -> bytes:
        msg.with_header(correlation_id=corr, client_id=client_id)
        return bytes(msg.encode(header=True, framed=True))

    def send(self, msg: Any, corr: int = 1) -> None:
        self.sock.sendall(self.encode(msg, corr))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def recv(self, cls: Any, version: int) -> Any:
        return cls.decode(self.recv_frame(), version=version, header=True)

    def call(self, msg: Any, response_cls: Any, corr: int = 1) -> Any:
        self.send(msg, corr)
        return self.recv(response_cls, msg.API_VERSION)

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def is_closed_by_peer(self) -> bool:
        """True if the broker closed the connection (EOF or reset)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True


def fetch_request(
    topic: str,
    offset: int = 0,
    *,
    partition: int = 0,
    partition_max_bytes: int = 1 << 20,
    max_bytes: int = 1 << 20,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
) -> Any:
    """A consumer's Fetch v12 for one partition."""
    return FetchRequest[12](
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=[],
        rack_id="",
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=partition_max_bytes,
                    )
                ],
            )
        ],
    )


def produce_request(topic: str, partition: int, values: list[bytes], acks: int = 1) -> Any:
    """A Produce v9 of one batch of ``values``."""
    return produce_batch_request(topic, partition, build_batch(values), acks)


def produce_batch_request(topic: str, partition: int, batch: bytes, acks: int = 1) -> Any:
    """A Produce v9 of one ready-made record batch (own timestamps, producer ids, ...)."""
    return ProduceRequest[9](
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=partition, records=batch
                    )
                ],
            )
        ],
    )


def create_topic(wire: Wire, name: str, partitions: int = 1) -> None:
    """CreateTopics v7 with replication factor 1; fails the test unless it succeeded."""
    req = CreateTopicsRequest[7](
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=[],
                configs=[],
            )
        ],
        timeout_ms=5000,
        validate_only=False,
    )
    resp = wire.call(req, CreateTopicsResponse, corr=99)
    assert resp.topics[0].error_code == 0, resp


def fetch_all_values(wire: Wire, topic: str, partition: int = 0) -> list[bytes]:
    """Every record value of a partition, read with raw Fetch v12 requests from offset 0."""
    values: list[bytes] = []
    offset = 0
    while True:
        req = fetch_request(topic, offset, partition=partition)
        part = wire.call(req, FetchResponse).responses[0].partitions[0]
        assert part.error_code == 0
        records = MemoryRecords(part.records)
        got = False
        while records.has_next():
            batch = records.next_batch()
            for rec in batch:
                values.append(rec.value)
                offset = rec.offset + 1
                got = True
        if not got or offset >= part.high_watermark:
            return values


def list_offsets(
    wire: Wire, topic: str, timestamp: int, partitions: tuple[int, ...] = (0,)
) -> list[Any]:
    """ListOffsets v7 answers (one per partition) for ``timestamp`` (-2 earliest, -1 latest)."""
    req = ListOffsetsRequest[7](
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=p, current_leader_epoch=-1, timestamp=timestamp
                    )
                    for p in partitions
                ],
            )
        ],
    )
    return list(wire.call(req, ListOffsetsResponse).topics[0].partitions)


class TaggedProducer:
    """A thread producing ``f"{i:08d}"`` values, one a request, on its own connection until
    stopped (and ``min_acked`` were acknowledged); the first error code ends it. ``acked`` lists
    the acknowledged ``i`` in order, ``errors`` the error code that stopped it."""

    def __init__(self, port: int, topic: str, *, min_acked: int = 0) -> None:
        self.port = port
        self.topic = topic
        self.min_acked = min_acked
        self.acked: list[int] = []
        self.errors: list[object] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def start(self) -> None:
        self._thread.start()

    def wait_acked(self, count: int) -> None:
        while len(self.acked) < count and self._thread.is_alive():
            self._thread.join(0.05)

    def stop(self, timeout: float = 60) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        with Wire(self.port) as w:
            i = 0
            while not self._stop.is_set() or len(self.acked) < self.min_acked:
                req = produce_request(self.topic, 0, [f"{i:08d}".encode()])
                part = w.call(req, ProduceResponse, corr=i).responses[0].partition_responses[0]
                if part.error_code:
                    self.errors.append(part.error_code)
                    return
                self.acked.append(i)
                i += 1


def init_producer_id(wire: Wire) -> Any:
    """InitProducerId v4 for a new idempotent (non-transactional) producer."""
    req = InitProducerIdRequest[4](
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
    )
    return wire.call(req, InitProducerIdResponse)


def alter_replica_log_dirs(
    wire: Wire, path: str, topics: list[str], *, version: int = 2, partition: int = 0
) -> Any:
    """AlterReplicaLogDirs: move partition ``partition`` of each topic in ``topics`` to the log
    dir ``path`` of this broker (or pre-place it there, for a topic not created yet)."""
    entry = AlterReplicaLogDirsRequest.AlterReplicaLogDir
    req = AlterReplicaLogDirsRequest[version](
        dirs=[
            entry(
                path=path,
                topics=[
                    entry.AlterReplicaLogDirTopic(name=n, partitions=[partition]) for n in topics
                ],
            )
        ]
    )
    return wire.call(req, AlterReplicaLogDirsResponse)
