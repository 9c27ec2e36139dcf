"""Controller election and fencing on a real etcd: one winner, takeover after the holder dies,
and a deposed controller's writes refused by etcd itself."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from spindle.broker.common.errors import ErrorCode
from spindle.broker.controller.election import ControllerElection, ControllerTerm
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.model import TopicState
from spindle.broker.controller.store import ControllerFenced, MetadataStore

from ..conftest import Etcd

TTL_S = 2  # etcd's minimum lease TTL on a default-configured server


@pytest.fixture
async def client(etcd: Etcd) -> AsyncIterator[EtcdClient]:
    c = EtcdClient([etcd.url])
    yield c
    await c.close()


async def _wait_for(predicate: object, what: str, timeout_s: float = 20.0) -> None:
    """Poll until ``predicate()`` (sync or async) is true; fail naming ``what`` otherwise."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = predicate()  # type: ignore[operator]
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


class Candidate:
    """One node campaigning in a task, recording the terms it held."""

    def __init__(self, client: EtcdClient, prefix: str, node_id: int) -> None:
        self.terms: list[ControllerTerm] = []
        self.resigned: list[ControllerTerm] = []
        self.election = ControllerElection(
            client,
            prefix=prefix,
            node_id=node_id,
            lease_ttl_s=TTL_S,
            on_elected=self._elected,
            on_resigned=self._resigned,
        )
        self.task = asyncio.create_task(self.election.run())

    async def _elected(self, term: ControllerTerm) -> None:
        self.terms.append(term)

    async def _resigned(self, term: ControllerTerm) -> None:
        self.resigned.append(term)

    @property
    def active(self) -> bool:
        return self.election.term is not None

    async def crash(self) -> None:
        """Stop renewing without revoking: the lease must expire in etcd (a SIGKILL)."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def test_exactly_one_of_three_candidates_is_elected(client: EtcdClient) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    nodes = [Candidate(client, prefix, n) for n in (1, 2, 3)]
    try:
        await _wait_for(lambda: any(c.active for c in nodes), "an election")
        current = await nodes[0].election.current()
        winners = [c for c in nodes if c.active]
        assert len(winners) == 1
        assert current == (winners[0].election.node_id, 1)
        assert winners[0].terms[0].epoch == 1
    finally:
        for c in nodes:
            await c.crash()


async def test_killed_controller_is_replaced_with_a_higher_epoch(client: EtcdClient) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    nodes = [Candidate(client, prefix, n) for n in (1, 2, 3)]
    try:
        await _wait_for(lambda: any(c.active for c in nodes), "the first election")
        first = next(c for c in nodes if c.active)
        old_term = first.terms[-1]
        await first.crash()
        rest = [c for c in nodes if c is not first]
        await _wait_for(lambda: any(c.active for c in rest), "a successor after the lease expired")
        successor = next(c for c in rest if c.active)
        assert successor.terms[-1].epoch == old_term.epoch + 1
        assert await successor.election.current() == (
            successor.election.node_id,
            old_term.epoch + 1,
        )
        assert sum(c.active for c in rest) == 1
    finally:
        for c in nodes:
            await c.crash()


async def test_resigning_frees_the_seat_at_once(client: EtcdClient) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    only = Candidate(client, prefix, 7)
    try:
        await _wait_for(lambda: only.active, "the election")
        only.task.cancel()  # stop campaigning again, then give the seat up as on SIGTERM
        await only.election.resign()
        await asyncio.gather(only.task, return_exceptions=True)
        # The lease was revoked, not left to expire: the key is gone right away.
        assert await only.election.current() is None
    finally:
        await only.crash()


async def test_deposed_controller_cannot_write_and_steps_down(client: EtcdClient) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    a = Candidate(client, prefix, 1)
    await _wait_for(lambda: a.active, "node 1's election")
    store_a = MetadataStore(client, prefix=prefix)
    await store_a.load()
    term_a = a.terms[-1]
    store_a.fence = term_a.fence()
    fenced: list[bool] = []
    store_a.on_fenced = lambda: fenced.append(True)
    await store_a.put_topic(TopicState("before", "id-before", {}))
    # Node 1 stalls (no keepalives, e.g. a long GC pause); node 2 takes over.
    await a.crash()
    b = Candidate(client, prefix, 2)
    try:
        await _wait_for(lambda: b.active, "node 2's election")
        store_b = MetadataStore(client, prefix=prefix)
        await store_b.load()
        store_b.fence = b.terms[-1].fence()
        await store_b.put_topic(TopicState("after", "id-after", {}))
        # Node 1 wakes up believing it is still the controller: etcd refuses its write.
        with pytest.raises(ControllerFenced) as info:
            await store_a.put_topic(TopicState("stale", "id-stale", {}))
        assert info.value.code == ErrorCode.NOT_CONTROLLER
        assert fenced == [True]
        check = MetadataStore(client, prefix=prefix)
        await check.load()
        assert sorted(check.topics) == ["after", "before"]
        assert b.terms[-1].epoch == term_a.epoch + 1
    finally:
        await b.crash()


async def test_fenced_write_makes_the_holder_step_down(client: EtcdClient) -> None:
    """A holder whose write was refused gives the seat up without waiting for its lease."""
    prefix = f"/t/{uuid.uuid4().hex}"
    a = Candidate(client, prefix, 1)
    try:
        await _wait_for(lambda: a.active, "the election")
        a.election.step_down()
        await _wait_for(lambda: len(a.resigned) == 1, "the step-down")
        assert a.resigned[0] == a.terms[0]
    finally:
        await a.crash()
