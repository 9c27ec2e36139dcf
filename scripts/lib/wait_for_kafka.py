"""Wait, quietly, until Kafka's Java tools can work against the cluster, then say how long it took.

  scripts/controlplane.sh exec -- python -P scripts/lib/wait_for_kafka.py --brokers 3 HOST:PORT,...

Run on the node with cluster DNS (``controlplane.sh exec``), as the tools are. Ready broker Pods
are not enough: a lookup of a broker's name made before its Pod had an address (by anyone: the
operator, the brokers, this script) is answered "no such name", and CoreDNS keeps that answer
for 30 s (``cache 30`` and the kubernetes plugin's ``ttl 30``, as in kubeadm's Corefile;
measured: a name first looked up as its Pod was created resolved 30.3 s later, to the address
the Pod had had for most of that time). A Java client started in that window retries every
broker it cannot resolve with a WARN and a stack trace each time (about 470 lines in one run of
``./dev run``); this wait is silent (18-23 s in ``./dev run``). It lasts until every bootstrap
name resolves, the cluster's metadata lists the expected number of brokers (a topic with three
replicas needs three registered), and every broker's advertised host:port resolves and accepts
a connection. It checks twice a second and prints one line when done (how long, and what was
missing first); on timeout it prints the last thing missing.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import time
from collections.abc import Sequence


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def _reachable(host: str, port: int) -> str | None:
    """None when ``host`` resolves and accepts on ``port``, else what went wrong."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"{host} does not resolve ({exc.strerror})"
    try:
        with socket.create_connection((host, port), timeout=2):
            return None
    except OSError as exc:
        return f"{host}:{port} does not accept ({exc.strerror or exc})"


def problem(bootstrap: Sequence[tuple[str, int]], brokers: int) -> str | None:
    """What keeps a client from using the cluster now, or None when nothing does."""
    for host, port in bootstrap:
        if (missing := _reachable(host, port)) is not None:
            return missing
    # Imported here: the DNS checks above need no Kafka client (and the tests run them alone).
    from kafka import KafkaAdminClient

    try:
        admin = KafkaAdminClient(
            bootstrap_servers=[f"{h}:{p}" for h, p in bootstrap], request_timeout_ms=5000
        )
        try:
            listed = admin.describe_cluster()["brokers"]
        finally:
            admin.close()
    except Exception as exc:  # any client error means "not yet"; the last one is reported
        return f"the cluster's metadata: {type(exc).__name__}: {exc}"
    if len(listed) < brokers:
        return f"{len(listed)} of {brokers} brokers registered"
    for broker in listed:
        if (missing := _reachable(broker["host"], broker["port"])) is not None:
            return f"broker {broker['broker_id']}: {missing}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bootstrap", help="host:port[,host:port...]")
    parser.add_argument("--brokers", type=int, default=1, help="brokers the metadata must list")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds")
    args = parser.parse_args(argv)
    # kafka-python logs each failed connection attempt; those are the noise this script avoids.
    logging.disable(logging.CRITICAL)
    bootstrap = [_address(a) for a in args.bootstrap.split(",")]
    start = time.monotonic()
    first: str | None = None
    while (missing := problem(bootstrap, args.brokers)) is not None:
        first = first or missing
        if time.monotonic() - start > args.timeout:
            print(f"not ready after {args.timeout:.0f} s: {missing}", file=sys.stderr)
            return 1
        time.sleep(0.5)
    waited = f"waited {time.monotonic() - start:.1f} s" + (f", first: {first}" if first else "")
    print(f"{args.brokers} brokers resolve and answer ({waited})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
