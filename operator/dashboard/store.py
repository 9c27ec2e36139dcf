"""What the dashboard knows: the Spindle objects, kept current by Kubernetes watches.

One task per resource type (and per namespace when the dashboard serves named namespaces)
lists, then watches from the list's resourceVersion, and lists again when the server says the
version is gone (HTTP 410) or the connection drops. Every change is offered to subscribers
(the server-sent-event streams) as a small notice -- kind, namespace, name, type -- so a page
re-renders only when something it shows changed. Single event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from spindle.operator.dashboard.client import WATCHED, ApiError, AsyncKube, GoneError, Kind

log = logging.getLogger(__name__)
Obj = dict[str, Any]


@dataclass(frozen=True)
class Change:
    """One object changed (``type`` ADDED, MODIFIED, DELETED) or a whole kind was re-listed
    (``type`` RESYNC, name empty)."""

    kind: str
    namespace: str
    name: str
    type: str

    def as_json(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "type": self.type,
        }


def _terms(patterns: tuple[str, ...]) -> list[str]:
    """kopf's namespace syntax: each value may hold comma-separated globs, ``!`` excludes."""
    return [t.strip() for p in patterns for t in p.split(",") if t.strip()]


def literal(patterns: tuple[str, ...]) -> bool:
    """Whether every pattern names one namespace (then each is watched on its own, which a
    Role in that namespace allows; a glob or an exclusion needs a cluster-wide watch)."""
    terms = _terms(patterns)
    return bool(terms) and not any(set(t) & set("*?[!") for t in terms)


def serves(patterns: tuple[str, ...], namespace: str) -> bool:
    """Whether ``namespace`` is served: it matches an inclusion (or there is none) and no
    exclusion, as kopf decides for ``--namespace``."""
    terms = _terms(patterns)
    include = [t for t in terms if not t.startswith("!")]
    exclude = [t[1:] for t in terms if t.startswith("!")]
    if any(fnmatch.fnmatchcase(namespace, t) for t in exclude):
        return False
    return not include or any(fnmatch.fnmatchcase(namespace, t) for t in include)


class Store:
    """Objects by kind plural and (namespace, name); subscribers get ``Change`` notices."""

    def __init__(
        self, kube: AsyncKube, namespaces: tuple[str, ...] = (), *, retry_seconds: float = 2.0
    ) -> None:
        self._kube = kube
        self._patterns = namespaces
        self._retry = retry_seconds
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {k.plural: {} for k in WATCHED}
        self._subscribers: set[asyncio.Queue[Change]] = set()
        self._listed: set[tuple[str, str | None]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self.ready = asyncio.Event()

    # -- reading -------------------------------------------------------------------------
    def serves(self, namespace: str) -> bool:
        return serves(self._patterns, namespace)

    def objects(self, kind: Kind) -> list[Obj]:
        """Every object of a kind, sorted by namespace and name (stable pages)."""
        table = self._objects[kind.plural]
        return [table[key] for key in sorted(table)]

    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        return self._objects[kind.plural].get((namespace, name))

    # -- subscribing ---------------------------------------------------------------------
    @contextlib.contextmanager
    def subscribe(self, maxsize: int = 256) -> Iterator[asyncio.Queue[Change]]:
        """A queue of changes for as long as the ``with`` lasts. A subscriber that falls
        behind loses the oldest notices, not the newest (a page needs the latest state)."""
        queue: asyncio.Queue[Change] = asyncio.Queue(maxsize=maxsize)
        self._subscribers.add(queue)
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)

    def _publish(self, change: Change) -> None:
        for queue in self._subscribers:
            if queue.full():
                with contextlib.suppress(asyncio.QueueEmpty):
                    queue.get_nowait()
            queue.put_nowait(change)

    def apply(self, kind: Kind, type_: str, obj: Obj) -> None:
        """Record one watch event (also used right after the dashboard's own patches, so the
        page that made a change shows it without waiting for the watch)."""
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        if not self.serves(namespace):
            return
        obj.setdefault("kind", kind.kind)
        obj.setdefault("apiVersion", kind.api_version)
        table = self._objects[kind.plural]
        if type_ == "DELETED":
            table.pop((namespace, name), None)
        else:
            old = table.get((namespace, name))
            if old is not None and _newer(old, obj):
                return
            table[(namespace, name)] = obj
        self._publish(Change(kind.kind, namespace, name, type_))

    # -- following -----------------------------------------------------------------------
    def start(self) -> None:
        scopes: list[str | None] = (
            list(_terms(self._patterns)) if literal(self._patterns) else [None]
        )
        for kind in WATCHED:
            for namespace in scopes:
                task = asyncio.create_task(self._follow(kind, namespace))
                self._tasks.append(task)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def _follow(self, kind: Kind, namespace: str | None) -> None:
        while True:
            try:
                version = await self._relist(kind, namespace)
                while True:
                    async for type_, obj in self._kube.watch(kind, namespace, version):
                        version = obj.get("metadata", {}).get("resourceVersion") or version
                        if type_ != "BOOKMARK":
                            self.apply(kind, type_, obj)
            except GoneError:
                continue
            except asyncio.CancelledError:
                raise
            except (TimeoutError, ApiError, OSError, ValueError) as exc:
                log.warning("dashboard: watching %s failed (%s); retrying", kind.plural, exc)
                await asyncio.sleep(self._retry)
            except Exception:
                log.exception("dashboard: watching %s failed; retrying", kind.plural)
                await asyncio.sleep(self._retry)

    async def _relist(self, kind: Kind, namespace: str | None) -> str:
        items, version = await self._kube.list(kind, namespace)
        table = self._objects[kind.plural]
        for key in [k for k in table if namespace is None or k[0] == namespace]:
            del table[key]
        for item in items:
            meta = item["metadata"]
            if self.serves(meta.get("namespace", "")):
                table[(meta["namespace"], meta["name"])] = item
        self._listed.add((kind.plural, namespace))
        if len(self._listed) >= len(self._tasks):
            self.ready.set()
        self._publish(Change(kind.kind, namespace or "", "", "RESYNC"))
        return version


def _newer(old: Obj, new: Obj) -> bool:
    """Whether ``old`` is a later version than ``new`` (a stale watch event after the
    dashboard stored its own patch's answer). resourceVersions are opaque strings, but
    etcd's are integers; compare only when both are."""
    a = str(old.get("metadata", {}).get("resourceVersion", ""))
    b = str(new.get("metadata", {}).get("resourceVersion", ""))
    return a.isdigit() and b.isdigit() and int(a) > int(b)
