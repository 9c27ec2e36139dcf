"""Spindle and Apache Kafka side by side: where an answer must match Kafka's, the same question
goes to a real Kafka broker (KRaft, from the cached Maven Central jars) and to a real Spindle
broker in the same test, and both answers are compared with each other and with the expected
value. One Kafka broker per session: its JVM costs ~10 s and ~1 GB."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from apache_kafka import kafka_home, kafka_java, start_kafka

from ..broker.conftest import Broker, make_broker
from ..broker.conftest import etcd as etcd


class Kafka:
    """A running Apache Kafka broker: ``bootstrap`` is its PLAINTEXT address."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    work = tmp_path_factory.mktemp("apache-kafka")
    proc, port = start_kafka(work, 1, java=kafka_java(kafka_home(), "-Xms256m", "-Xmx512m"))
    try:
        yield Kafka(port)
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except Exception:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def spindle(tmp_path_factory: pytest.TempPathFactory, etcd: object) -> Iterator[Broker]:
    """One Spindle broker (two log directories) shared by a module's tests."""
    broker = make_broker(Path(tmp_path_factory.mktemp("spindle")), etcd, dirs=2)  # type: ignore[arg-type]
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
