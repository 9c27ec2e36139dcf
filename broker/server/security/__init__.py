"""Security at the edge of the broker: listeners and their security protocols, the principal a
connection acts as, and the authorizer every handler asks.

What is here today and what comes (issue #38, TLS and SASL listeners, ACLs, SCRAM users):

- :mod:`.listeners` (pure): Kafka's ``listeners`` / ``listener.security.protocol.map`` /
  ``advertised.listeners`` / ``inter.broker.listener.name`` resolved into one
  :class:`~.listeners.ListenerSpec` per listener with its security protocol; ``app`` binds one
  acceptor per listener. PLAINTEXT and SSL are served; SASL_* are refused at start-up by name
  until the SASL authenticator lands, so no one believes a cluster is secured when it is not.
- :mod:`.tls`: the transport. TLS contexts from Kafka's ``ssl.*`` keys (per listener with the
  ``listener.name.<name>.`` prefix; PEM and PKCS12 stores, client auth, protocols, suites) for
  the listeners and for this broker's own connections to others; :mod:`.tls_reload` rebuilds a
  listener's context when its store files change or a dynamic config update says so, for new
  connections only. TLS is set up by the acceptor before the connection sees a byte, so it
  composes with any authenticator (SASL_SSL = this transport + the SASL authenticator).
- :mod:`.principal` (pure): ``ssl.principal.mapping.rules`` and the RFC 2253 name of a
  client certificate, as Kafka's ``SslPrincipalMapper`` and ``X500Principal`` give them.
- :mod:`.authenticator`: the stage a new connection passes before any request reaches the API
  registry; it yields the connection's principal. PLAINTEXT's is ``User:ANONYMOUS``; SSL's the
  client certificate's mapped name (``User:ANONYMOUS`` without one); the SASL exchange
  (SaslHandshake / SaslAuthenticate, PLAIN, SCRAM, OAUTHBEARER, KIP-368 re-authentication)
  becomes another authenticator, so handlers never see an unauthenticated request and never
  parse credentials.
- :mod:`.authorizer`: :class:`~.authorizer.RequestContext` (principal, client, address,
  listener) and the :class:`~.authorizer.Authorizer` seam every handler asks with Kafka's
  operation and resource names (``ApiContext.authorize``). Today it allows everything; Kafka's
  StandardAuthorizer semantics over ACL records watched in the metadata store come here, and
  so do the SCRAM credentials (salted, in the same store) and the client quotas.

The API handlers import :mod:`.authorizer` only; nothing here imports a handler, the
replication layer or storage (an import-linter contract keeps it so).
"""

from .authenticator import Authenticator, authenticator_for
from .authorizer import (
    CLUSTER_NAME,
    AllowAll,
    Authorizer,
    Operation,
    RequestContext,
    ResourceType,
)
from .listeners import (
    DEFAULT_PROTOCOL_MAP,
    ListenerSpec,
    SecurityProtocol,
    parse_listeners,
    resolve_listeners,
)

__all__ = [
    "CLUSTER_NAME",
    "DEFAULT_PROTOCOL_MAP",
    "AllowAll",
    "Authenticator",
    "Authorizer",
    "ListenerSpec",
    "Operation",
    "RequestContext",
    "ResourceType",
    "SecurityProtocol",
    "authenticator_for",
    "parse_listeners",
    "resolve_listeners",
]
