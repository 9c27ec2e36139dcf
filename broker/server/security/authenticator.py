"""The stage every connection passes before its first request reaches the API registry.

Kafka authenticates once per connection, in the socket server, before ``KafkaApis`` sees a
request (``SocketServer`` / ``KafkaChannel.prepare``); handlers only ever see the resulting
principal. Spindle keeps that shape: a connection asks :func:`authenticator_for` its listener's
authenticator once, when it is made, and every :class:`~.authorizer.RequestContext` it builds
carries that authenticator's principal.

PLAINTEXT authenticates nobody: its principal is ``User:ANONYMOUS``, as in Kafka. The SASL
mechanisms (issue #38) become authenticators with a state machine of their own
(SaslHandshake, then SaslAuthenticate rounds, re-authentication before
``connections.max.reauth.ms``) that the connection drives until it yields a principal.

SSL: the transport (TLS, set up by the listener's acceptor before the connection sees a byte,
:mod:`.tls`) hands over the client certificate's name, if one was presented; the principal is
that name through ``ssl.principal.mapping.rules`` (:mod:`.principal`), or ``User:ANONYMOUS``
without a certificate, as Kafka's ``DefaultKafkaPrincipalBuilder`` does. SASL_SSL is the same
transport with a SASL authenticator: the SASL identity, not the certificate, is the principal.
"""

from __future__ import annotations

from typing import Protocol

from .listeners import ListenerSpec, SecurityProtocol
from .principal import PrincipalMapper

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


class CertificateAuthenticator:
    """SSL: the client certificate's name, mapped; ``User:ANONYMOUS`` without a certificate.
    Raises :class:`~.principal.PrincipalMappingError` when no rule maps the name (Kafka then
    fails the connection's authentication)."""

    def __init__(self, peer_name: str | None, mapper: PrincipalMapper) -> None:
        self._principal = ANONYMOUS if peer_name is None else mapper.principal(peer_name)

    @property
    def principal(self) -> str:
        return self._principal


def authenticator_for(
    listener: ListenerSpec,
    *,
    peer_name: str | None = None,
    mapper: PrincipalMapper | None = None,
) -> Authenticator:
    """The authenticator of one connection on ``listener``; on SSL, ``peer_name`` is the
    client certificate's subject (RFC 2253), None without one, and ``mapper`` the listener's
    ``ssl.principal.mapping.rules``."""
    if listener.protocol is SecurityProtocol.PLAINTEXT:
        return Unauthenticated()
    if listener.protocol is SecurityProtocol.SSL:
        return CertificateAuthenticator(peer_name, mapper or PrincipalMapper.parse(None))
    # config refuses the other protocols at start-up (listeners.check_served); reaching here
    # would mean serving them without the authentication they promise.
    raise ValueError(f"no authenticator for security protocol {listener.protocol.value}")
