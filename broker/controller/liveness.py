"""The active controller's own clock on broker sessions (Kafka's ``BrokerHeartbeatManager``).

Why this exists: a broker's session is an etcd lease of ``broker.session.timeout.ms``
(:mod:`.session`), and etcd revokes expired leases only on a 500 ms tick, so a dead broker's
session key went away 0 to 0.5 s *after* its session timeout (measured: last keepalive + 3.0 to
3.5 s for a 3 s lease). Kafka's controller fences a broker at its last heartbeat + the session
timeout exactly (a deferred event scheduled for that deadline). So the active controller keeps
the same clock itself: every ``broker.heartbeat.interval.ms`` it asks each unfenced broker for
its ApiVersions on the broker's registered listener (no new API: every Kafka broker answers
it), and a broker that answered in its current session and then stays silent for a whole
session timeout has its session ended -- its lease revoked, which deletes the session key
exactly as etcd's expiry would, only on time. Everything after is unchanged: the controller
sees the key go and moves leadership (:mod:`.cluster`); a broker that was merely slow finds its
lease gone at its next heartbeat and registers again with a new epoch, as after an expiry.

Guards, as Kafka's: the deadline counts from when an answer *arrived* (never earlier than a
heartbeat-receiving controller would fence); a controller whose own loop stalled (a check ran
later than one heartbeat interval past its time) counts every broker as seen at that moment
(Kafka's ``processExpiredBrokerHeartbeat``); a broker that has not answered once in its current
session is left to etcd's lease, so a controller that cannot reach a broker does not fence it
over and over. With no active controller, etcd's lease is the only clock, as before.

Event loop only; one monitor per controller term (:meth:`SessionMonitor.run` until cancelled).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import warnings
from dataclasses import dataclass, field

from spindle.broker.common.clock import Clock, SystemClock
from spindle.broker.peer import PLAINTEXT, PeerConnection, PeerSecurity

from .etcd import EtcdClient, EtcdError
from .store import MetadataStore

with warnings.catch_warnings():  # kafka-python's schema classes warn on import
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.metadata import ApiVersionsRequest

log = logging.getLogger(__name__)


class _Probe(PeerConnection):
    """One Kafka connection to a broker, asking ApiVersions (v0: every version answers it)."""

    async def ask(self, timeout_s: float) -> None:
        """One request answered (any well-framed answer with our correlation id); raises
        OSError/TimeoutError/ValueError otherwise."""
        corr, data = await self.exchange(ApiVersionsRequest[0](), timeout_s)
        (answered,) = struct.unpack(">i", data[:4])
        if answered != corr:
            raise ValueError(f"answer to request {answered}, expected {corr}")


@dataclass
class _Tracked:
    """One broker session the monitor watches."""

    epoch: int
    lease: int
    probe: _Probe
    last_ok: float | None = None
    """When the last answer arrived (monotonic); None: none yet in this session."""
    asked: int = 0
    """Requests sent in this session, answered or not."""
    asking: asyncio.Task[None] | None = field(default=None, repr=False)


class SessionMonitor:
    """Ends the session of an unfenced broker silent for a whole session timeout (see module
    docstring). ``expired`` counts the sessions it ended."""

    def __init__(
        self,
        store: MetadataStore,
        client: EtcdClient,
        *,
        node_id: int,
        session_timeout_s: float,
        interval_s: float,
        clock: Clock | None = None,
        security: PeerSecurity = PLAINTEXT,
    ) -> None:
        self.store = store
        self._security = security
        self._client = client
        self.node_id = node_id
        self.session_timeout_s = session_timeout_s
        self.interval_s = interval_s
        self._clock: Clock = clock or SystemClock()
        self.tracked: dict[int, _Tracked] = {}
        self.expired = 0
        self._closing: set[asyncio.Task[None]] = set()
        """Connections being closed (held so that no task is collected half-way)."""

    async def run(self) -> None:
        """Ask, check deadlines, sleep until the next ask or deadline; until cancelled."""
        due = self._clock.monotonic()
        try:
            while True:
                now = self._clock.monotonic()
                if now - due > self.interval_s:
                    # This loop ran late (a busy or paused controller): nobody's silence
                    # can be told from our own, so count every broker as seen now.
                    for t in self.tracked.values():
                        if t.last_ok is not None:
                            t.last_ok = now
                self._sync()
                for node, t in self.tracked.items():
                    if t.asking is None or t.asking.done():
                        t.asking = asyncio.create_task(self._ask(node, t))
                await self._expire_stale()
                due = self._next_due()
                await asyncio.sleep(max(0.0, due - self._clock.monotonic()))
        finally:
            await self.close()

    def _sync(self) -> None:
        """Track exactly the unfenced sessions of other brokers, each from its epoch on."""
        leases = self.store.session_leases
        live = {
            b: s
            for b, s in self.store.sessions.items()
            if b != self.node_id and not s.wants_fence and b in self.store.brokers
        }
        for node in list(self.tracked):
            session = live.get(node)
            if session is None or session.epoch != self.tracked[node].epoch:
                self._forget(node)
        for node, session in live.items():
            if node not in self.tracked and leases.get(node):
                reg = self.store.brokers[node]
                probe = _Probe(
                    reg.host,
                    reg.port,
                    client_id=f"controller-{self.node_id}",
                    security=self._security,
                )
                self.tracked[node] = _Tracked(session.epoch, leases[node], probe)

    def _forget(self, node: int) -> None:
        t = self.tracked.pop(node)
        if t.asking is not None:
            t.asking.cancel()
        closing = asyncio.get_running_loop().create_task(t.probe.close())
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    async def _ask(self, node: int, t: _Tracked) -> None:
        t.asked += 1
        try:
            await t.probe.ask(self.session_timeout_s)
            t.last_ok = self._clock.monotonic()
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError) as exc:
            log.debug("broker %d did not answer the controller: %r", node, exc)
            await t.probe.close()

    def _next_due(self) -> float:
        now = self._clock.monotonic()
        deadlines = [
            t.last_ok + self.session_timeout_s
            for t in self.tracked.values()
            if t.last_ok is not None
        ]
        return min([now + self.interval_s, *deadlines])

    async def _expire_stale(self) -> None:
        now = self._clock.monotonic()
        for node, t in list(self.tracked.items()):
            if t.last_ok is None or now - t.last_ok < self.session_timeout_s:
                continue
            if t.asking is not None and not t.asking.done():
                await asyncio.sleep(0.01)  # an answer already on its way lands first
                if t.last_ok is not None and self._clock.monotonic() - t.last_ok < (
                    self.session_timeout_s
                ):
                    continue
            silent = now - t.last_ok
            log.warning(
                "broker %d has not answered the controller for %.2f s (session timeout %.2f s): "
                "ending its session (epoch %d)",
                node,
                silent,
                self.session_timeout_s,
                t.epoch,
            )
            self._forget(node)
            try:
                await self._client.lease_revoke(t.lease)
                self.expired += 1
            except EtcdError as exc:  # etcd's own expiry remains
                log.warning("could not end broker %d's session: %s", node, exc)

    async def close(self) -> None:
        for node in list(self.tracked):
            t = self.tracked.pop(node)
            if t.asking is not None:
                t.asking.cancel()
            await t.probe.close()
