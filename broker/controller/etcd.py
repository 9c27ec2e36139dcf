"""A small asyncio etcd v3 client over etcd's JSON gateway (``/v3/kv/*``, ``/v3/lease/*``).

Why the gateway and not gRPC: the gateway is built into every etcd server, speaks JSON over
HTTP/1.1 that aiohttp (already a dependency) handles, and needs no generated stubs or a gRPC
runtime in the broker image. Metadata changes are rare and small, so its overhead does not
matter. Keys and values are base64 in the gateway's JSON; this module hides that.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from spindle.broker.common.errors import ErrorCode, KafkaError


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
class Put:
    key: bytes
    value: bytes

    def to_json(self) -> dict[str, Any]:
        return {"request_put": {"key": _b64(self.key), "value": _b64(self.value)}}


@dataclass(frozen=True, slots=True)
class Delete:
    key: bytes
    prefix: bool = False

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"key": _b64(self.key)}
        if self.prefix:
            body["range_end"] = _b64(prefix_end(self.key))
        return {"request_delete_range": body}


class EtcdClient:
    """One etcd endpoint list; tries each endpoint in turn. Task-safe (one aiohttp session)."""

    def __init__(self, endpoints: Sequence[str], *, timeout_s: float = 5.0) -> None:
        if not endpoints:
            raise EtcdError("no etcd endpoint configured")
        self._endpoints = [e.rstrip("/") for e in endpoints]
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        errors: list[str] = []
        for endpoint in self._endpoints:
            try:
                async with self._session.post(endpoint + path, data=json.dumps(body)) as resp:
                    text = await resp.text()
                    if resp.status != 200:
                        raise EtcdError(f"etcd {endpoint}{path} answered {resp.status}: {text}")
                    result: dict[str, Any] = json.loads(text)
                    return result
            except (aiohttp.ClientError, TimeoutError) as exc:
                errors.append(f"{endpoint}: {type(exc).__name__}: {exc}")
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
        self, compares: Sequence[Compare], success: Sequence[Put | Delete]
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


def _kv(raw: dict[str, Any]) -> KeyValue:
    return KeyValue(
        key=_unb64(raw["key"]),
        value=_unb64(raw.get("value", "")),
        mod_revision=int(raw.get("mod_revision", 0)),
        version=int(raw.get("version", 0)),
    )
