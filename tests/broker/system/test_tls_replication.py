"""Replication over an SSL inter-broker listener: three brokers whose followers fetch, and
whose controller probes sessions, over mutually authenticated TLS with hostname verification
(Kafka's default ``ssl.endpoint.identification.algorithm=https``), while clients use PLAINTEXT.
A topic with RF 3 and ``min.insync.replicas=3`` takes acks=all writes only if every follower
fetched them over TLS."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.store import MetadataStore

from ...certs import make_ca
from ..cluster import Cluster
from ..conftest import Etcd
from ..listeners import Extra, add_listeners

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("tls-replication")
    ca = make_ca(base / "ca")
    cluster = Cluster(base, etcd, nodes=3, dirs=1)
    try:
        ports = {}
        for n, broker in cluster.brokers.items():
            cert = ca.issue(f"broker-{n}", sans=["localhost", "127.0.0.1"])
            ports[n] = add_listeners(
                broker,
                [Extra("REPLICATION", "SSL", "localhost")],
                {
                    "inter.broker.listener.name": "REPLICATION",
                    "listener.name.replication.ssl.keystore.type": "PKCS12",
                    "listener.name.replication.ssl.keystore.location": str(cert.pkcs12("pw")),
                    "listener.name.replication.ssl.keystore.password": "pw",
                    "listener.name.replication.ssl.truststore.location": str(ca.cert_file),
                    "listener.name.replication.ssl.client.auth": "required",
                    "listener.name.replication.ssl.enabled.protocols": "TLSv1.3",
                },
            )
        cluster.ports = ports  # type: ignore[attr-defined]
        cluster.start()
        cluster.wait_unfenced()
        yield cluster
    finally:
        cluster.close()


def test_followers_fetch_over_the_tls_inter_broker_listener(cluster: Cluster) -> None:
    ports: dict[int, dict[str, int]] = cluster.ports  # type: ignore[attr-defined]

    async def registered() -> dict[int, tuple[str, int]]:
        client = EtcdClient([cluster.etcd_url])
        try:
            store = MetadataStore(client, prefix=cluster.prefix)
            await store.load()
            return {n: (r.host, r.port) for n, r in store.brokers.items()}
        finally:
            await client.close()

    # Followers and the controller's probes dial the registered address: the TLS listener's.
    assert asyncio.run(registered()) == {
        n: ("localhost", ports[n]["REPLICATION"]) for n in sorted(ports)
    }
    topic = f"tls-rf3-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    try:
        admin.create_topics(
            [NewTopic(topic, 3, replication_factor=3, topic_configs={"min.insync.replicas": "3"})]
        )
    finally:
        admin.close()
    cluster.wait(
        "every replica in sync",
        lambda v: topic in v.topics and all(len(v.isr(topic, p)) == 3 for p in range(3)),
    )
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all", retries=20)
    sent = [f"r{i}".encode() for i in range(600)]
    for i, value in enumerate(sent):
        producer.send(topic, value, partition=i % 3)
    producer.flush(60)
    producer.close()
    # Past a session timeout (3 s): the controller's TLS probes kept every session alive.
    time.sleep(4)
    view = cluster.view()
    assert view.unfenced == {1, 2, 3}
    assert all(sorted(view.isr(topic, p)) == [1, 2, 3] for p in range(3))
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap(), enable_auto_commit=False, consumer_timeout_ms=10_000
    )
    consumer.assign([TopicPartition(topic, p) for p in range(3)])
    consumer.seek_to_beginning()
    got = sorted(m.value for m in consumer)
    consumer.close()
    assert got == sorted(sent)
    for broker in cluster.brokers.values():
        assert "Traceback" not in broker.log_text()
