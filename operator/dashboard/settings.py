"""The dashboard's settings: a typed model, one line of doc per field, parsed from the operator's
command line (``spindle-operator run --dashboard 0.0.0.0:8081 ...``) or given by tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ReadAccess = Literal["open", "authenticated"]


@dataclass(frozen=True, kw_only=True)
class DashboardSettings:
    #: Address to listen on (all interfaces in a Pod; loopback for a local run).
    host: str = "127.0.0.1"
    #: TCP port of the dashboard's HTTP server (the chart's Service targets it).
    port: int = 8081
    #: "open": anyone who reaches the Service may look; "authenticated": pages and JSON need a
    #: token the API server accepts. State-changing actions always need one, plus the right.
    read_access: ReadAccess = "authenticated"
    #: Namespace patterns served (the operator's --namespace values); empty means all.
    namespaces: tuple[str, ...] = ()
    #: Mark the session cookie Secure (set when served over HTTPS, e.g. behind a TLS Ingress).
    secure_cookies: bool = False
    #: Audiences a TokenReview must accept; empty means the API server's default.
    token_audiences: tuple[str, ...] = ()
    #: Seconds between server-sent-event keep-alive comments (proxies close idle streams).
    keepalive_seconds: float = 15.0


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``:PORT`` (all interfaces) -> (host, port); a clear error otherwise."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--dashboard expects HOST:PORT (for example 0.0.0.0:8081), got {value!r}")
    return (host.strip("[]") or "0.0.0.0"), int(port)
