"""SSL listeners served to real clients: kafka-python (TLS 1.2 and 1.3), librdkafka with a
client certificate on an mTLS listener, Apache Kafka's console producer and consumer with ssl
properties, a client checking hostnames refusing a certificate without the broker's name, and
keystores rotated (file change, dynamic config) under open connections."""

from __future__ import annotations

import os
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient
from cryptography import x509
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from ..certs import CA, Issued, make_ca
from .conftest import Broker, Etcd, make_broker
from .listeners import Extra, add_listeners
from .test_broker_kafka_cli import _run as kafka_tool

EXTRAS = [
    Extra("SSL", "SSL", "localhost"),
    Extra("MTLS", "SSL", "localhost"),
    Extra("WRONG", "SSL"),
]


def escaped(pem: str) -> str:
    """A PEM value on one ``.properties`` line (``\\n`` escapes, as Kafka's docs write it)."""
    return pem.replace("\n", "\\n")


@dataclass
class TlsBroker:
    broker: Broker
    ports: dict[str, int]
    ca: CA
    cert: Issued
    client: Issued
    keystore: Path


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[TlsBroker]:
    base = tmp_path_factory.mktemp("tls")
    ca = make_ca(base / "ca")
    cert = ca.issue(
        "broker-1", subject={"CN": "broker-1", "O": "Spindle"}, sans=["localhost", "127.0.0.1"]
    )
    wrong = ca.issue("elsewhere", sans=["elsewhere.example"])
    client = ca.issue("app", subject={"CN": "app", "OU": "clients", "O": "Spindle"}, client=True)
    keystore = cert.pem_keystore()
    broker = make_broker(base / "broker", etcd, dirs=1)
    ports = add_listeners(
        broker,
        EXTRAS,
        {
            # SSL: PEM files, a client certificate optional, both protocol versions.
            "listener.name.ssl.ssl.keystore.type": "PEM",
            "listener.name.ssl.ssl.keystore.location": str(keystore),
            "listener.name.ssl.ssl.truststore.type": "PEM",
            "listener.name.ssl.ssl.truststore.location": str(ca.cert_file),
            "listener.name.ssl.ssl.client.auth": "requested",
            # MTLS: PKCS12 stores, a client certificate required.
            "listener.name.mtls.ssl.keystore.type": "PKCS12",
            "listener.name.mtls.ssl.keystore.location": str(cert.pkcs12("keystore-pw")),
            "listener.name.mtls.ssl.keystore.password": "keystore-pw",
            "listener.name.mtls.ssl.key.password": "keystore-pw",
            "listener.name.mtls.ssl.truststore.type": "PKCS12",
            "listener.name.mtls.ssl.truststore.location": str(ca.truststore_pkcs12("trust-pw")),
            "listener.name.mtls.ssl.truststore.password": "trust-pw",
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=clients,.*$/$1/",
            # WRONG: inline PEM (KIP-651) of a certificate naming another host.
            "listener.name.wrong.ssl.keystore.type": "PEM",
            "listener.name.wrong.ssl.keystore.certificate.chain": escaped(wrong.cert_pem),
            "listener.name.wrong.ssl.keystore.key": escaped(wrong.key_pem),
            "spindle.ssl.keystore.reload.interval.ms": "200",
        },
    )
    broker.start()
    try:
        yield TlsBroker(broker, ports, ca, cert, client, keystore)
    finally:
        broker.stop()


def _topic() -> str:
    return f"tls-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_kafka_python_round_trips_over_each_tls_version(
    tls_broker: TlsBroker, version: ssl.TLSVersion
) -> None:
    context = ssl.create_default_context(cafile=str(tls_broker.ca.cert_file))
    context.minimum_version = context.maximum_version = version
    bootstrap = f"localhost:{tls_broker.ports['SSL']}"
    common = {"bootstrap_servers": bootstrap, "security_protocol": "SSL", "ssl_context": context}
    topic = _topic()
    producer = KafkaProducer(acks="all", **common)
    for i in range(100):
        producer.send(topic, f"{version.name}-{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(enable_auto_commit=False, consumer_timeout_ms=10_000, **common)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [m.value.decode() for m in consumer]
    consumer.close()
    assert got == [f"{version.name}-{i}" for i in range(100)]
    with (
        socket.create_connection(("127.0.0.1", tls_broker.ports["SSL"])) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        assert (
            tls.version()
            == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
        )


def _ck(tls_broker: TlsBroker, listener: str, **extra: str) -> dict[str, str]:
    return {
        "bootstrap.servers": f"localhost:{tls_broker.ports[listener]}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(tls_broker.ca.cert_file),
        "socket.timeout.ms": "5000",
        **extra,
    }


def _list_topics(config: dict[str, str]) -> list[int]:
    """The broker ids Metadata names, through librdkafka; raises KafkaException on failure."""
    admin = AdminClient(config)
    return sorted(admin.list_topics(timeout=8).brokers)


def test_librdkafka_presents_a_client_certificate_on_the_mtls_listener(
    tls_broker: TlsBroker,
) -> None:
    client = tls_broker.client
    with_cert = _ck(
        tls_broker,
        "MTLS",
        **{
            "ssl.certificate.location": str(client.cert_file),
            "ssl.key.location": str(client.key_file),
        },
    )
    topic = _topic()
    producer = Producer({**with_cert, "acks": "all", "enable.idempotence": True})
    errors: list[object] = []
    for i in range(200):
        producer.produce(
            topic, f"m{i}".encode(), on_delivery=lambda err, _m: err and errors.append(err)
        )
    assert producer.flush(30) == 0
    assert not errors
    with pytest.raises(KafkaException):  # required client auth: no certificate, no metadata
        _list_topics(_ck(tls_broker, "MTLS"))
    # The listener's mapping rules name clients by OU=clients only (no DEFAULT): a trusted
    # certificate that no rule maps fails authentication, as Kafka's NoMatchingRule does.
    other = tls_broker.ca.issue("other", subject={"CN": "other", "O": "Spindle"}, client=True)
    unmapped = _ck(
        tls_broker,
        "MTLS",
        **{
            "ssl.certificate.location": str(other.cert_file),
            "ssl.key.location": str(other.key_file),
        },
    )
    with pytest.raises(KafkaException):
        _list_topics(unmapped)
    assert "No rules apply to CN=other,O=Spindle" in tls_broker.broker.log_text()


def test_a_client_checking_hostnames_refuses_a_certificate_without_the_brokers_name(
    tls_broker: TlsBroker,
) -> None:
    check = _ck(tls_broker, "WRONG", **{"ssl.endpoint.identification.algorithm": "https"})
    check["bootstrap.servers"] = f"127.0.0.1:{tls_broker.ports['WRONG']}"
    with pytest.raises(KafkaException):
        _list_topics(check)
    assert _list_topics({**check, "ssl.endpoint.identification.algorithm": "none"}) == [1]
    # The same client is satisfied by the SSL listener's certificate, which names localhost.
    assert _list_topics(
        _ck(tls_broker, "SSL", **{"ssl.endpoint.identification.algorithm": "https"})
    ) == [1]


def test_kafkas_console_producer_and_consumer_over_ssl_with_a_client_certificate(
    tls_broker: TlsBroker, tmp_path: Path
) -> None:
    client = tls_broker.client
    config = tmp_path / "client-ssl.properties"
    config.write_text(
        "security.protocol=SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={tls_broker.ca.cert_file}\n"
        "ssl.keystore.type=PKCS12\n"
        f"ssl.keystore.location={client.pkcs12('client-pw')}\n"
        "ssl.keystore.password=client-pw\n"
        "ssl.key.password=client-pw\n"
    )
    topic = _topic()
    bootstrap = f"localhost:{tls_broker.ports['MTLS']}"
    lines = [f"java line {i}" for i in range(20)]
    kafka_tool(
        "kafka-console-producer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--producer.config",
        str(config),
        stdin="\n".join(lines) + "\n",
    )
    out = kafka_tool(
        "kafka-console-consumer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--consumer.config",
        str(config),
        "--from-beginning",
        "--max-messages",
        str(len(lines)),
        "--timeout-ms",
        "30000",
    )
    assert out.splitlines() == lines


def _served_serial(port: int, ca: CA) -> int:
    context = ssl.create_default_context(cafile=str(ca.cert_file))
    with (
        socket.create_connection(("127.0.0.1", port)) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None

    return x509.load_der_x509_certificate(der).serial_number


def test_a_rotated_keystore_file_serves_new_connections_while_open_ones_keep_producing(
    tls_broker: TlsBroker,
) -> None:
    port = tls_broker.ports["SSL"]
    before = _served_serial(port, tls_broker.ca)
    context = ssl.create_default_context(cafile=str(tls_broker.ca.cert_file))
    topic = _topic()
    producer = KafkaProducer(
        bootstrap_servers=f"localhost:{port}",
        security_protocol="SSL",
        ssl_context=context,
        acks="all",
    )
    producer.send(topic, b"before").get(30)
    renewed = tls_broker.ca.issue(
        "broker-1", subject={"CN": "broker-1", "O": "Spindle"}, sans=["localhost", "127.0.0.1"]
    )
    staged = tls_broker.keystore.with_suffix(".new")
    staged.write_text(renewed.key_pem + renewed.cert_pem)
    os.replace(staged, tls_broker.keystore)  # as a Secret's mounted files change: atomically
    deadline = time.monotonic() + 15
    while _served_serial(port, tls_broker.ca) != renewed.cert.serial_number:
        assert time.monotonic() < deadline, "the renewed certificate was never served"
        time.sleep(0.1)
    assert before == tls_broker.cert.cert.serial_number
    producer.send(topic, b"after").get(30)  # on the connection opened before the rotation
    producer.close()
    assert "TLS stores reloaded" in tls_broker.broker.log_text()


def test_a_dynamic_keystore_update_serves_the_new_certificate(tls_broker: TlsBroker) -> None:
    port = tls_broker.ports["MTLS"]
    renewed = tls_broker.ca.issue(
        "broker-1", subject={"CN": "broker-1", "O": "Spindle"}, sans=["localhost", "127.0.0.1"]
    )
    location = renewed.pkcs12("rotated-pw")
    kafka_tool(  # Kafka allows listener.name.X.ssl.keystore.* per broker, at run time
        "kafka-configs",
        "--bootstrap-server",
        tls_broker.broker.bootstrap,
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--alter",
        "--add-config",
        f"listener.name.mtls.ssl.keystore.location={location},"
        "listener.name.mtls.ssl.keystore.password=rotated-pw,"
        "listener.name.mtls.ssl.key.password=rotated-pw",
    )
    described = kafka_tool(
        "kafka-configs",
        "--bootstrap-server",
        tls_broker.broker.bootstrap,
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--describe",
    )
    assert "listener.name.mtls.ssl.keystore.password=null sensitive=true" in described
    assert "rotated-pw" not in described  # passwords are never answered, as in Kafka
    client = tls_broker.client
    context = ssl.create_default_context(cafile=str(tls_broker.ca.cert_file))
    context.load_cert_chain(client.cert_file, client.key_file)
    deadline = time.monotonic() + 15
    while True:
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            context.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            der = tls.getpeercert(binary_form=True)

        assert der is not None
        if x509.load_der_x509_certificate(der).serial_number == renewed.cert.serial_number:
            break
        assert time.monotonic() < deadline, "the dynamically set keystore was never served"
        time.sleep(0.1)
