"""The one table from API key to handler, built from the families and checked at start-up.

``FAMILIES`` lists every family module's ``HANDLERS``. :func:`build_registry` merges them and
refuses (``RegistryError``) a key served twice, a handler for an API the broker does not
advertise, or an advertised API (``SUPPORTED_APIS``, what ApiVersions answers) without a
handler, so a served API can never lack a handler. :class:`KafkaApis` only dispatches, as
Kafka's ``KafkaApis.handle()`` does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from spindle.broker.common.errors import ErrorCode
from spindle.broker.protocol.apis import SUPPORTED_APIS, ApiKey, Request, error_response_body

from ..security.authorizer import RequestContext
from . import (
    acls,
    client_quotas,
    cluster,
    configs,
    group_offsets,
    groups,
    leader_epochs,
    log_dirs,
    produce_fetch,
    producer_ids,
    reassignments,
    topics,
)
from .base import ApiContext, Handler, Handlers

log = logging.getLogger(__name__)

FAMILIES: tuple[Handlers, ...] = (
    cluster.HANDLERS,
    produce_fetch.HANDLERS,
    producer_ids.HANDLERS,
    topics.HANDLERS,
    configs.HANDLERS,
    log_dirs.HANDLERS,
    leader_epochs.HANDLERS,
    reassignments.HANDLERS,
    groups.HANDLERS,
    group_offsets.HANDLERS,
    acls.HANDLERS,
    client_quotas.HANDLERS,
)


class RegistryError(Exception):
    """The handler families do not match the table of served APIs."""


def build_registry(
    families: tuple[Handlers, ...] = FAMILIES, served: Mapping[int, Any] = SUPPORTED_APIS
) -> dict[ApiKey, Handler]:
    """Merge ``families`` into one table, checked against the ``served`` APIs."""
    table: dict[ApiKey, Handler] = {}
    for family in families:
        for key, handler in family.items():
            if key in table:
                raise RegistryError(f"{key.name} has two handlers")
            table[key] = handler
    missing = sorted(ApiKey(k).name for k in served if k not in table)
    if missing:
        raise RegistryError(f"served APIs without a handler: {', '.join(missing)}")
    unserved = sorted(k.name for k in table if k not in served)
    if unserved:
        raise RegistryError(f"handlers for APIs not in SUPPORTED_APIS: {', '.join(unserved)}")
    return table


class KafkaApis:
    """Dispatches each decoded request to its family's handler. Event loop only."""

    def __init__(self, context: ApiContext, registry: dict[ApiKey, Handler] | None = None) -> None:
        self.context = context
        self._handlers = registry if registry is not None else build_registry()

    async def handle(self, ctx: RequestContext, request: Request) -> dict[str, Any] | None:
        """The response body for ``request``, or None when no response is sent (acks=0).

        A handler's unexpected exception fails that request only, as Kafka's
        ``KafkaApis.handleError``: it is logged once with its traceback and answered
        UNKNOWN_SERVER_ERROR (:func:`error_response_body`), and the connection goes on. A
        Produce with acks=0 cannot be answered, so the exception closes the connection
        instead, as Kafka closes it (the client's next request fails and it reconnects)."""
        try:
            return await self._handlers[request.spec.key](self.context, ctx, request)
        except Exception:
            if request.spec.key is ApiKey.PRODUCE and request.body.acks == 0:
                raise
            header = request.header
            log.exception(
                "unexpected error serving %s v%d (correlation id %d) from %s: answered %s",
                request.spec.key.name,
                request.version,
                header.correlation_id,
                ctx.client_address,
                ErrorCode.UNKNOWN_SERVER_ERROR.name,
            )
            return error_response_body(request, ErrorCode.UNKNOWN_SERVER_ERROR)
