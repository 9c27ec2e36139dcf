"""Listeners and their security protocols, as Kafka resolves them (pure; no I/O).

``listeners`` names where the broker accepts connections (``NAME://host:port``, names unique),
``listener.security.protocol.map`` says which security protocol each name speaks (Kafka's
default maps the four protocol names to themselves, so ``SSL://:9093`` is TLS without any map),
and ``advertised.listeners`` what clients are told, by the same names. A listener whose name
has no protocol is refused, as Kafka refuses it ("No security protocol defined for listener").

Spindle serves one PLAINTEXT listener today. :func:`check_served` refuses the rest at start-up
with the reason, because a broker that bound ``SASL_SSL://:9094`` and answered it in plaintext
without authentication would tell its operators their data is protected when it is not
(issue #38 builds TLS and SASL; then one acceptor per listener comes here).
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

SERVED_PROTOCOLS = frozenset({SecurityProtocol.PLAINTEXT})
"""The security protocols Spindle can serve today."""


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


def check_served(specs: list[ListenerSpec]) -> ListenerSpec:
    """The one listener this broker serves, or why the configuration cannot be served."""
    for spec in specs:
        if spec.protocol not in SERVED_PROTOCOLS:
            raise ValueError(
                f"listener {spec.name}://{spec.host}:{spec.port} uses security protocol "
                f"{spec.protocol.value}, which Spindle does not support yet: it would be served "
                "as plaintext without authentication. Only PLAINTEXT listeners can be served"
            )
    if len(specs) > 1:
        raise ValueError(
            f"listeners names {len(specs)} listeners ({', '.join(s.name for s in specs)}); "
            "Spindle serves one listener yet, and the others would not be bound"
        )
    return specs[0]
