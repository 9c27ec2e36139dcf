"""Listeners and their security protocols, as Kafka resolves them (pure; no I/O).

``listeners`` names where the broker accepts connections (``NAME://host:port``, names unique),
``listener.security.protocol.map`` says which security protocol each name speaks (Kafka's
default maps the four protocol names to themselves, so ``SSL://:9093`` is TLS without any map),
and ``advertised.listeners`` what clients are told, by the same names. A listener whose name
has no protocol is refused, as Kafka refuses it ("No security protocol defined for listener").

Every listener is served, one acceptor each (``server.app``). :func:`check_served` refuses at
start-up, with the reason, a listener whose protocol Spindle cannot serve yet, because a broker
that bound ``SASL_SSL://:9094`` and answered it in plaintext without authentication would tell
its operators their data is protected when it is not.

:func:`inter_broker_listener` picks the listener other brokers (followers, the controller's
probes) connect to, by Kafka's rules: ``inter.broker.listener.name``, or the listener named
after ``security.inter.broker.protocol``; the two together are refused. With neither set Kafka
uses the listener named ``PLAINTEXT``; Spindle does too and, where no listener has that name,
takes the first one (Kafka would refuse to start; a one-listener broker with a custom name
was served before listeners were).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class SecurityProtocol(Enum):
    """Kafka's security protocols (``org.apache.kafka.common.security.auth.SecurityProtocol``)."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
"""Kafka's default ``listener.security.protocol.map``: each protocol's name maps to itself."""

SERVED_PROTOCOLS = frozenset({SecurityProtocol.PLAINTEXT, SecurityProtocol.SSL})
"""The security protocols Spindle can serve today."""
TLS_PROTOCOLS = frozenset({SecurityProtocol.SSL, SecurityProtocol.SASL_SSL})
"""The protocols whose transport is TLS (``security.tls``); SASL_SSL adds SASL over it."""


@dataclass(frozen=True, slots=True)
class Listener:
    """One ``NAME://host:port`` entry of ``listeners`` or ``advertised.listeners``."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """A listener to bind and the security protocol it speaks."""

    name: str
    host: str
    port: int
    protocol: SecurityProtocol


_LISTENER = re.compile(r"^([A-Z_][A-Z0-9_]*)://\[?([^\]]*)\]?:(\d+)$")


def parse_listeners(value: str) -> list[Listener]:
    """Parse Kafka's ``listeners`` syntax: ``PLAINTEXT://127.0.0.1:9092,OTHER://:9093``."""
    out: list[Listener] = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        m = _LISTENER.match(part)
        if m is None:
            raise ValueError(f"listener {part!r} is not NAME://host:port")
        out.append(Listener(name=m.group(1), host=m.group(2), port=int(m.group(3))))
    if not out:
        raise ValueError("no listener given")
    names = [listener.name for listener in out]
    if len(set(names)) != len(names):
        raise ValueError(f"each listener must have a different name, listeners: {value}")
    ports = [listener.port for listener in out if listener.port != 0]
    if len(set(ports)) != len(ports):
        raise ValueError(f"each listener must have a different port, listeners: {value}")
    return out


def parse_protocol_map(value: str) -> dict[str, SecurityProtocol]:
    """Parse ``listener.security.protocol.map`` (``NAME:PROTOCOL,...``)."""
    out: dict[str, SecurityProtocol] = {}
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        name, sep, protocol = part.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"entry {part!r} is not LISTENER_NAME:SECURITY_PROTOCOL")
        try:
            out[name.strip().upper()] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            known = ", ".join(p.value for p in SecurityProtocol)
            raise ValueError(
                f"entry {part!r}: unknown security protocol {protocol.strip()!r} "
                f"(Kafka's are {known})"
            ) from None
    return out


def resolve_listeners(listeners: str, protocol_map: str | None = None) -> list[ListenerSpec]:
    """Every listener of ``listeners`` with the protocol the map gives its name."""
    protocols = parse_protocol_map(protocol_map or DEFAULT_PROTOCOL_MAP)
    out: list[ListenerSpec] = []
    for listener in parse_listeners(listeners):
        protocol = protocols.get(listener.name)
        if protocol is None:
            raise ValueError(
                f"no security protocol defined for listener {listener.name} "
                "(name it in listener.security.protocol.map, e.g. "
                f"{listener.name}:PLAINTEXT)"
            )
        out.append(ListenerSpec(listener.name, listener.host, listener.port, protocol))
    return out


def check_advertised(valid: list[str], advertised: str) -> None:
    """``advertised.listeners`` may only name listeners of ``listeners`` (Kafka's rule);
    ``valid`` are the names ``listeners`` defines."""
    for listener in parse_listeners(advertised):
        if listener.name not in valid:
            raise ValueError(
                "advertised.listeners listener names must be equal to or a subset of the ones "
                f"defined in listeners; found {listener.name}, the valid options based on the "
                f"configured listeners are {', '.join(valid)}"
            )


def check_served(specs: list[ListenerSpec]) -> list[ListenerSpec]:
    """The listeners this broker serves, or why the configuration cannot be served."""
    served = ", ".join(sorted(p.value for p in SERVED_PROTOCOLS))
    for spec in specs:
        if spec.protocol not in SERVED_PROTOCOLS:
            raise ValueError(
                f"listener {spec.name}://{spec.host}:{spec.port} uses security protocol "
                f"{spec.protocol.value}, which Spindle does not support yet: it would be served "
                f"without the authentication it promises. Served protocols: {served}"
            )
    return specs


def inter_broker_listener(
    specs: list[ListenerSpec],
    advertised: list[Listener],
    *,
    name: str | None = None,
    protocol: str | None = None,
) -> ListenerSpec:
    """The listener other brokers reach this one on (see the module docstring for the rules);
    it must be advertised, as Kafka requires."""
    if name is not None and protocol is not None:
        raise ValueError(
            "only one of inter.broker.listener.name and security.inter.broker.protocol "
            "should be set"
        )
    by_name = {spec.name: spec for spec in specs}
    if name is not None:
        wanted = name.strip().upper()
    elif protocol is not None:
        try:
            wanted = SecurityProtocol(protocol.strip().upper()).value
        except ValueError:
            raise ValueError(
                f"security.inter.broker.protocol {protocol!r} is not a security protocol"
            ) from None
    elif SecurityProtocol.PLAINTEXT.value in by_name:
        wanted = SecurityProtocol.PLAINTEXT.value
    else:
        wanted = specs[0].name
    advertised_names = [a.name for a in advertised]
    if wanted not in by_name or wanted not in advertised_names:
        raise ValueError(
            "inter.broker.listener.name must be a listener name defined in "
            f"advertised.listeners; found {wanted}, the valid options based on currently "
            f"configured listeners are {', '.join(advertised_names)}"
        )
    return by_name[wanted]
