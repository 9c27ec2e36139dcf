"""Requests that write metadata (AlterPartitionReassignments here) across a controller change:
a broker whose controller term ends while it writes a request's change -- its write refused by
etcd only for the term's fence -- writes it again once it has stepped down, as every broker
writes requests (Kafka forwards them to the new controller); the client does not see
NOT_CONTROLLER. Seen in reassign_partitions on two busy cores: ``--execute`` failed one
partition with "this controller's term ... is over". Real etcd; the step-down is the
election's (fence cleared a moment after ``on_fenced``)."""

from __future__ import annotations

import asyncio
import uuid

from spindle.broker.common.ids import TopicPartition
from spindle.broker.common.kafka_uuid import UNASSIGNED_DIR
from spindle.broker.controller.cluster import ClusterController
from spindle.broker.controller.etcd import CompareCreate, EtcdClient
from spindle.broker.controller.model import (
    BrokerRegistration,
    PartitionState,
    TopicState,
    new_topic_id,
)
from spindle.broker.controller.store import MetadataStore

from ..conftest import Etcd


async def test_a_request_refused_only_by_an_ended_term_is_written_after_step_down(
    etcd: Etcd,
) -> None:
    prefix = f"/test/{uuid.uuid4().hex}"
    client = EtcdClient([etcd.url])
    try:
        store = MetadataStore(client, prefix=prefix)
        await store.load()
        for node in (1, 2):
            await store.register_broker(BrokerRegistration(node, "127.0.0.1", 9, None, []))
        part = PartitionState(0, [1], [UNASSIGNED_DIR], leader=1, isr=[1])
        await store.put_topic(TopicState("t", new_topic_id(), {0: part}))
        controller = ClusterController(store, client, node_id=1, prefix=prefix, lease_ttl_s=2)
        # This broker's term is over: etcd holds no controller key created at that revision.
        store.fence = CompareCreate(f"{prefix}/controller".encode(), 424242)
        fenced: list[bool] = []

        def step_down() -> None:
            fenced.append(True)
            asyncio.get_running_loop().call_later(0.05, setattr, store, "fence", None)

        store.on_fenced = step_down
        await controller.alter_reassignment(TopicPartition("t", 0), [1, 2])
        assert fenced == [True]
        await store.load()
        written = store.topics["t"].partitions[0]
        assert written.adding == [2]
        assert written.replicas == [1, 2]
    finally:
        await client.close()
