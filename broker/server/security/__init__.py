"""Security at the edge of the broker: listeners and their security protocols, the principal a
connection acts as, and the authorizer every handler asks.

What is here today and what comes (issue #38, TLS and SASL listeners, ACLs, SCRAM users):

- :mod:`.listeners` (pure): Kafka's ``listeners`` / ``listener.security.protocol.map`` /
  ``advertised.listeners`` resolved into one :class:`~.listeners.ListenerSpec` per listener
  with its security protocol. Today only PLAINTEXT is served and start-up refuses the other
  protocols by name, so no one believes a cluster is secured when it is not. The TLS contexts
  (``ssl.*`` keys, PEM and PKCS12 stores, reload when they change) are built here per listener,
  and one acceptor per listener is bound by ``app``.
- :mod:`.authenticator`: the stage a new connection passes before any request reaches the API
  registry; it yields the connection's principal. PLAINTEXT's is ``User:ANONYMOUS``; the SASL
  exchange (SaslHandshake / SaslAuthenticate, PLAIN, SCRAM, OAUTHBEARER, KIP-368
  re-authentication) becomes another authenticator, so handlers never see an unauthenticated
  request and never parse credentials.
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
