"""Following a key range in etcd: the watch stream of etcd's JSON gateway, resumed after
reconnects from the last revision seen.

Why a watch and not polling: a watch delivers every change, in revision order, as soon as etcd
commits it, and a broker that follows one never misses or reorders a change (its position is a
revision, as a KRaft broker's is an offset in the metadata log). Polling either lags (the old
1-second reload) or loads etcd with full reads.

The gateway (``POST /v3/watch``) answers one create request with a stream of JSON objects, one
per line::

    {"result": {"header": {"revision": "7"}, "created": true}}
    {"result": {"header": {...}, "events": [{"type": "DELETE"?, "kv": {...}}]}}
    {"result": {"canceled": true, "compact_revision": "3"}}   (start revision compacted away)

``type`` is absent for a PUT (proto3 omits the default). A stream that ends or breaks is
reopened from the revision after the last one delivered; a compacted start revision cannot be
resumed and raises :class:`WatchCompacted`, upon which the caller reloads the range and follows
from the revision it loaded at. Loss of the TCP connection (etcd restarted or killed) is seen at
once; a silent network partition is not (the gateway offers no request-side progress ping).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from .etcd import EtcdClient, EtcdError, KeyValue, _b64, _kv, prefix_end

log = logging.getLogger(__name__)


class WatchCompacted(EtcdError):
    """The revision to resume from was compacted away: reload, then follow from there."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(
            f"watch start revision was compacted (compact revision {compact_revision})"
        )
        self.compact_revision = compact_revision


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change: ``deleted`` is False for a put. A delete's ``kv`` has the key and the
    deletion's revision as ``mod_revision``, and no value."""

    deleted: bool
    kv: KeyValue


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """Changes up to and including ``revision`` (events empty for a progress notification)."""

    revision: int
    events: list[WatchEvent]


def _parse(raw: dict[str, Any]) -> WatchBatch | None:
    """One gateway message -> a batch (None for the creation acknowledgement)."""
    if "error" in raw:
        raise EtcdError(f"etcd watch failed: {raw['error']}")
    result = raw.get("result", {})
    if result.get("canceled"):
        compact = int(result.get("compact_revision", 0))
        if compact:
            raise WatchCompacted(compact)
        raise EtcdError(f"etcd cancelled the watch: {result.get('cancel_reason', '?')}")
    events = [WatchEvent(e.get("type") == "DELETE", _kv(e["kv"])) for e in result.get("events", [])]
    header_rev = int(result.get("header", {}).get("revision", 0))
    if result.get("created") and not events:
        return None
    revision = max([e.kv.mod_revision for e in events], default=header_rev)
    return WatchBatch(revision, events)


class PrefixWatcher:
    """Every change under ``prefix`` after ``start_revision - 1``, across reconnects.

    Iterate it (``async for batch in watcher``); batches come in revision order, never twice.
    ``revision`` is the last revision delivered. One stream per watcher; not task-safe (one
    consumer).
    """

    def __init__(
        self,
        client: EtcdClient,
        prefix: bytes,
        *,
        start_revision: int,
        retry_s: float = 0.5,
        single_key: bool = False,
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._single_key = single_key
        self.revision = start_revision - 1
        self._retry_s = retry_s

    def _request(self) -> dict[str, Any]:
        create: dict[str, Any] = {
            "key": _b64(self._prefix),
            "start_revision": str(self.revision + 1),
            "progress_notify": True,
        }
        if not self._single_key:
            create["range_end"] = _b64(prefix_end(self._prefix))
        return {"create_request": create}

    async def _stream(
        self, session: aiohttp.ClientSession, endpoint: str
    ) -> AsyncIterator[WatchBatch]:
        async with session.post(endpoint + "/v3/watch", data=json.dumps(self._request())) as resp:
            if resp.status != 200:
                raise EtcdError(f"etcd {endpoint}/v3/watch answered {resp.status}")
            buffer = b""
            async for chunk in resp.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    batch = _parse(json.loads(line))
                    if batch is not None and batch.revision > self.revision:
                        yield batch

    def __aiter__(self) -> AsyncIterator[WatchBatch]:
        return self._follow()

    async def _follow(self) -> AsyncIterator[WatchBatch]:
        # No total timeout: the stream is meant to stay open; connecting is bounded.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._client.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            endpoints = self._client.endpoints
            attempt = 0
            while True:
                endpoint = endpoints[attempt % len(endpoints)]
                try:
                    async for batch in self._stream(session, endpoint):
                        self.revision = batch.revision
                        attempt = 0
                        yield batch
                    log.info("etcd watch stream from %s ended; resuming", endpoint)
                except WatchCompacted:
                    raise
                except (aiohttp.ClientError, EtcdError, ValueError, OSError, TimeoutError) as exc:
                    log.warning(
                        "etcd watch on %s broke (%s); resuming from revision %d",
                        endpoint,
                        exc,
                        self.revision + 1,
                    )
                attempt += 1
                await asyncio.sleep(min(self._retry_s * attempt, 5.0))
