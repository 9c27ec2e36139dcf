"""A Kafka-protocol connection from this broker to another one, the client side of the wire.

Why a module of its own: a follower fetching from its leader (``replication.fetcher``) and the
active controller probing broker sessions (``controller.liveness``) both speak to another
broker the same way, and the two are sibling layers that never import each other; so the one
way of doing it lives below both, beside storage (it needs nothing of it).

Wire (Kafka protocol guide, "Common Request and Response Structure"): a request goes out as
``int32 size`` then the request header (with this connection's next correlation id and its
client id) and body, as kafka-python's schema objects encode them; the answer comes back as
``int32 size`` then ``size`` bytes whose first field, the response header's, is the
correlation id. What the answer means is the caller's to decode.

Security: a connection is secured as the inter-broker listener it dials is
(:class:`PeerSecurity`, made by the server from that listener's settings): over TLS, the peer's
certificate is checked against the listener's truststore and, with Kafka's default
``ssl.endpoint.identification.algorithm=https``, must name the host dialled; this broker's own
certificate is presented if the listener has a keystore.

Event loop only; one request at a time per connection, in order (its callers never overlap
requests on one connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PeerSecurity:
    """How connections to other brokers are secured. ``tls`` gives the client TLS context
    to dial with now (None: plaintext); a callable, so a reloaded keystore is used by the
    next connection."""

    tls: Callable[[], ssl.SSLContext | None] = lambda: None


PLAINTEXT = PeerSecurity()


class PeerConnection:
    """One connection to a broker's Kafka listener, opened by the first request."""

    def __init__(
        self, host: str, port: int, *, client_id: str, security: PeerSecurity = PLAINTEXT
    ) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self._security = security
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._corr = itertools.count(1)

    async def exchange(self, request: Any, timeout_s: float) -> tuple[int, bytes]:
        """Send ``request`` (a kafka-python request) with the next correlation id and read one
        answer whole: that id and the answer's bytes after its size. ``timeout_s`` bounds the
        connect and each read; raises OSError, TimeoutError or IncompleteReadError."""
        if self._writer is None:
            context = self._security.tls()
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=context,
                    server_hostname=self.host if context is not None else None,
                ),
                timeout_s,
            )
        reader, writer = self._reader, self._writer
        assert reader is not None
        assert writer is not None
        corr = next(self._corr)
        request.with_header(correlation_id=corr, client_id=self.client_id)
        writer.write(bytes(request.encode(header=True, framed=True)))
        await writer.drain()
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), timeout_s))
        data = await asyncio.wait_for(reader.readexactly(size), timeout_s)
        return corr, data

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
        self._reader = self._writer = None
