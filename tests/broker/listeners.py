"""Brokers with more listeners than ``make_broker``'s one PLAINTEXT listener: extra
``NAME://127.0.0.1:port`` entries (free ports), their protocol map, advertised addresses and
any per-listener keys, written into the broker's config before it starts. The first listener
stays the PLAINTEXT one ``Broker.port`` names (its start-up line names that port)."""

from __future__ import annotations

from dataclasses import dataclass

from .conftest import Broker, free_port


@dataclass(frozen=True)
class Extra:
    """One more listener: its name, security protocol and advertised host."""

    name: str
    protocol: str = "PLAINTEXT"
    advertised_host: str = "127.0.0.1"


def add_listeners(
    broker: Broker, extras: list[Extra], props: dict[str, str] | None = None
) -> dict[str, int]:
    """Give ``broker`` the ``extras`` listeners (and ``props``); their ports, by name."""
    ports = {e.name: free_port() for e in extras}
    plain = f"PLAINTEXT://127.0.0.1:{broker.port}"
    listeners = ",".join([plain, *(f"{e.name}://127.0.0.1:{ports[e.name]}" for e in extras)])
    advertised = ",".join(
        [plain, *(f"{e.name}://{e.advertised_host}:{ports[e.name]}" for e in extras)]
    )
    protocols = ",".join(["PLAINTEXT:PLAINTEXT", *(f"{e.name}:{e.protocol}" for e in extras)])
    lines = [
        line
        for line in broker.config.read_text().splitlines()
        if not line.startswith(("listeners=", "advertised.listeners=", "listener.security."))
    ]
    lines += [
        f"listeners={listeners}",
        f"advertised.listeners={advertised}",
        f"listener.security.protocol.map={protocols}",
        *(f"{k}={v}" for k, v in (props or {}).items()),
    ]
    broker.config.write_text("\n".join(lines) + "\n")
    return ports
