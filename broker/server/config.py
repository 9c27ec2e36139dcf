"""The broker's configuration: a Kafka ``.properties`` file, validated with pydantic at start-up.

Keys are Kafka's where Kafka has one. The file is split between the broker's own settings
(:class:`BrokerSettings`) and the storage engine's (``StorageSettings``); a key that neither knows
is refused with its name, because a misspelt setting that is silently ignored is worse than a
broker that does not start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from spindle.broker.common.properties import parse_properties
from spindle.broker.common.registration import DEFAULT_PREFIX
from spindle.broker.group.settings import GroupSettings
from spindle.broker.storage.settings import StorageSettings

from .security.listeners import (
    TLS_PROTOCOLS,
    Listener,
    ListenerSpec,
    check_advertised,
    check_served,
    inter_broker_listener,
    parse_listeners,
    resolve_listeners,
)
from .security.settings import AuthorizerConfig
from .security.tls import TlsSettings, check_keys, tls_settings


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the key and the reason."""


class _KeyedError(ValueError):
    """A model validator's error about one key (its location is the model, not the key)."""

    def __init__(self, key: str, cause: ValueError) -> None:
        super().__init__(str(cause))
        self.key = key


class BrokerSettings(GroupSettings, AuthorizerConfig):
    """The broker's settings other than storage (Kafka's names and defaults unless noted);
    the group coordinator's settings are inherited from ``GroupSettings``, the authorizer's
    from ``security.settings.AuthorizerConfig``."""

    node_id: int = Field(ge=0, description="This broker's id.")
    listeners: str = Field(
        "PLAINTEXT://127.0.0.1:9092",
        description="Where to accept connections; port 0 picks a free port.",
    )
    advertised_listeners: str | None = Field(
        None,
        description="What clients are told to connect to; default = listeners.",
    )
    listener_security_protocol_map: str | None = Field(
        None,
        description="LISTENER_NAME:SECURITY_PROTOCOL pairs; default: each protocol's name maps "
        "to itself (Kafka's). Protocols not served yet are refused.",
    )
    inter_broker_listener_name: str | None = Field(
        None,
        description="The listener other brokers connect to (followers, the controller's "
        "probes); default: the one security.inter.broker.protocol names, else PLAINTEXT, "
        "else the first listener.",
    )
    security_inter_broker_protocol: str | None = Field(
        None,
        description="The security protocol between brokers, as a listener of that name; "
        "not together with inter.broker.listener.name.",
    )
    ssl_configs: dict[str, str] = Field(
        default_factory=dict,
        description="Kafka's ssl.* keys and listener.name.<name>.ssl.* keys as given in the "
        "file (read per listener by security.tls); not a key itself.",
    )
    connections_max_idle_ms: int = Field(
        600_000,
        ge=1,
        description="A connection that sends nothing for this long is closed (Kafka's).",
    )
    ssl_handshake_timeout_ms: int = Field(
        10_000,
        alias="spindle.ssl.handshake.timeout.ms",
        ge=1,
        description="A TLS handshake not finished by then is abandoned and its connection "
        "closed (Spindle-specific: Kafka bounds it by connections.max.idle.ms only).",
    )
    ssl_keystore_reload_interval_ms: int = Field(
        30_000,
        alias="spindle.ssl.keystore.reload.interval.ms",
        ge=10,
        description="How often TLS listeners' store files are checked for a change; a changed "
        "store is loaded for new connections (Spindle-specific).",
    )
    broker_rack: str | None = Field(None, description="Rack of this broker.")
    socket_request_max_bytes: int = Field(
        104_857_600,
        ge=64,
        description="Largest request frame accepted; a larger one closes the connection.",
    )
    socket_send_buffer_bytes: int = Field(
        102_400,
        ge=-1,
        description="SO_SNDBUF of client connections (Kafka's default); -1 = the OS default.",
    )
    num_partitions: int = Field(1, ge=1, description="Partitions of auto-created topics.")
    default_replication_factor: int = Field(1, ge=1, description="RF of auto-created topics.")
    auto_create_topics_enable: bool = Field(
        True,
        description="Create a topic when Metadata asks for an unknown one and allows it.",
    )
    etcd_endpoints: str = Field(
        "http://127.0.0.1:2379",
        alias="spindle.etcd.endpoints",
        description="etcd client URL(s) holding cluster metadata (Spindle-specific).",
    )
    etcd_prefix: str = Field(
        DEFAULT_PREFIX,
        alias="spindle.etcd.prefix",
        description="Key prefix of this cluster's metadata in etcd (Spindle-specific).",
    )
    controller_mode: Literal["single", "elected"] = Field(
        "single",
        alias="spindle.controller.mode",
        description=(
            "single: this broker is a one-broker cluster and its own controller; elected: a "
            "multi-broker cluster whose controller is elected through etcd (Spindle-specific)."
        ),
    )
    controller_lease_ms: int = Field(
        3000,
        alias="spindle.controller.lease.ms",
        ge=2000,
        description="TTL of the controller's etcd lease: how long a dead controller stays "
        "in office (etcd's minimum is about 2 s; Spindle-specific).",
    )
    broker_session_timeout_ms: int = Field(
        9000,
        alias="broker.session.timeout.ms",
        ge=2000,
        description="A broker that has not heartbeated for this long is declared lost.",
    )
    broker_heartbeat_interval_ms: int = Field(
        2000,
        alias="broker.heartbeat.interval.ms",
        ge=100,
        description="How often a broker renews its session.",
    )
    replica_lag_time_max_ms: int = Field(
        30_000,
        alias="replica.lag.time.max.ms",
        ge=1,
        description="An in-sync follower not caught up for this long leaves the ISR.",
    )
    min_insync_replicas: int = Field(
        1,
        alias="min.insync.replicas",
        ge=1,
        description="acks=all needs at least this many in-sync replicas (a topic's own "
        "min.insync.replicas wins; read by the replica manager from the static configs).",
    )
    log_dir_failure_timeout_ms: int = Field(
        30_000,
        alias="log.dir.failure.timeout.ms",
        ge=1,
        description="A broker that cannot tell the controller about a failed log directory "
        "it leads partitions in for this long shuts down (KIP-858).",
    )
    auto_leader_rebalance_enable: bool = Field(
        True,
        alias="auto.leader.rebalance.enable",
        description="The controller moves leadership back to preferred replicas when a "
        "broker's imbalance exceeds leader.imbalance.per.broker.percentage.",
    )
    leader_imbalance_per_broker_percentage: int = Field(
        10,
        alias="leader.imbalance.per.broker.percentage",
        ge=0,
        le=100,
        description="Share of a broker's preferred partitions it may not lead before a rebalance.",
    )
    leader_imbalance_check_interval_seconds: int = Field(
        300,
        alias="leader.imbalance.check.interval.seconds",
        ge=1,
        description="How often the controller checks the leader imbalance.",
    )
    cluster_id: str | None = Field(
        None,
        description="Expected cluster id; the first broker of a new cluster creates one if unset.",
    )
    metrics_listener: str | None = Field(
        None,
        alias="spindle.metrics.listener",
        description="host:port for /metrics and /health over HTTP; unset = no metrics server.",
    )
    shutdown_timeout_ms: int = Field(
        30_000,
        alias="controlled.shutdown.timeout.ms",
        ge=0,
        description="How long SIGTERM waits for in-flight requests before closing connections.",
    )

    @field_validator("socket_send_buffer_bytes")
    @classmethod
    def _positive_or_os_default(cls, value: int) -> int:
        if value == 0:
            raise ValueError("must be positive, or -1 for the OS default")
        return value

    @model_validator(mode="after")
    def _servable_listeners(self) -> BrokerSettings:
        """Refuse listeners this broker would not serve as they say (security.listeners).

        The one place ``listeners`` and ``listener.security.protocol.map`` are parsed and
        checked, and ``advertised.listeners`` against the listeners' names."""
        try:
            specs = self.served_listeners
        except ValueError as exc:
            raise _KeyedError("listeners", exc) from None
        check_served(specs)
        if self.advertised_listeners is not None:
            try:
                check_advertised([spec.name for spec in specs], self.advertised_listeners)
            except ValueError as exc:
                raise _KeyedError("advertised.listeners", exc) from None
        try:
            _ = self.inter_broker_listener
        except ValueError as exc:
            raise _KeyedError("inter.broker.listener.name", exc) from None
        check_keys(self.ssl_configs, [spec.name for spec in specs])
        for spec in specs:
            if spec.protocol in TLS_PROTOCOLS:
                tls_settings(self.ssl_configs, spec.name)
        return self

    def tls_for(self, listener: str, *, server: bool = True) -> TlsSettings:
        """``listener``'s TLS settings (its ``listener.name.<name>.ssl.*`` over ``ssl.*``)."""
        return tls_settings(self.ssl_configs, listener, server=server)

    @property
    def inter_broker_listener(self) -> ListenerSpec:
        """The listener peers connect to (``security.listeners.inter_broker_listener``)."""
        return inter_broker_listener(
            self.served_listeners,
            self.advertised_listener_list,
            name=self.inter_broker_listener_name,
            protocol=self.security_inter_broker_protocol,
        )

    @property
    def served_listeners(self) -> list[ListenerSpec]:
        """Every listener with its security protocol."""
        return resolve_listeners(self.listeners, self.listener_security_protocol_map)

    @property
    def advertised_listener_list(self) -> list[Listener]:
        """What clients are told, by listener name (a subset of ``listeners``' names)."""
        return parse_listeners(self.advertised_listeners or self.listeners)


_SECURITY_KEY_PREFIXES = ("sasl.", "listener.name.", "security.")
"""Kafka's SASL keys: named as such when refused, not as unknown."""
_SSL_CONFIGS = "ssl.configs"
"""``BrokerSettings.ssl_configs``' generated alias: a field filled from the ``ssl.*`` keys,
never a key of the file."""


def _is_ssl_key(key: str) -> bool:
    """``ssl.*`` or ``listener.name.<name>.ssl.*`` (validated by ``security.tls``)."""
    if key.startswith("listener.name."):
        key = key[len("listener.name.") :].partition(".")[2]
    return key.startswith("ssl.")


def _aliases(model: type[BaseModel]) -> set[str]:
    return {f.alias for f in model.model_fields.values() if f.alias}


def settings_from_properties(props: dict[str, str]) -> tuple[BrokerSettings, StorageSettings]:
    """Split and validate properties; raise ConfigError naming the first bad or unknown key."""
    broker_keys = _aliases(BrokerSettings) - {_SSL_CONFIGS}
    storage_keys = _aliases(StorageSettings)
    ssl_configs = {k: v for k, v in props.items() if _is_ssl_key(k)}
    unknown = sorted(
        k for k in props if k not in broker_keys and k not in storage_keys and k not in ssl_configs
    )
    security = [k for k in unknown if k.startswith(_SECURITY_KEY_PREFIXES)]
    if security:
        raise ConfigError(
            f"configuration key {security[0]!r} configures SASL, which Spindle does not "
            "support yet (PLAINTEXT and SSL listeners, without SASL)"
        )
    if unknown:
        raise ConfigError(
            f"unknown configuration key {unknown[0]!r}"
            + (f" (and {len(unknown) - 1} more: {', '.join(unknown[1:])})" if unknown[1:] else "")
        )
    broker_props: dict[str, Any] = {k: v for k, v in props.items() if k in broker_keys}
    broker_props["ssl_configs"] = ssl_configs
    storage_props: dict[str, Any] = {k: v for k, v in props.items() if k in storage_keys}
    try:
        broker = BrokerSettings.model_validate(broker_props)
        storage = StorageSettings.model_validate(storage_props)
    except ValidationError as exc:
        err = exc.errors()[0]
        cause = err.get("ctx", {}).get("error")
        key = cause.key if isinstance(cause, _KeyedError) else ".".join(str(p) for p in err["loc"])
        # Still no key: the model validator's check of the listeners as a whole.
        where = f"configuration key {key!r}" if key else "listener configuration"
        raise ConfigError(f"{where}: {err['msg']}") from None
    return broker, storage


def load_config(path: str | Path) -> tuple[BrokerSettings, StorageSettings]:
    """Read and validate a ``.properties`` file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        props = parse_properties(text)
    except ValueError as exc:
        raise ConfigError(f"config file {path} is not a valid .properties file: {exc}") from None
    return settings_from_properties(props)


__all__ = [
    "BrokerSettings",
    "ConfigError",
    "Listener",
    "load_config",
    "parse_listeners",
    "parse_properties",
    "settings_from_properties",
]
