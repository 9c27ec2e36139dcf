"""Broker registration and sessions on a real etcd: registration with directory ids, one live
session per node id, offline dirs reported, unfencing, expiry = broker loss, re-registration
with a new epoch."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.model import BrokerRegistration, is_fenced
from spindle.broker.controller.session import BrokerLifecycle
from spindle.broker.controller.store import MetadataDelta, MetadataStore

from ..conftest import Etcd
from .test_controller_election import _wait_for


@pytest.fixture
async def client(etcd: Etcd) -> AsyncIterator[EtcdClient]:
    c = EtcdClient([etcd.url])
    yield c
    await c.close()


def _lifecycle(client: EtcdClient, prefix: str, node_id: int, **kw: int) -> BrokerLifecycle:
    reg = BrokerRegistration(node_id, "127.0.0.1", 9000 + node_id, "rack-a", ["dirA", "dirB"])
    return BrokerLifecycle(client, prefix=prefix, registration=reg, **kw)


class Follower:
    """A metadata store following etcd's watch, recording the deltas it saw."""

    def __init__(self, client: EtcdClient, prefix: str) -> None:
        self.store = MetadataStore(client, prefix=prefix)
        self.deltas: list[MetadataDelta] = []
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Follower:
        await self.store.load()

        async def record(delta: MetadataDelta) -> None:
            self.deltas.append(delta)

        self.store.add_listener(record)
        self.task = asyncio.create_task(self.store.follow())
        return self

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


async def test_registration_records_dirs_and_starts_fenced(client: EtcdClient) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    life = _lifecycle(client, prefix, 1)
    epoch = await life.register()
    store = MetadataStore(client, prefix=prefix)
    await store.load()
    assert store.brokers[1].directories == ["dirA", "dirB"]
    assert store.brokers[1].rack == "rack-a"
    assert store.sessions[1].epoch == epoch > 0
    assert is_fenced(store.sessions[1])
    await life.set_fenced(False)
    await store.load()
    assert not is_fenced(store.sessions[1])
    await life.close()


async def test_second_live_session_of_a_node_id_is_refused(client: EtcdClient) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    first = _lifecycle(client, prefix, 1)
    await first.register()
    second = _lifecycle(client, prefix, 1)
    with pytest.raises(KafkaError) as info:
        await second.register()
    assert info.value.code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    await first.close()
    # Once the first session has ended, the node id may register again, with a larger epoch.
    assert await second.register() > first.epoch
    await second.close()


async def test_offline_dirs_reach_the_watching_controller(client: EtcdClient) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    life = _lifecycle(client, prefix, 2)
    await life.register()
    follower = await Follower(client, prefix).start()
    try:
        await life.report_offline_dirs(["dirB"])
        await _wait_for(
            lambda: follower.store.sessions[2].offline_dirs == ["dirB"], "the offline dir"
        )
        assert any(2 in d.sessions for d in follower.deltas)
        # Offline dirs only accumulate until restart (KIP-858 repeats them in every heartbeat).
        await life.report_offline_dirs(["dirA"])
        await _wait_for(
            lambda: follower.store.sessions[2].offline_dirs == ["dirA", "dirB"], "both dirs"
        )
    finally:
        await follower.stop()
        await life.close()


async def test_expired_session_is_broker_loss_and_heartbeat_reregisters(
    client: EtcdClient,
) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    life = _lifecycle(client, prefix, 3, session_timeout_ms=2000, heartbeat_interval_ms=500)
    old_epoch = await life.register()
    await life.set_fenced(False)
    follower = await Follower(client, prefix).start()
    try:
        assert 3 in follower.store.sessions
        # No heartbeats (the broker is stalled): etcd ends the session, the watcher sees it.
        await _wait_for(lambda: 3 not in follower.store.sessions, "the session to expire")
        assert 3 in follower.store.brokers  # the registration stays; only the session ended
        assert await life.heartbeat() is False
        assert life.expirations == 1
        await _wait_for(lambda: 3 in follower.store.sessions, "the new session")
        await _wait_for(lambda: not is_fenced(follower.store.sessions.get(3)), "unfencing")
        assert follower.store.sessions[3].epoch == life.epoch > old_epoch
    finally:
        await follower.stop()
        await life.close()


async def test_heartbeats_keep_the_session_alive_past_its_timeout(client: EtcdClient) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    life = _lifecycle(client, prefix, 4, session_timeout_ms=2000, heartbeat_interval_ms=300)
    epoch = await life.register()
    beating = asyncio.create_task(life.run())
    try:
        # Two session timeouts' worth of heartbeats, each renewing the same session.
        for _ in range(14):
            await asyncio.sleep(0.3)
            assert await life.heartbeat() is True
        store = MetadataStore(client, prefix=prefix)
        await store.load()
        assert store.sessions[4].epoch == epoch
        assert life.expirations == 0
    finally:
        beating.cancel()
        await asyncio.gather(beating, return_exceptions=True)
        await life.close()


async def test_closing_the_session_ends_it_at_once(client: EtcdClient) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    life = _lifecycle(client, prefix, 5)
    await life.register()
    await life.close()
    store = MetadataStore(client, prefix=prefix)
    await store.load()
    assert 5 not in store.sessions
    assert 5 in store.brokers
