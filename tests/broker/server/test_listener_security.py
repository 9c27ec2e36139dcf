"""Listeners and their security protocols: a listener is served only as what it says it is.

Until SASL exists (issue #38) a broker must refuse, at start-up and by name, any listener that
promises it: serving ``SASL_SSL://`` without authentication would tell its operators their
data is protected when it is not. PLAINTEXT and SSL are served."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from spindle.broker.server.config import ConfigError, settings_from_properties
from spindle.broker.server.security import ListenerSpec, SecurityProtocol, resolve_listeners
from spindle.broker.server.security.authenticator import authenticator_for
from spindle.broker.server.security.listeners import check_served

from ..conftest import Broker, Etcd, free_port, make_broker
from ..wire import Wire


def _settings(**props: str) -> None:
    settings_from_properties({"node.id": "1", "log.dirs": "/tmp/x", **props})


def test_each_listener_gets_the_protocol_its_name_maps_to() -> None:
    assert resolve_listeners("SSL://:9093,PLAINTEXT://h:9092") == [
        ListenerSpec("SSL", "", 9093, SecurityProtocol.SSL),
        ListenerSpec("PLAINTEXT", "h", 9092, SecurityProtocol.PLAINTEXT),
    ]
    mapped = resolve_listeners("INTERNAL://:9094", "internal:sasl_ssl,EXTERNAL:SSL")
    assert mapped == [ListenerSpec("INTERNAL", "", 9094, SecurityProtocol.SASL_SSL)]


@pytest.mark.parametrize(
    ("listeners", "protocol_map", "protocol"),
    [
        ("SASL_PLAINTEXT://127.0.0.1:9093", None, "SASL_PLAINTEXT"),
        ("SASL_SSL://127.0.0.1:9093", None, "SASL_SSL"),
        ("CLIENTS://127.0.0.1:9093", "CLIENTS:SASL_SSL", "SASL_SSL"),
    ],
)
def test_a_listener_promising_tls_or_sasl_is_refused_naming_its_protocol(
    listeners: str, protocol_map: str | None, protocol: str
) -> None:
    props = {"listeners": listeners}
    if protocol_map:
        props["listener.security.protocol.map"] = protocol_map
    with pytest.raises(ConfigError, match=rf"security protocol {protocol}, which Spindle does not"):
        _settings(**props)


def test_a_listener_name_without_a_protocol_is_refused_as_kafka_does() -> None:
    with pytest.raises(ConfigError, match="no security protocol defined for listener INTERNAL"):
        _settings(listeners="INTERNAL://127.0.0.1:9092")
    with pytest.raises(ConfigError, match="unknown security protocol 'TLS'"):
        _settings(listeners="PLAINTEXT://:9092", **{"listener.security.protocol.map": "A:TLS"})


def test_listeners_with_a_repeated_name_or_port_are_refused() -> None:
    with pytest.raises(ConfigError, match="different name"):
        _settings(listeners="PLAINTEXT://:9092,PLAINTEXT://:9093")
    with pytest.raises(ConfigError, match="different port"):
        _settings(listeners="PLAINTEXT://:9092,SSL://:9092")


def test_the_inter_broker_listener_follows_kafkas_rules() -> None:
    def inter(**props: str) -> str:
        broker, _ = settings_from_properties({"node.id": "1", "log.dirs": "/tmp/x", **props})
        return broker.inter_broker_listener.name

    two = {
        "listeners": "CLIENTS://:9092,PLAINTEXT://:9093,REPLICATION://:9094",
        "listener.security.protocol.map": "CLIENTS:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
        "REPLICATION:PLAINTEXT",
    }
    assert inter(**two) == "PLAINTEXT"  # Kafka's default: security.inter.broker.protocol's
    assert inter(**two, **{"inter.broker.listener.name": "replication"}) == "REPLICATION"
    assert inter(**two, **{"security.inter.broker.protocol": "PLAINTEXT"}) == "PLAINTEXT"
    assert (
        inter(
            listeners="CLIENTS://:9092", **{"listener.security.protocol.map": "CLIENTS:PLAINTEXT"}
        )
        == "CLIENTS"
    )
    with pytest.raises(ConfigError, match=r"only one of inter\.broker\.listener\.name"):
        inter(
            **two,
            **{"inter.broker.listener.name": "CLIENTS", "security.inter.broker.protocol": "SSL"},
        )
    with pytest.raises(ConfigError, match="must be a listener name defined in advertised"):
        inter(**two, **{"inter.broker.listener.name": "OTHER"})
    with pytest.raises(ConfigError, match="found REPLICATION"):
        inter(
            **two,
            **{
                "inter.broker.listener.name": "REPLICATION",
                "advertised.listeners": "CLIENTS://h:9092,PLAINTEXT://h:9093",
            },
        )


def test_advertised_listeners_name_only_configured_listeners() -> None:
    with pytest.raises(ConfigError, match="found EXTERNAL"):
        _settings(listeners="PLAINTEXT://:9092", **{"advertised.listeners": "EXTERNAL://h:9092"})


@pytest.mark.parametrize(
    "key",
    [
        "sasl.enabled.mechanisms",
        "listener.name.internal.sasl.jaas.config",
    ],
)
def test_sasl_keys_are_refused_as_not_supported_yet(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"{key}' configures SASL"):
        _settings(**{key: "x"})


def test_plaintext_connections_act_as_kafkas_anonymous_principal() -> None:
    (spec,) = resolve_listeners("PLAINTEXT://:9092")
    assert authenticator_for(spec).principal == "User:ANONYMOUS"
    ssl_spec = ListenerSpec("SSL", "", 9093, SecurityProtocol.SSL)
    assert authenticator_for(ssl_spec).principal == "User:ANONYMOUS"  # no client certificate
    sasl = ListenerSpec("SASL_SSL", "", 9094, SecurityProtocol.SASL_SSL)
    with pytest.raises(ValueError, match="no authenticator for security protocol SASL_SSL"):
        authenticator_for(sasl)
    with pytest.raises(ValueError, match="SASL_SSL"):
        check_served([sasl])


def test_a_broker_configured_for_sasl_ssl_exits_with_the_reason_and_never_binds(
    tmp_path: Path,
) -> None:
    port = free_port()
    cfg = tmp_path / "sasl.properties"
    cfg.write_text(f"node.id=1\nlog.dirs={tmp_path / 'd'}\nlisteners=SASL_SSL://127.0.0.1:{port}\n")
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "spindle.broker", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert proc.returncode == 2, proc.stderr
    assert "security protocol SASL_SSL, which Spindle does not support yet" in proc.stderr
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))
    assert not (tmp_path / "d").exists()  # refused before touching the log directory


def test_a_custom_listener_name_mapped_to_plaintext_is_served(tmp_path: Path, etcd: Etcd) -> None:
    port = free_port()
    broker: Broker = make_broker(
        tmp_path,
        etcd,
        extra={
            "listeners": f"CLIENTS://127.0.0.1:{port}",
            "listener.security.protocol.map": "CLIENTS:PLAINTEXT",
        },
    )
    broker.port = port
    broker.start()
    try:
        with Wire(port) as wire:
            request = MetadataRequest[12](topics=None, allow_auto_topic_creation=False)
            brokers = wire.call(request, MetadataResponse).brokers
        assert [(b.host, b.port) for b in brokers] == [("127.0.0.1", port)]
    finally:
        broker.stop()
