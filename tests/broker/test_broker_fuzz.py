"""Hostile bytes on live connections: truncated frames, wrong sizes, unknown keys and versions,
random payloads. The broker never crashes or hangs, answers or closes per Kafka's rules, and a
producer on another connection loses nothing meanwhile."""

from __future__ import annotations

import random
import socket
import struct

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from .conftest import Broker
from .wire import TaggedProducer, Wire, create_topic, fetch_all_values


def _hostile_frames(rng: random.Random) -> list[bytes]:
    frames = []
    for _ in range(300):
        kind = rng.randrange(6)
        payload = rng.randbytes(rng.randrange(0, 300))
        if kind == 0:  # random bytes, random size prefix
            frames.append(struct.pack(">i", rng.randrange(-(2**31), 2**31)) + payload)
        elif kind == 1:  # size prefix larger than the bytes that follow (truncated frame)
            frames.append(struct.pack(">i", len(payload) + rng.randrange(1, 100)) + payload)
        elif kind == 2:  # unknown api key
            body = struct.pack(">hhih", rng.choice([-1, 999, 17, 10]), 0, 1, 0) + payload
            frames.append(struct.pack(">i", len(body)) + body)
        elif kind == 3:  # known key, random version
            body = (
                struct.pack(">hhih", rng.choice([0, 1, 3, 18, 34, 35]), rng.randrange(-5, 40), 1, 0)
                + payload
            )
            frames.append(struct.pack(">i", len(body)) + body)
        elif kind == 4:  # header only, cut short
            body = struct.pack(">hhih", 3, 12, 1, 10)[: rng.randrange(1, 10)]
            frames.append(struct.pack(">i", len(body)) + body)
        else:  # a valid frame prefix followed by garbage
            frames.append(struct.pack(">i", len(payload)) + payload)
    return frames


def test_hostile_connections_never_hurt_a_concurrent_producer(module_broker: Broker) -> None:
    rng = random.Random(20261122)
    with Wire(module_broker.port) as admin:
        create_topic(admin, "fuzz-safe")
    producer = TaggedProducer(module_broker.port, "fuzz-safe")
    producer.start()
    try:
        for frame in _hostile_frames(rng):
            with socket.create_connection(("127.0.0.1", module_broker.port), timeout=30) as s:
                s.sendall(frame)
                s.shutdown(socket.SHUT_WR)
                # The broker must answer or close; recv returns (EOF or a response) rather than hang.
                while s.recv(65536):
                    pass
    finally:
        producer.stop()
    assert not producer.errors, producer.errors
    assert module_broker.proc is not None
    assert module_broker.proc.poll() is None, "broker died"
    with Wire(module_broker.port) as w:
        resp = w.call(
            ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
            ApiVersionsResponse,
        )
        assert resp.error_code == 0
        assert fetch_all_values(w, "fuzz-safe") == [f"{i:08d}".encode() for i in producer.acked]
