"""The broker process: the asyncio network server (``app``, ``connection``), configuration,
authorisation, metrics, and the request handlers, one module per API family (``apis``)."""
