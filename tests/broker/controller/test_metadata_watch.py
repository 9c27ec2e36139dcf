"""Metadata through etcd watches: a following store sees other writers' puts and deletes in
revision order, resumes after etcd restarts without missing a change, and reloads when the
revisions it needs were compacted."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.model import PartitionState, TopicState
from spindle.broker.controller.store import MetadataStore
from spindle.broker.controller.watch import PrefixWatcher, WatchCompacted

from ..conftest import Etcd
from .conftest import OwnEtcd
from .test_broker_sessions import Follower
from .test_controller_election import _wait_for


def _topic(name: str, leader: int = 1) -> TopicState:
    part = PartitionState(0, [1, 2], ["dA", "dB"], leader, isr=[1, 2])
    return TopicState(name, f"id-{name}", {0: part})


@pytest.fixture
async def client(etcd: Etcd) -> AsyncIterator[EtcdClient]:
    c = EtcdClient([etcd.url])
    yield c
    await c.close()


async def test_follower_sees_puts_and_deletes_in_revision_order(client: EtcdClient) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    writer = MetadataStore(client, prefix=prefix)
    await writer.load()
    follower = await Follower(client, prefix).start()
    try:
        await writer.put_topic(_topic("a"))
        await writer.put_topic(_topic("b"))
        await writer.put_topic(_topic("a", leader=2))
        await writer.delete_topic("b")
        await _wait_for(lambda: "b" in {t for d in follower.deltas for t in d.topics}, "b")
        await _wait_for(lambda: "b" not in follower.store.topics, "b's deletion")
        assert follower.store.topics["a"].partitions[0].leader == 2
        revisions = [d.revision for d in follower.deltas]
        assert revisions == sorted(set(revisions))
        # The follower's position is the writer's last revision: nothing pending, nothing lost.
        assert follower.store.revision == (await client.get_prefix(prefix.encode()))[1]
    finally:
        await follower.stop()


async def test_watch_resumes_after_etcd_restarts(own_etcd: OwnEtcd) -> None:
    client = EtcdClient([own_etcd.url])
    prefix = f"/t/{uuid.uuid4().hex}"
    writer = MetadataStore(client, prefix=prefix)
    await writer.load()
    follower = await Follower(client, prefix).start()
    try:
        await writer.put_topic(_topic("before"))
        await _wait_for(lambda: "before" in follower.store.topics, "the first topic")
        own_etcd.kill()
        own_etcd.start()
        for i in range(5):
            await writer.put_topic(_topic(f"after-{i}"))
        await _wait_for(lambda: "after-4" in follower.store.topics, "topics written after restart")
        assert sorted(follower.store.topics) == [
            "after-0",
            "after-1",
            "after-2",
            "after-3",
            "after-4",
            "before",
        ]
        assert not any(d.full for d in follower.deltas)  # resumed, not reloaded
    finally:
        await follower.stop()
        await client.close()


async def test_compacted_start_revision_reloads_the_view(client: EtcdClient) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    writer = MetadataStore(client, prefix=prefix)
    await writer.load()
    follower = Follower(client, prefix)
    await follower.store.load()
    behind = follower.store.revision
    await writer.put_topic(_topic("x"))
    await writer.put_topic(_topic("y"))
    latest = (await client.get_prefix(prefix.encode()))[1]
    await client.compact(latest)
    with pytest.raises(WatchCompacted):
        async for _ in PrefixWatcher(client, prefix.encode(), start_revision=behind + 1):
            pass
    assert follower.store.revision == behind  # it stopped following here
    deltas: list[bool] = []

    async def record(delta: object) -> None:
        deltas.append(getattr(delta, "full", False))

    follower.store.add_listener(record)
    task = asyncio.create_task(follower.store.follow())
    try:
        await _wait_for(lambda: deltas[:1] == [True], "a full reload")
        assert sorted(follower.store.topics) == ["x", "y"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_watch_that_fails_unexpectedly_is_followed_again_from_a_full_reload(
    client: EtcdClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error the watcher does not expect (here injected once) used to end the follow
    task: the broker then heard of no change again, while its own writes' reloads still moved
    its cache (a new broker answered as leader of a partition it had never taken). Now the
    view is reloaded, listeners hear a full change, and later changes arrive as before."""
    prefix = f"/t/{uuid.uuid4().hex}"
    writer = MetadataStore(client, prefix=prefix)
    await writer.load()
    follower = Follower(client, prefix)
    await follower.store.load()
    real_aiter = PrefixWatcher.__aiter__
    failures = [RuntimeError("injected: a watch error nobody expected")]

    def failing_once(self: PrefixWatcher) -> AsyncIterator[object]:
        if failures:
            raise failures.pop()
        return real_aiter(self)

    monkeypatch.setattr(PrefixWatcher, "__aiter__", failing_once)
    deltas: list[object] = []

    async def record(delta: object) -> None:
        deltas.append(delta)

    follower.store.add_listener(record)
    await writer.put_topic(_topic("before"))
    task = asyncio.create_task(follower.store.follow())
    try:
        await _wait_for(lambda: any(getattr(d, "full", False) for d in deltas), "a full reload")
        assert "before" in follower.store.topics
        await writer.put_topic(_topic("after"))
        await _wait_for(
            lambda: any("after" in getattr(d, "topics", ()) for d in deltas), "the next change"
        )
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
