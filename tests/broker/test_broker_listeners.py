"""Every listener served: one acceptor per entry of ``listeners``, each client told the
addresses of the listener it came in on (Kafka's Metadata, DescribeCluster and
FindCoordinator answer with the connection's listener), followers fetching over
``inter.broker.listener.name``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as CkTP
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.store import MetadataStore

from .cluster import Cluster
from .conftest import Etcd
from .listeners import Extra, add_listeners
from .wire import Wire

EXTRAS = [Extra("CLIENTS", advertised_host="localhost"), Extra("REPLICATION")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("listeners"), etcd, nodes=2, dirs=1)
    try:
        cluster.ports = {  # type: ignore[attr-defined]
            n: add_listeners(b, EXTRAS, {"inter.broker.listener.name": "REPLICATION"})
            for n, b in cluster.brokers.items()
        }
        cluster.start()
        cluster.wait_unfenced()
        yield cluster
    finally:
        cluster.close()


def _brokers(port: int) -> list[tuple[int, str, int]]:
    with Wire(port) as wire:
        answer = wire.call(
            MetadataRequest[12](topics=None, allow_auto_topic_creation=False), MetadataResponse
        )
    return sorted((b.node_id, b.host, b.port) for b in answer.brokers)


def test_metadata_names_the_brokers_on_the_listener_the_client_came_in_on(cluster: Cluster) -> None:
    ports: dict[int, dict[str, int]] = cluster.ports  # type: ignore[attr-defined]
    plain = [(n, "127.0.0.1", b.port) for n, b in sorted(cluster.brokers.items())]
    clients = [(n, "localhost", ports[n]["CLIENTS"]) for n in sorted(ports)]
    replication = [(n, "127.0.0.1", ports[n]["REPLICATION"]) for n in sorted(ports)]
    for n, broker in cluster.brokers.items():
        assert _brokers(broker.port) == plain
        assert _brokers(ports[n]["CLIENTS"]) == clients
        assert _brokers(ports[n]["REPLICATION"]) == replication
    admin = KafkaAdminClient(bootstrap_servers=f"localhost:{ports[1]['CLIENTS']}")
    try:
        described = admin.describe_cluster()["brokers"]
    finally:
        admin.close()
    assert sorted((b["broker_id"], b["host"], b["port"]) for b in described) == clients


def test_the_registration_carries_every_listener_and_the_inter_broker_one_as_its_address(
    cluster: Cluster,
) -> None:
    ports: dict[int, dict[str, int]] = cluster.ports  # type: ignore[attr-defined]

    async def read() -> dict[int, tuple[str, int, dict[str, str]]]:
        client = EtcdClient([cluster.etcd_url])
        try:
            store = MetadataStore(client, prefix=cluster.prefix)
            await store.load()
            return {n: (r.host, r.port, r.listeners) for n, r in store.brokers.items()}
        finally:
            await client.close()

    for n, (host, port, listeners) in asyncio.run(read()).items():
        assert (host, port) == ("127.0.0.1", ports[n]["REPLICATION"])
        assert listeners == {
            "PLAINTEXT": f"127.0.0.1:{cluster.brokers[n].port}",
            "CLIENTS": f"localhost:{ports[n]['CLIENTS']}",
            "REPLICATION": f"127.0.0.1:{ports[n]['REPLICATION']}",
        }


def test_clients_on_two_listeners_share_one_replicated_topic(cluster: Cluster) -> None:
    """kafka-python produces acks=all on CLIENTS (advertised as localhost), librdkafka consumes
    on PLAINTEXT; RF 2 with min.insync.replicas 2: every write was fetched by the follower
    over the REPLICATION listener."""
    ports: dict[int, dict[str, int]] = cluster.ports  # type: ignore[attr-defined]
    topic = f"two-listeners-{uuid.uuid4().hex[:6]}"
    clients = ",".join(f"localhost:{ports[n]['CLIENTS']}" for n in sorted(ports))
    admin = KafkaAdminClient(bootstrap_servers=clients)
    try:
        admin.create_topics(
            [NewTopic(topic, 2, replication_factor=2, topic_configs={"min.insync.replicas": "2"})]
        )
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=clients, acks="all", retries=20)
    sent = [f"v{i}".encode() for i in range(300)]
    for i, value in enumerate(sent):
        producer.send(topic, value, partition=i % 2)
    producer.flush(60)
    producer.close()
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap(),
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([CkTP(topic, 0, 0), CkTP(topic, 1, 0)])
    got: list[bytes] = []
    try:
        while len(got) < len(sent):
            msg = consumer.poll(15)
            assert msg is not None, f"consumer timed out after {len(got)} records"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF
                continue
            got.append(msg.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent)
    view = cluster.view()
    assert view.isr(topic, 0) == view.topics[topic].partitions[0].replicas
    assert sorted(view.isr(topic, 1)) == [1, 2]
