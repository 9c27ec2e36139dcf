"""The broker process: the asyncio network server (``app``, ``connection``), configuration,
security at the edge (``security``: listeners, the connection's principal, the authorizer),
metrics, and the request handlers, one module per API family (``apis``)."""
