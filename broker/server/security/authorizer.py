"""The request context and the authorizer seam.

Every request carries a :class:`RequestContext` (who sent it, from where) and every handler asks
the :class:`Authorizer` before acting, with Kafka's operation and resource names (Kafka's
"Operations and Resources on Protocols" table). :class:`AllowAll` is the broker without an
authorizer; :class:`~.acls.StandardAuthorizer` decides by ACLs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol


class Operation(Enum):
    """Kafka's ACL operations used by the served APIs."""

    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DELETE = "Delete"
    ALTER = "Alter"
    DESCRIBE = "Describe"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    ALTER_CONFIGS = "AlterConfigs"
    IDEMPOTENT_WRITE = "IdempotentWrite"
    CLUSTER_ACTION = "ClusterAction"


class ResourceType(Enum):
    TOPIC = "Topic"
    CLUSTER = "Cluster"
    GROUP = "Group"
    TRANSACTIONAL_ID = "TransactionalId"


CLUSTER_NAME = "kafka-cluster"


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who sent a request: principal (``User:ANONYMOUS`` on PLAINTEXT), client id, address."""

    principal: str
    client_id: str | None
    client_address: str
    listener: str


class Authorizer(Protocol):
    def authorize(
        self, ctx: RequestContext, op: Operation, resource: ResourceType, name: str
    ) -> bool: ...

    def authorize_any(self, ctx: RequestContext, op: Operation, resource: ResourceType) -> bool:
        """Whether ``op`` is allowed on at least one resource of the type (Kafka's
        ``authorizeByResourceType``)."""
        ...


class AllowAll:
    """No authorizer configured (``authorizer.class.name`` empty): every request is allowed,
    as in Kafka."""

    def authorize(
        self, ctx: RequestContext, op: Operation, resource: ResourceType, name: str
    ) -> bool:
        return True

    def authorize_any(self, ctx: RequestContext, op: Operation, resource: ResourceType) -> bool:
        return True
