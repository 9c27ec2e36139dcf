"""The stage every connection passes before its first request reaches the API registry.

Kafka authenticates once per connection, in the socket server, before ``KafkaApis`` sees a
request (``SocketServer`` / ``KafkaChannel.prepare``); handlers only ever see the resulting
principal. Spindle keeps that shape: a connection asks :func:`authenticator_for` its listener's
authenticator once, when it is made, and every :class:`~.authorizer.RequestContext` it builds
carries that authenticator's principal.

PLAINTEXT authenticates nobody: its principal is ``User:ANONYMOUS``, as in Kafka. The SASL
mechanisms (issue #38) become authenticators with a state machine of their own
(SaslHandshake, then SaslAuthenticate rounds, re-authentication before
``connections.max.reauth.ms``) that the connection drives until it yields a principal; an SSL
listener's principal comes from the client certificate through ``ssl.principal.mapping.rules``.
"""

from __future__ import annotations

from typing import Protocol

from .listeners import ListenerSpec, SecurityProtocol

ANONYMOUS = "User:ANONYMOUS"
"""Kafka's principal for a connection that did not authenticate."""


class Authenticator(Protocol):
    """Who a connection is, once it has authenticated."""

    @property
    def principal(self) -> str: ...


class Unauthenticated:
    """PLAINTEXT: no exchange; every connection is ``User:ANONYMOUS``."""

    @property
    def principal(self) -> str:
        return ANONYMOUS


def authenticator_for(listener: ListenerSpec) -> Authenticator:
    """The authenticator of one connection on ``listener``."""
    if listener.protocol is SecurityProtocol.PLAINTEXT:
        return Unauthenticated()
    # config refuses the other protocols at start-up (listeners.check_served); reaching here
    # would mean serving them without the authentication they promise.
    raise ValueError(f"no authenticator for security protocol {listener.protocol.value}")
