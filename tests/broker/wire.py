"""A blocking raw-socket Kafka client for tests that need exact bytes on the wire."""

from __future__ import annotations

import socket
import struct
from typing import Any


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
