"""Which directory id each of a broker's log directories has, from its registration in etcd.

A LogVolume's ``status.directoryId`` is the directory's KIP-858 ``directory.id`` (written in
its ``meta.properties``). No Kafka API gives it together with the path: DescribeLogDirs
answers with paths and no ids, and a broker's registration (KIP-858 ``LogDirs``) carries ids
and no paths. The file itself is on the broker's volume, out of the operator's reach. So each
Spindle broker writes its directories' paths beside their ids in its own registration record
(``<spindle.etcd.prefix>/brokers/<node.id>`` in the cluster's etcd, rewritten every time the
broker starts: a replaced, empty directory registers its new id), and this module reads that
record -- the same metadata the controller places replicas by, so the id shown is the one the
cluster's assignments name. It is the operator's only read of etcd, and it never writes.
The key layout and the record's field are not repeated here: both are the contract module
``spindle.broker.common.registration``, which the broker writes by and this module reads by.

One call, ``directory_ids``, over etcd's JSON gateway (``POST /v3/kv/range``, built into every
etcd server). Hand-written with the standard library for the broker's reason
(``spindle.broker.controller.etcd``): one small request needs no gRPC stubs or client
library, and the maintained Python etcd clients are gRPC-based. The operator may not import
the broker's etcd client (import-linter: of the broker, the operator imports only
``spindle.broker.common``).
Blocking (urllib): it is called from the probe loop's worker threads.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from spindle.broker.common.registration import (
    DEFAULT_PREFIX,
    directory_ids_by_path,
    registration_key,
)

__all__ = [
    "DEFAULT_PREFIX",
    "DirectoryIdReader",
    "RegistryUnavailable",
    "directory_ids",
    "directory_ids_by_path",
    "registration_key",
]


class RegistryUnavailable(RuntimeError):
    """The registration could not be read; the message says from where and why."""


def directory_ids(
    endpoints: Sequence[str], prefix: str, broker_id: int, *, timeout: float = 2.0
) -> dict[str, str]:
    """path -> directory id of broker ``broker_id``'s log directories, as it registered them.

    Empty when the broker has not registered. Tries each endpoint in turn; raises
    ``RegistryUnavailable`` when none answers or the record cannot be read.
    """
    if not endpoints:
        raise RegistryUnavailable("no etcd endpoints are known for this broker")
    key = registration_key(prefix, broker_id)
    body = json.dumps({"key": base64.b64encode(key).decode("ascii")}).encode()
    problems = []
    for endpoint in endpoints:
        url = f"{endpoint.rstrip('/')}/v3/kv/range"
        request = urllib.request.Request(
            url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                answer: dict[str, Any] = json.load(response)
        except (OSError, ValueError) as exc:  # URLError and timeouts are OSErrors
            problems.append(f"{url}: {exc}")
            continue
        kvs = answer.get("kvs") or []
        if not kvs:
            return {}
        try:
            return directory_ids_by_path(base64.b64decode(kvs[0]["value"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RegistryUnavailable(
                f"registration {key.decode()} at {endpoint} is not readable: {exc}"
            ) from exc
    raise RegistryUnavailable(
        f"no etcd endpoint answered for {key.decode()}: {'; '.join(problems)}"
    )


class DirectoryIdReader:
    """``directory_ids`` for the probe loop, which must not wait on an etcd that is down: after
    a failed read a broker's registration is not asked for again for ``backoff`` seconds (its
    LogVolumes keep the ids last shown). A successful read is not cached: a broker restarted on
    a replaced, empty directory has a new id, and one request per probe is cheap. Thread-safe
    (the probe loop's workers share one reader)."""

    def __init__(
        self,
        *,
        backoff: float = 30.0,
        timeout: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        read: Callable[..., dict[str, str]] = directory_ids,
    ) -> None:
        self._backoff = backoff
        self._timeout = timeout
        self._clock = clock
        self._read = read
        self._guard = threading.Lock()
        self._retry_at: dict[tuple[tuple[str, ...], str, int], float] = {}

    def read_or_error(
        self, endpoints: Sequence[str], prefix: str, broker_id: int
    ) -> tuple[dict[str, str] | None, RegistryUnavailable | None]:
        """``(ids, None)``, or ``(None, error)`` for a read that failed now, or ``(None,
        None)`` while backing off from an earlier failure."""
        key = (tuple(endpoints), prefix, broker_id)
        now = self._clock()
        with self._guard:
            if self._retry_at.get(key, now) > now:
                return None, None
        try:
            ids = self._read(endpoints, prefix, broker_id, timeout=self._timeout)
        except RegistryUnavailable as exc:
            with self._guard:
                self._retry_at[key] = self._clock() + self._backoff
            return None, exc
        with self._guard:
            self._retry_at.pop(key, None)
        return ids, None
