"""A broker's registration and session in etcd: what Kafka's BrokerRegistration and
BrokerHeartbeat RPCs do, as keys the controller watches.

::

    P/brokers/<id>    BrokerRegistration (listeners, rack, directory ids)   persistent
    P/sessions/<id>   BrokerSession (offline/cordoned dirs, wants_fence)     under the session lease

Registration writes both in one transaction, and only if no session of this node id is alive
(another process with the same ``node.id`` -> DUPLICATE_BROKER_REGISTRATION, as Kafka refuses a
second incarnation; a restart after a crash waits until the old session has expired). The
session lease has ``broker.session.timeout.ms`` as its TTL and is renewed every
``broker.heartbeat.interval.ms``; when renewals stop, etcd deletes the session key and the
controller treats the broker as lost. etcd notices an expired lease only on a 500 ms tick, so
the active controller keeps its own clock too (:mod:`.liveness`) and revokes the lease of a
broker silent for the session timeout, on time; either way the key goes and a broker that was
only slow registers again. The session key's create revision is the broker epoch.

A failed directory is reported by rewriting the session value (its ``offline_dirs`` only grow
until restart, as KIP-858's heartbeats repeat them); ``unfence()`` clears ``wants_fence`` once
every hosted replica's directory is known to the metadata.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from dataclasses import replace

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.registration import registration_key

from .etcd import CompareCreate, EtcdClient, EtcdError, Get, LeaseNotFound, Put
from .model import BrokerRegistration, BrokerSession

log = logging.getLogger(__name__)


class SessionLost(KafkaError):
    """The session key is gone (lease expired): this broker was declared lost."""

    code = ErrorCode.STALE_BROKER_EPOCH


class BrokerLifecycle:
    """Register, heartbeat, report offline dirs, unfence, close (see module docstring).

    Task-safe for one loop: value updates are serialised by a lock.
    """

    def __init__(
        self,
        client: EtcdClient,
        *,
        prefix: str,
        registration: BrokerRegistration,
        session_timeout_ms: int = 9000,
        heartbeat_interval_ms: int = 2000,
    ) -> None:
        self._client = client
        base = prefix.rstrip("/")
        self.registration = registration
        self.reg_key = registration_key(prefix, registration.node_id)
        self.session_key = f"{base}/sessions/{registration.node_id}".encode()
        self.ttl_s = max(1, math.ceil(session_timeout_ms / 1000))
        self.heartbeat_s = heartbeat_interval_ms / 1000
        self.session = BrokerSession(registration.node_id)
        self.lease_id = 0
        self._lock = asyncio.Lock()
        self._wants_fence = True
        self.expirations = 0
        """How many times this broker found its session expired and re-registered."""

    @property
    def epoch(self) -> int:
        return self.session.epoch

    async def register(self) -> int:
        """Write registration and a new session; return the broker epoch. Raises
        DUPLICATE_BROKER_REGISTRATION while another session of this node id is alive."""
        async with self._lock:
            return await self._register_unlocked()

    async def _register_unlocked(self) -> int:
        lease_id, _ttl = await self._client.lease_grant(self.ttl_s)
        session = BrokerSession(
            self.registration.node_id,
            list(self.session.offline_dirs),
            wants_fence=True,
            cordoned_dirs=list(self.session.cordoned_dirs),
        )
        result = await self._client.transact(
            [CompareCreate(self.session_key, 0)],
            [
                Put(self.reg_key, self.registration.to_json()),
                Put(self.session_key, session.to_json(), lease=lease_id),
                Get(self.session_key),
            ],
            [Get(self.session_key)],
        )
        if not result.succeeded:
            await self._client.lease_revoke(lease_id)
            raise KafkaError(
                f"broker {self.registration.node_id} already has a live session (another "
                "process with this node.id, or this broker's previous session not yet expired)",
                ErrorCode.DUPLICATE_BROKER_REGISTRATION,
            )
        kv = result.reads[0]
        assert kv is not None
        session.epoch = kv.create_revision
        self.session = session
        self.lease_id = lease_id
        log.info("broker %d registered, epoch %d", session.node_id, session.epoch)
        return session.epoch

    async def register_when_free(self, *, retry_s: float | None = None) -> int:
        """Register, waiting out a previous session of this node id (a restart after a crash
        must wait until the old lease expires, at most the session timeout)."""
        while True:
            try:
                return await self.register()
            except KafkaError as exc:
                if exc.code != ErrorCode.DUPLICATE_BROKER_REGISTRATION:
                    raise
                log.info("%s; retrying", exc)
            await asyncio.sleep(retry_s if retry_s is not None else self.heartbeat_s)

    async def heartbeat(self) -> bool:
        """Renew the session once. If it had expired, register again (new epoch) and return
        False; True if the session was alive."""
        try:
            await self._client.lease_keepalive(self.lease_id)
            return True
        except LeaseNotFound:
            self.expirations += 1
            log.warning(
                "broker %d session (epoch %d) expired: registering again",
                self.registration.node_id,
                self.epoch,
            )
            async with self._lock:
                await self._register_unlocked()
                if not self._wants_fence:
                    # A new session starts fenced; the broker was ready before, so it still is.
                    await self._update(replace(self.session, wants_fence=False))
            return False

    async def run(self) -> None:
        """Heartbeat every ``broker.heartbeat.interval.ms`` until cancelled; etcd outages are
        logged and retried (the session may expire meanwhile; :meth:`heartbeat` recovers)."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self.heartbeat()
            except (EtcdError, KafkaError) as exc:
                log.warning("broker %d heartbeat failed: %s", self.registration.node_id, exc)

    async def _update(self, session: BrokerSession) -> None:
        result = await self._client.transact(
            [CompareCreate(self.session_key, self.session.epoch)],
            [Put(self.session_key, session.to_json(), lease=self.lease_id)],
        )
        if not result.succeeded:
            raise SessionLost(
                f"broker {session.node_id} session epoch {self.session.epoch} has expired"
            )
        session.epoch = self.session.epoch
        self.session = session

    async def report_offline_dirs(self, dir_ids: list[str]) -> None:
        """Add ``dir_ids`` to the offline directories the controller sees (KIP-858)."""
        async with self._lock:
            merged = sorted(set(self.session.offline_dirs) | set(dir_ids))
            if merged != self.session.offline_dirs:
                await self._update(replace(self.session, offline_dirs=merged))

    async def set_fenced(self, wants_fence: bool) -> None:
        """Ask to be fenced or unfenced (unfence once every replica's directory is known)."""
        async with self._lock:
            self._wants_fence = wants_fence
            if wants_fence != self.session.wants_fence:
                await self._update(replace(self.session, wants_fence=wants_fence))

    async def report_cordoned_dirs(self, dir_ids: list[str]) -> None:
        """KIP-1066: tell the controller which directories are cordoned now (the whole set:
        an uncordoned directory leaves it), so it places no new replica there."""
        async with self._lock:
            wanted = sorted(set(dir_ids))
            if wanted != self.session.cordoned_dirs:
                await self._update(replace(self.session, cordoned_dirs=wanted))

    async def close(self) -> None:
        """End the session now (controlled shutdown): the controller moves leadership away
        without waiting for the session timeout."""
        if self.lease_id:
            with contextlib.suppress(EtcdError):
                await self._client.lease_revoke(self.lease_id)
