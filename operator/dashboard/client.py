"""An asyncio JSON client for the Kubernetes API: list, watch, get, patch, create.

Why not the operator's ``KubeApi``: that one is synchronous (kopf runs sync handlers in its
thread pool), and the dashboard lives on the event loop serving many browsers at once, with a
long-lived watch per resource type. Why not ``kubernetes_asyncio``: the dashboard needs five
calls on plain dicts (the same shape ``kubectl get -o json`` shows), and aiohttp is already
here (kopf and the server use it). Credentials come from the operator's own loader
(``spindle.operator.kube.client.load_configuration``), so the dashboard connects exactly as the
operator does: in a Pod as its ServiceAccount (token re-read as it rotates), else
``$KUBECONFIG``.

Watch wire format (Kubernetes API concepts, "Efficient detection of changes"): one JSON object
per line, ``{"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR", "object": {...}}``; an
``ERROR`` whose object is a Status with code 410 means the resourceVersion is too old and the
caller must list again.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
from kubernetes import client
from spindle.operator.kube.client import KubeError, auth_headers, load_configuration
from spindle.operator.specs.names import GROUP, VERSION


@dataclass(frozen=True)
class Kind:
    """A resource type by API group, version, plural and kind (``""`` group = core)."""

    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, sub: str | None = None
    ) -> str:
        """REST path; ``namespace=None`` lists across every namespace."""
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if namespace is not None:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name)}"
        if sub is not None:
            base += f"/{sub}"
        return base


BROKERS = Kind(GROUP, VERSION, "brokers", "Broker")
LOGVOLUMES = Kind(GROUP, VERSION, "logvolumes", "LogVolume")
REASSIGNMENTS = Kind(GROUP, VERSION, "reassignments", "Reassignment")
REBALANCES = Kind(GROUP, VERSION, "rebalances", "Rebalance")
EVENTS = Kind("", "v1", "events", "Event")
WATCHED = (BROKERS, LOGVOLUMES, REASSIGNMENTS, REBALANCES)
BY_PLURAL = {k.plural: k for k in (*WATCHED, EVENTS)}


class ApiError(KubeError):
    """A non-2xx answer, with the status code and the API server's own message (the same
    error as the operator's synchronous client raises; this one comes from aiohttp)."""


class GoneError(ApiError):
    """The watch's resourceVersion is too old (HTTP 410): list again."""


class AsyncKube:
    """One aiohttp session to the API server; safe to share between tasks of one loop."""

    def __init__(self, configuration: client.Configuration, *, timeout: float = 30.0) -> None:
        self._config = configuration
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_environment(cls) -> AsyncKube:
        """Credentials like kubectl's: the in-cluster service account, else ``$KUBECONFIG``."""
        return cls(load_configuration())

    @classmethod
    def from_kubeconfig(cls, path: str) -> AsyncKube:
        """Credentials from an explicit kubeconfig file (tests, scripts)."""
        return cls(load_configuration(path))

    def _ssl(self) -> ssl.SSLContext | bool:
        cfg = self._config
        if not cfg.host.startswith("https"):
            return False
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
        if not cfg.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cfg.cert_file:
            context.load_cert_chain(cfg.cert_file, cfg.key_file or None)
        return context

    def _headers(self) -> dict[str, str]:
        # Asked per request: the in-cluster token rotates and the loader's hook re-reads it.
        return auth_headers(self._config)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                base_url=self._config.host.rstrip("/") + "/",
                connector=aiohttp.TCPConnector(ssl=self._ssl()),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        """One call; the decoded JSON answer, or ``ApiError``."""
        url = path.lstrip("/") + (f"?{urlencode(query)}" if query else "")
        headers = {"Accept": "application/json", **self._headers()}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body)
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        async with self._client().request(
            method, url, data=data, headers=headers, timeout=timeout
        ) as answer:
            text = await answer.text()
            if not 200 <= answer.status < 300:
                raise ApiError(method, path, answer.status, text)
            return json.loads(text) if text else None

    async def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await self.request("GET", kind.path(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return found

    async def list(
        self, kind: Kind, namespace: str | None, *, query: dict[str, str] | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Items (with kind and apiVersion filled in, as a list leaves them out) and the
        list's resourceVersion to watch from."""
        answer = await self.request("GET", kind.path(namespace), query=query)
        items: list[dict[str, Any]] = answer.get("items") or []
        for item in items:
            item.setdefault("kind", kind.kind)
            item.setdefault("apiVersion", kind.api_version)
        return items, str(answer.get("metadata", {}).get("resourceVersion", ""))

    async def patch(
        self, kind: Kind, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        """JSON merge patch, as ``kubectl patch --type=merge`` sends it."""
        result: dict[str, Any] = await self.request(
            "PATCH",
            kind.path(namespace, name),
            body=patch,
            content_type="application/merge-patch+json",
        )
        return result

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("POST", path, body=body)
        return result

    async def watch(
        self, kind: Kind, namespace: str | None, resource_version: str, *, seconds: int = 300
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(type, object) pairs from one watch request, which the server ends after about
        ``seconds``; raises ``GoneError`` when the caller must list again."""
        query = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(seconds),
        }
        url = kind.path(namespace).lstrip("/") + "?" + urlencode(query)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._timeout)
        async with self._client().get(url, headers=self._headers(), timeout=timeout) as answer:
            if answer.status == 410:
                raise GoneError("GET", url, 410, await answer.text())
            if answer.status != 200:
                raise ApiError("GET", url, answer.status, await answer.text())
            buffer = b""
            # Lines can be far longer than aiohttp's readline limit (a big status), so split here.
            async for chunk in answer.content.iter_any():
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        code = int(obj.get("code") or 0)
                        error = GoneError if code == 410 else ApiError
                        raise error("WATCH", url, code, json.dumps(obj))
                    yield str(event.get("type")), obj
