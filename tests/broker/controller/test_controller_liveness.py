"""The active controller's own clock on broker sessions (``controller/liveness.py``), against a
real broker process and a real etcd: a broker that stops answering loses its session at the
controller's session timeout -- here its etcd lease is 60 s, so only the controller can have
ended it -- and registers again with a new epoch once it runs again; a broker that never
answered is left to its lease; a controller whose own loop stalled fences nobody for it.

The broker is frozen with SIGSTOP (its heartbeats stop as a dead broker's do, and resume on
SIGCONT as a paused one's). The monitor runs in the test process with a 1.5 s session timeout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.liveness import SessionMonitor
from spindle.broker.controller.model import BrokerRegistration
from spindle.broker.controller.session import BrokerLifecycle
from spindle.broker.controller.store import MetadataStore

from ..conftest import Broker, Etcd, free_port, make_broker
from .test_controller_election import _wait_for

MONITOR_NODE = 99
TIMEOUT_S = 1.5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Broker]:
    started = make_broker(
        tmp_path_factory.mktemp("liveness"),
        etcd,
        dirs=1,
        extra={
            "spindle.controller.mode": "elected",
            "broker.session.timeout.ms": "60000",  # etcd alone would keep it a minute
            "broker.heartbeat.interval.ms": "200",
        },
    )
    started.start()
    yield started
    if started.proc is not None and started.proc.poll() is None:
        os.kill(started.proc.pid, signal.SIGCONT)
    started.stop()


class Offset:
    """A monotonic clock the test can move forward (a stalled controller loop)."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def wall_ms(self) -> int:
        return 0

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time() + self.ahead

    def sleep(self, seconds: float) -> None:
        raise AssertionError("not used")


@pytest.fixture
async def store(broker: Broker) -> AsyncIterator[MetadataStore]:
    client = EtcdClient([broker.etcd_url])
    following = MetadataStore(client, prefix=broker.etcd_prefix)
    await following.load()
    task = asyncio.create_task(following.follow())
    yield following
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await client.close()


async def _until(check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    await _wait_for(check, what, timeout_s)


def _monitor(store: MetadataStore, clock: Offset | None = None) -> SessionMonitor:
    return SessionMonitor(
        store,
        store._client,
        node_id=MONITOR_NODE,
        session_timeout_s=TIMEOUT_S,
        interval_s=0.25,
        clock=clock,
    )


async def test_a_silent_broker_loses_its_session_at_the_controller_timeout_and_comes_back(
    broker: Broker, store: MetadataStore
) -> None:
    node = broker.node_id
    await _until(lambda: node in store.sessions and not store.sessions[node].wants_fence, "up")
    epoch = store.sessions[node].epoch
    monitor = _monitor(store)
    task = asyncio.create_task(monitor.run())
    try:
        await _until(lambda: monitor.tracked.get(node) is not None, "tracked")
        await _until(lambda: monitor.tracked[node].last_ok is not None, "answered")
        assert broker.proc is not None
        os.kill(broker.proc.pid, signal.SIGSTOP)
        try:
            # Its lease has 60 s left: a session gone now was ended by the controller.
            await _until(lambda: node not in store.sessions, "session ended", timeout_s=20)
            # (etcd's watch may tell of the deletion before the revoke call returns.)
            await _until(lambda: monitor.expired == 1, "counted as ended by the controller")
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        # Running again, it finds its lease gone and registers anew, as after an expiry.
        await _until(
            lambda: node in store.sessions and store.sessions[node].epoch > epoch, "re-registered"
        )
        await _until(lambda: not store.sessions[node].wants_fence, "unfenced again")
        await _until(
            lambda: (t := monitor.tracked.get(node)) is not None and t.last_ok is not None,
            "tracked in its new session",
        )
        assert monitor.tracked[node].epoch == store.sessions[node].epoch
        assert monitor.expired == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_broker_that_never_answered_is_left_to_its_lease(
    broker: Broker, store: MetadataStore
) -> None:
    ghost = 7
    reg = BrokerRegistration(ghost, "127.0.0.1", free_port(), None, [uuid.uuid4().hex])
    lifecycle = BrokerLifecycle(
        store._client, prefix=broker.etcd_prefix, registration=reg, session_timeout_ms=60000
    )
    await lifecycle.register()
    await lifecycle.set_fenced(False)
    monitor = _monitor(store)
    task = asyncio.create_task(monitor.run())
    try:
        await _until(lambda: ghost in monitor.tracked, "tracked")
        # Many times the session timeout of asking, never an answer: still its lease's call.
        await _until(lambda: monitor.tracked[ghost].asked >= 12, "asked", timeout_s=60)
        assert monitor.tracked[ghost].last_ok is None
        assert ghost in store.sessions
        assert monitor.expired == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await lifecycle.close()


async def test_a_stalled_controller_fences_nobody_for_its_own_silence(
    broker: Broker, store: MetadataStore
) -> None:
    node = broker.node_id
    await _until(lambda: node in store.sessions and not store.sessions[node].wants_fence, "up")
    clock = Offset()
    monitor = _monitor(store, clock)
    task = asyncio.create_task(monitor.run())
    try:
        await _until(
            lambda: (t := monitor.tracked.get(node)) is not None and t.last_ok is not None,
            "answered",
        )
        epoch = store.sessions[node].epoch
        clock.ahead += 10 * TIMEOUT_S  # the controller's loop wakes far past every deadline
        asked = monitor.tracked[node].asked
        await _until(lambda: monitor.tracked[node].asked >= asked + 8, "kept asking")
        assert monitor.expired == 0
        assert store.sessions[node].epoch == epoch
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
