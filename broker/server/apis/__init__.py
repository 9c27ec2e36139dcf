"""Request handlers, one module per Kafka API family (Kafka's ``KafkaApis``, split).

Each family module (``cluster``, ``produce_fetch``, ``leader_epochs``, ``producer_ids``,
``topics``, ``configs``, ``log_dirs``, ``reassignments``) exports ``HANDLERS``: a mapping from
``ApiKey`` to an ``async def handler(broker, ctx, req)`` (see :mod:`.base`). Handlers are thin: they authorise
(``broker.authorize``), ask the controller (metadata), the replica manager (Produce and Fetch
are one ``append_records`` / ``fetch_records`` call each) or the log manager (directories),
and build the response as plain dicts keyed by the schema's field names. Errors from the lower
layers arrive as ``KafkaError`` and are answered per partition or per resource
(``errors_into``), so one bad partition never fails a whole request. Handlers never create or
delete logs: after a controller write they wait until this broker's metadata watch has
applied it (``ApiContext.wait_applied``), the one path that changes local replicas.

Adding a family (for example ``groups.py`` for the group coordinator):

1. add the API's key and version range to ``SUPPORTED_APIS`` in ``spindle.broker.protocol.apis``;
2. write ``apis/<family>.py`` exporting ``HANDLERS = {ApiKey.X: x, ...}``; a component the
   family needs (a coordinator) becomes a field of :class:`~.base.ApiContext`;
3. add one line, ``<family>.HANDLERS``, to ``FAMILIES`` in :mod:`.registry`;
4. name the module in the "Broker API families are independent of each other" contract
   (``pyproject.toml``).

The registry is built when the broker starts and refuses an advertised API without a handler
(and a handler for an API not advertised); ``tests/broker/server/test_api_registry.py`` checks
the same without starting a broker. Family modules import :mod:`.base` only, never each other
(an import-linter contract).
"""

from .base import ApiContext, Endpoint, Handler, Handlers
from .registry import FAMILIES, KafkaApis, RegistryError, build_registry

__all__ = [
    "FAMILIES",
    "ApiContext",
    "Endpoint",
    "Handler",
    "Handlers",
    "KafkaApis",
    "RegistryError",
    "build_registry",
]
