"""The broker's server.properties: log.dirs are its volumes, and the broker accepts it."""

from __future__ import annotations

import pytest
from spindle.operator import specs
from spindle.operator.specs import BrokerSpec

from .bodies import broker_body


def test_log_dirs_lists_exactly_the_mounted_volumes(broker: BrokerSpec) -> None:
    properties = specs.server_properties(broker)
    lines = dict(line.split("=", 1) for line in properties.splitlines())
    assert lines["log.dirs"] == "/var/lib/spindle/data-0,/var/lib/spindle/data-1"
    assert lines["node.id"] == "7"
    assert lines["broker.rack"] == "rack-a"
    assert lines["num.replica.alter.log.dirs.threads"] == "2"
    assert lines["advertised.listeners"] == "PLAINTEXT://b7.ns.svc:9092"
    cm = specs.build_configmap(broker)
    assert cm["data"][specs.CONFIG_FILE] == properties


def test_configmap_is_a_config_the_broker_accepts(broker: BrokerSpec) -> None:
    """Contract with spindle-broker: the operator's server.properties passes the broker's own
    validation (which refuses unknown keys) and yields the same node id, rack and log dirs."""
    from spindle.broker.server.config import parse_properties, settings_from_properties

    text = specs.build_configmap(broker)["data"][specs.CONFIG_FILE]
    broker_settings, storage_settings = settings_from_properties(parse_properties(text))
    assert broker_settings.node_id == 7
    assert broker_settings.broker_rack == "rack-a"
    assert storage_settings.log_dirs == specs.log_dirs(broker)
    assert storage_settings.num_replica_alter_log_dirs_threads == 2
    assert [(lst.host, lst.port) for lst in broker_settings.advertised_listener_list] == [
        ("b7.ns.svc", 9092)
    ]


def test_the_operators_etcd_endpoints_reach_brokers_that_name_none() -> None:
    """``spindle-operator run --etcd-endpoints`` (the chart's etcd members, or
    ``etcd.endpoints``) is the default of ``spindle.etcd.endpoints``; a Broker naming its own
    keeps it."""
    from spindle.operator.__main__ import _config_defaults, _parser

    parser = _parser()
    defaults = _config_defaults(parser, "http://e-0.p:2379, http://e-1.p:2379")
    assert defaults == {"spindle.etcd.endpoints": "http://e-0.p:2379,http://e-1.p:2379"}
    plain = BrokerSpec.from_body(broker_body(), config_defaults=defaults)
    lines = dict(line.split("=", 1) for line in specs.server_properties(plain).splitlines())
    assert lines["spindle.etcd.endpoints"] == "http://e-0.p:2379,http://e-1.p:2379"
    own = {"num.replica.alter.log.dirs.threads": "2", "spindle.etcd.endpoints": "http://mine:2379"}
    named = BrokerSpec.from_body(broker_body(config=own), config_defaults=defaults)
    assert named.config["spindle.etcd.endpoints"] == "http://mine:2379"
    assert "spindle.etcd.endpoints" not in BrokerSpec.from_body(broker_body()).config


def test_etcd_endpoints_that_are_not_urls_are_refused_at_start(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from spindle.operator.__main__ import _config_defaults, _parser

    for bad in ("etcd-0:2379", " , "):
        with pytest.raises(SystemExit):
            _config_defaults(_parser(), bad)
        assert "--etcd-endpoints expects etcd client URLs" in capsys.readouterr().err
