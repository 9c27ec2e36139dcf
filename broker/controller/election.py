"""Controller election on etcd: one active controller per cluster prefix, fenced by its term.

How it works (Kafka's ``/controller`` znode and controller epoch, on etcd)::

    P/controller         {"node_id": N, "epoch": E}   put under the winner's lease
    P/controller_epoch   E                             the last epoch handed out (persistent)

A candidate reads ``controller_epoch`` (value E, mod revision m) and runs one transaction:
"``P/controller`` does not exist and ``controller_epoch`` is still at m" -> put both with E+1.
Exactly one candidate's transaction succeeds; the others learn the winner from the same round
trip and wait (on a watch) for the key to go away. The winner keeps its lease alive every
``ttl / 3``; when it stops (SIGKILL, GC pause, partition from etcd) the lease expires, etcd
deletes the key and the next candidate wins with epoch E+2.

Fencing: the ``P/controller`` key's *create revision* names one term. Every write a controller
makes carries ``create_revision(P/controller) == its term's`` (:meth:`ControllerTerm.fence`), so
once its lease has ended or a successor exists, a deposed controller's writes fail in etcd itself
-- not merely in its own belief -- and it steps down. A holder also steps down by itself when
it has not renewed its lease for a whole TTL (it cannot know whether etcd still has it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from spindle.broker.common.clock import Clock, SystemClock

from .etcd import Compare, CompareCreate, EtcdClient, EtcdError, Get, LeaseNotFound, Put
from .model import parse_controller
from .watch import PrefixWatcher, WatchCompacted

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerTerm:
    """One controller's tenure: who, which epoch, and the etcd facts that fence it."""

    node_id: int
    epoch: int
    create_revision: int
    """Create revision of the controller key written at election: names this term."""
    lease_id: int
    key: bytes

    def fence(self) -> CompareCreate:
        """The compare every write of this controller carries."""
        return CompareCreate(self.key, self.create_revision)


class ControllerElection:
    """Campaign for and hold the controller role of one cluster prefix (see module docstring).

    ``run()`` loops forever: campaign, hold while elected (calling ``on_elected`` then, on loss,
    ``on_resigned``), wait for a vacancy. ``resign()`` ends the term at once (graceful
    shutdown), so a successor need not wait for the lease to expire.
    """

    def __init__(
        self,
        client: EtcdClient,
        *,
        prefix: str,
        node_id: int,
        lease_ttl_s: int,
        on_elected: Callable[[ControllerTerm], Awaitable[None]] | None = None,
        on_resigned: Callable[[ControllerTerm], Awaitable[None]] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._client = client
        base = prefix.rstrip("/")
        self.key = f"{base}/controller".encode()
        self.epoch_key = f"{base}/controller_epoch".encode()
        self.node_id = node_id
        self.lease_ttl_s = lease_ttl_s
        self._on_elected = on_elected
        self._on_resigned = on_resigned
        self._clock: Clock = clock or SystemClock()
        self.term: ControllerTerm | None = None
        self._lost = asyncio.Event()

    async def campaign(self) -> tuple[ControllerTerm | None, int]:
        """One attempt. Returns (the new term, revision) if this node won, else (None, the
        revision at which the key was seen held)."""
        while True:
            current = await self._client.get(self.epoch_key)
            epoch = int(current.value) if current else 0
            seen = current.mod_revision if current else 0
            lease_id, _ttl = await self._client.lease_grant(self.lease_ttl_s)
            value = json.dumps({"node_id": self.node_id, "epoch": epoch + 1}).encode()
            result = await self._client.transact(
                [CompareCreate(self.key, 0), Compare(self.epoch_key, seen)],
                [
                    Put(self.key, value, lease=lease_id),
                    Put(self.epoch_key, str(epoch + 1).encode()),
                    Get(self.key),
                ],
                [Get(self.key)],
            )
            if result.succeeded:
                kv = result.reads[0]
                assert kv is not None
                term = ControllerTerm(
                    self.node_id, epoch + 1, kv.create_revision, lease_id, self.key
                )
                log.info("node %d elected controller, epoch %d", self.node_id, term.epoch)
                return term, result.revision
            await self._client.lease_revoke(lease_id)
            if result.reads[0] is not None:
                return None, result.revision
            # The epoch moved but the seat is empty (a term started and ended): try again.

    async def current(self) -> tuple[int, int] | None:
        """The active controller's (node id, epoch), or None if there is none right now."""
        kv = await self._client.get(self.key)
        return parse_controller(kv.value) if kv else None

    async def run(self) -> None:
        """Campaign, hold, wait; forever (cancel the task to stop; see :meth:`resign`)."""
        while True:
            try:
                term, revision = await self.campaign()
            except EtcdError as exc:
                log.warning("controller campaign of node %d failed: %s", self.node_id, exc)
                await asyncio.sleep(1.0)
                continue
            if term is None:
                await self._wait_vacant(revision)
                continue
            self.term = term
            self._lost.clear()
            try:
                if self._on_elected is not None:
                    await self._on_elected(term)
                await self._hold(term)
            except EtcdError as exc:
                # Taking office failed half-way (etcd went away): give the seat up rather than
                # hold it without acting; the next campaign starts from etcd's state.
                log.warning("controller node %d could not take office: %s", self.node_id, exc)
            finally:
                self.term = None
                if self._on_resigned is not None:
                    await self._on_resigned(term)
            # Whatever ended the term, make sure the seat is free (harmless if it is). Not on
            # cancellation: a cancelled task is a stopping process, and resign() is the way out.
            with contextlib.suppress(EtcdError):
                await self._client.lease_revoke(term.lease_id)

    def step_down(self) -> None:
        """Called when a fenced write failed: the term is over whatever the lease says."""
        self._lost.set()

    async def _hold(self, term: ControllerTerm) -> None:
        """Renew the lease every TTL/3 until it ends, etcd stays unreachable for a whole TTL,
        or :meth:`step_down` is called."""
        interval = self.lease_ttl_s / 3
        renewed_at = self._clock.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lost.wait(), interval)
            if self._lost.is_set():
                log.warning("controller node %d epoch %d was fenced", term.node_id, term.epoch)
                return
            sent = self._clock.monotonic()
            try:
                await self._client.lease_keepalive(term.lease_id)
                renewed_at = sent
            except LeaseNotFound:
                log.warning("controller lease of node %d ended: stepping down", term.node_id)
                return
            except EtcdError as exc:
                if self._clock.monotonic() - renewed_at >= self.lease_ttl_s:
                    log.warning("controller node %d lost etcd for a TTL (%s)", term.node_id, exc)
                    return

    async def _wait_vacant(self, revision: int) -> None:
        """Return once the controller key is deleted after ``revision`` (or already gone)."""
        if await self._client.get(self.key) is None:
            return
        watcher = PrefixWatcher(
            self._client, self.key, start_revision=revision + 1, single_key=True
        )
        try:
            async for batch in watcher:
                if any(e.deleted for e in batch.events):
                    return
        except WatchCompacted:
            return

    async def resign(self) -> None:
        """End the current term now (revoke the lease: etcd deletes the key)."""
        term = self.term
        if term is not None:
            self._lost.set()
            with contextlib.suppress(EtcdError):
                await self._client.lease_revoke(term.lease_id)
