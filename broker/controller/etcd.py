"""A small asyncio etcd v3 client over etcd's JSON gateway (``/v3/kv/*``, ``/v3/lease/*``).

Why the gateway and not gRPC: the gateway is built into every etcd server, speaks JSON over
HTTP/1.1 that aiohttp (already a dependency) handles, and needs no generated stubs or a gRPC
runtime in the broker image. Metadata changes are rare and small, so its overhead does not
matter. Keys and values are base64 in the gateway's JSON; this module hides that.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from spindle.broker.common.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


class EtcdError(KafkaError):
    """etcd could not be reached or refused a request; the message says which and why.

    To a client this is Kafka's REQUEST_TIMED_OUT: the controller's store did not answer, the
    request may be retried.
    """

    code = ErrorCode.REQUEST_TIMED_OUT


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix`` (etcd's range_end)."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\x00"


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    mod_revision: int
    version: int
    create_revision: int = 0
    lease: int = 0


@dataclass(frozen=True, slots=True)
class Compare:
    """``mod_revision(key) == revision`` (revision 0 means "key does not exist")."""

    key: bytes
    mod_revision: int

    def to_json(self) -> dict[str, Any]:
        return {
            "key": _b64(self.key),
            "target": "MOD",
            "result": "EQUAL",
            "mod_revision": str(self.mod_revision),
        }


@dataclass(frozen=True, slots=True)
class CompareCreate:
    """``create_revision(key) == revision``: 0 means "key does not exist". Unlike the mod
    revision, a key's create revision survives updates, so it names one incarnation of a key
    (a controller term, a broker session)."""

    key: bytes
    create_revision: int

    def to_json(self) -> dict[str, Any]:
        return {
            "key": _b64(self.key),
            "target": "CREATE",
            "result": "EQUAL",
            "create_revision": str(self.create_revision),
        }


@dataclass(frozen=True, slots=True)
class Put:
    key: bytes
    value: bytes
    lease: int = 0
    """Attach the key to this lease (0 = none): the key is deleted when the lease ends."""

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"key": _b64(self.key), "value": _b64(self.value)}
        if self.lease:
            body["lease"] = str(self.lease)
        return {"request_put": body}


@dataclass(frozen=True, slots=True)
class Get:
    """A read inside a transaction (typically in ``failure``, to learn why a compare failed)."""

    key: bytes

    def to_json(self) -> dict[str, Any]:
        return {"request_range": {"key": _b64(self.key)}}


@dataclass(frozen=True, slots=True)
class Delete:
    key: bytes
    prefix: bool = False

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"key": _b64(self.key)}
        if self.prefix:
            body["range_end"] = _b64(prefix_end(self.key))
        return {"request_delete_range": body}


AnyCompare = Compare | CompareCreate
Op = Put | Delete | Get


@dataclass(frozen=True, slots=True)
class TxnResult:
    """Outcome of :meth:`EtcdClient.transact`: which branch ran, the store revision after it,
    and for every ``Get`` of that branch the key found (``None`` if absent), in order."""

    succeeded: bool
    revision: int
    reads: list[KeyValue | None]


class LeaseNotFound(EtcdError):
    """The lease expired or was revoked: every key attached to it is gone."""


class EtcdClient:
    """One etcd endpoint list; tries each endpoint in turn. Task-safe (one aiohttp session)."""

    def __init__(self, endpoints: Sequence[str], *, timeout_s: float = 5.0) -> None:
        if not endpoints:
            raise EtcdError("no etcd endpoint configured")
        self._endpoints = [e.rstrip("/") for e in endpoints]
        self.timeout_s = timeout_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def endpoints(self) -> list[str]:
        return list(self._endpoints)

    async def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        errors: list[str] = []
        # Each endpoint twice: a pooled keep-alive connection to an etcd that restarted fails
        # once with ServerDisconnected although the server is up again. A repeated compare-
        # on-revision txn cannot apply twice (its compare fails), so the retry is safe.
        for endpoint in [e for e in self._endpoints for _ in range(2)]:
            try:
                async with self._session.post(endpoint + path, data=json.dumps(body)) as resp:
                    text = await resp.text()
                    if resp.status == 404 and "lease not found" in text:
                        raise LeaseNotFound(f"etcd {endpoint}{path}: {text}")
                    if resp.status != 200:
                        raise EtcdError(f"etcd {endpoint}{path} answered {resp.status}: {text}")
                    result: dict[str, Any] = json.loads(text)
                    return result
            except (aiohttp.ClientError, TimeoutError) as exc:
                errors.append(f"{endpoint}: {type(exc).__name__}: {exc}")
                log.warning("etcd call %s to %s failed: %r", path, endpoint, exc)
        raise EtcdError(f"no etcd endpoint answered {path}: {'; '.join(errors)}")

    async def get(self, key: bytes) -> KeyValue | None:
        result = await self._call("/v3/kv/range", {"key": _b64(key)})
        kvs = result.get("kvs", [])
        return _kv(kvs[0]) if kvs else None

    async def get_prefix(self, prefix: bytes) -> tuple[list[KeyValue], int]:
        """All keys under ``prefix`` and the store revision they were read at."""
        result = await self._call(
            "/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))}
        )
        revision = int(result.get("header", {}).get("revision", 0))
        return [_kv(kv) for kv in result.get("kvs", [])], revision

    async def put(self, key: bytes, value: bytes) -> int:
        result = await self._call("/v3/kv/put", {"key": _b64(key), "value": _b64(value)})
        return int(result.get("header", {}).get("revision", 0))

    async def txn(
        self, compares: Sequence[AnyCompare], success: Sequence[Put | Delete]
    ) -> tuple[bool, int]:
        """Apply ``success`` atomically iff every compare holds; return (succeeded, revision)."""
        body = {
            "compare": [c.to_json() for c in compares],
            "success": [op.to_json() for op in success],
        }
        result = await self._call("/v3/kv/txn", body)
        return bool(result.get("succeeded", False)), int(
            result.get("header", {}).get("revision", 0)
        )

    async def transact(
        self,
        compares: Sequence[AnyCompare],
        success: Sequence[Op],
        failure: Sequence[Op] = (),
    ) -> TxnResult:
        """One etcd transaction: ``success`` iff every compare holds, else ``failure``.

        The reads (``Get``) of the branch that ran come back in :attr:`TxnResult.reads`, so a
        caller whose compare failed learns the current value in the same round trip.
        """
        body = {
            "compare": [c.to_json() for c in compares],
            "success": [op.to_json() for op in success],
            "failure": [op.to_json() for op in failure],
        }
        result = await self._call("/v3/kv/txn", body)
        reads: list[KeyValue | None] = []
        for response in result.get("responses", []):
            if "response_range" in response:
                kvs = response["response_range"].get("kvs", [])
                reads.append(_kv(kvs[0]) if kvs else None)
        return TxnResult(
            bool(result.get("succeeded", False)),
            int(result.get("header", {}).get("revision", 0)),
            reads,
        )

    # Leases: etcd's sessions. A key put with a lease is deleted when the lease ends (TTL
    # without a keepalive, or revoke), which is how a dead controller or broker is noticed.

    async def lease_grant(self, ttl_s: int) -> tuple[int, int]:
        """A new lease of ``ttl_s`` seconds; returns (id, granted TTL). etcd may raise a very
        short TTL to its minimum (about 1.5 x its election timeout)."""
        result = await self._call("/v3/lease/grant", {"TTL": str(ttl_s)})
        return int(result["ID"]), int(result.get("TTL", ttl_s))

    async def lease_keepalive(self, lease_id: int) -> int:
        """Renew a lease; returns its remaining TTL. Raises LeaseNotFound if it has ended.

        The gateway's keepalive is a stream; one request with one response renews once.
        """
        result = await self._call("/v3/lease/keepalive", {"ID": str(lease_id)})
        ttl = int(result.get("result", {}).get("TTL", 0))
        if ttl <= 0:
            raise LeaseNotFound(f"lease {lease_id:x} has expired")
        return ttl

    async def lease_revoke(self, lease_id: int) -> None:
        """End a lease now, deleting its keys; a lease already gone is not an error."""
        with contextlib.suppress(LeaseNotFound):
            await self._call("/v3/lease/revoke", {"ID": str(lease_id)})

    async def compact(self, revision: int) -> None:
        """Discard history before ``revision`` (watches from before it get WatchCompacted)."""
        await self._call("/v3/kv/compaction", {"revision": str(revision)})

    async def delete(self, key: bytes) -> int:
        result = await self._call("/v3/kv/deleterange", {"key": _b64(key)})
        return int(result.get("header", {}).get("revision", 0))


def _kv(raw: dict[str, Any]) -> KeyValue:
    return KeyValue(
        key=_unb64(raw["key"]),
        value=_unb64(raw.get("value", "")),
        mod_revision=int(raw.get("mod_revision", 0)),
        version=int(raw.get("version", 0)),
        create_revision=int(raw.get("create_revision", 0)),
        lease=int(raw.get("lease", 0)),
    )
