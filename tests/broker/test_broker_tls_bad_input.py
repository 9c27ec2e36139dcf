"""Bad input at a TLS listener, from raw sockets: plaintext Kafka bytes, a handshake that never
finishes (bounded by ``spindle.ssl.handshake.timeout.ms``), connections idle for longer than
``connections.max.idle.ms`` -- each connection is closed, and the broker keeps serving."""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from ..certs import CA, make_ca
from .conftest import Broker, Etcd, make_broker
from .listeners import Extra, add_listeners
from .wire import Wire

HANDSHAKE_S = 1.0
IDLE_S = 2.0


@dataclass
class Served:
    broker: Broker
    tls_port: int
    ca: CA


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("tls-bad")
    ca = make_ca(base / "ca")
    cert = ca.issue("broker", sans=["localhost", "127.0.0.1"])
    broker = make_broker(base / "broker", etcd, dirs=1)
    ports = add_listeners(
        broker,
        [Extra("SSL", "SSL")],
        {
            "ssl.keystore.location": str(cert.pem_keystore()),
            "spindle.ssl.handshake.timeout.ms": str(int(HANDSHAKE_S * 1000)),
            "connections.max.idle.ms": str(int(IDLE_S * 1000)),
        },
    )
    broker.start()
    try:
        yield Served(broker, ports["SSL"], ca)
    finally:
        broker.stop()


def _api_versions_frame() -> bytes:
    return Wire.encode(ApiVersionsRequest[0](), corr=7)


def _closed_after(sock: socket.socket, limit_s: float) -> float:
    """Seconds until the broker closed ``sock`` (EOF or reset); fails after ``limit_s``."""
    sock.settimeout(limit_s)
    start = time.monotonic()
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the connection was still open after {limit_s} s")
    return time.monotonic() - start


def _tls_answers(served: Served) -> bool:
    context = ssl.create_default_context(cafile=str(served.ca.cert_file))
    with (
        socket.create_connection(("127.0.0.1", served.tls_port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(_api_versions_frame())
        (size,) = struct.unpack(">i", tls.recv(4))
        body = b""
        while len(body) < size:
            body += tls.recv(size - len(body))
    response = ApiVersionsResponse[0].decode(body[4:])
    return response.error_code == 0 and bool(response.api_keys)


def _plaintext_answers(served: Served) -> bool:
    with Wire(served.broker.port) as wire:
        return wire.call(ApiVersionsRequest[0](), ApiVersionsResponse).error_code == 0


def test_plaintext_kafka_bytes_on_the_tls_port_close_that_connection_only(served: Served) -> None:
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", served.tls_port), timeout=10) as sock:
            sock.sendall(_api_versions_frame())
            assert _closed_after(sock, 5) < 5
    assert _tls_answers(served)
    assert _plaintext_answers(served)
    assert "Traceback" not in served.broker.log_text()


@pytest.mark.parametrize("sent", [b"", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"])
def test_a_handshake_that_never_finishes_is_closed_after_the_setup_time(
    served: Served, sent: bytes
) -> None:
    """Nothing, or the first bytes of a ClientHello and then silence: closed once the
    handshake timeout passes, not held open (an idle TCP connection costs the broker a
    socket and a TLS state each)."""
    with socket.create_connection(("127.0.0.1", served.tls_port), timeout=10) as sock:
        sock.sendall(sent)
        waited = _closed_after(sock, HANDSHAKE_S + 5)
    assert HANDSHAKE_S * 0.8 <= waited < HANDSHAKE_S + 5
    assert _tls_answers(served)


def test_idle_connections_are_closed_after_connections_max_idle_ms(served: Served) -> None:
    context = ssl.create_default_context(cafile=str(served.ca.cert_file))
    with socket.create_connection(("127.0.0.1", served.broker.port), timeout=10) as plain:
        plain.sendall(_api_versions_frame())
        (size,) = struct.unpack(">i", plain.recv(4))
        assert size > 0
        with socket.create_connection(("127.0.0.1", served.tls_port), timeout=10) as raw:
            tls = context.wrap_socket(raw, server_hostname="localhost")
            start = time.monotonic()
            idle = _closed_after(tls, IDLE_S + 5)
            assert IDLE_S * 0.8 <= time.monotonic() - start < IDLE_S + 5
            tls.close()
        assert idle < IDLE_S + 5
        _closed_after(plain, IDLE_S + 5)
    assert _plaintext_answers(served)
    assert _tls_answers(served)


def test_a_busy_connection_is_not_idle(served: Served) -> None:
    with Wire(served.broker.port) as wire:
        until = time.monotonic() + IDLE_S * 2
        while time.monotonic() < until:
            assert wire.call(ApiVersionsRequest[0](), ApiVersionsResponse).error_code == 0
            time.sleep(IDLE_S / 4)
