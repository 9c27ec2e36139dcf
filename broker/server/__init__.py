"""The broker process: asyncio network server, request handlers wiring protocol to storage."""
