"""Readiness checks: each answers "is this part really working yet?" with one request, so the
start-up waits on facts (a ready endpoint, an object a controller created, a Ready condition)
rather than on sleeps."""

from __future__ import annotations

import json
import os
import random
import socket
import ssl
import struct
import urllib.error
import urllib.request
from pathlib import Path


def tls_context(pki: Path, *, user: str = "admin") -> ssl.SSLContext:
    """Verifies servers against the cluster CA and authenticates as ``user``'s certificate."""
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / f"{user}.crt"), str(pki / f"{user}.key"))
    return context


def http_get(url: str, *, tls: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    """(status, body); status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=5, context=tls) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, ssl.SSLError):
        return 0, b""


def etcd_healthy(client_url: str) -> bool:
    status, body = http_get(f"{client_url}/health")
    return status == 200 and b'"health":"true"' in body


def api_server_ready(server: str, tls: ssl.SSLContext) -> bool:
    status, body = http_get(f"{server}/readyz", tls=tls)
    return status == 200 and body.strip() == b"ok"


def controller_manager_ready(health_url: str, server: str, tls: ssl.SSLContext) -> bool:
    if http_get(health_url, tls=tls)[0] != 200:
        return False
    # The service-account controller creates this in every namespace: once it exists the
    # controllers are running, not merely serving health checks.
    status, _ = http_get(f"{server}/api/v1/namespaces/default/serviceaccounts/default", tls=tls)
    return status == 200


def healthz_ok(url: str, tls: ssl.SSLContext | None = None) -> bool:
    status, body = http_get(url, tls=tls)
    return status == 200 and body.strip() == b"ok"


def node_ready(server: str, tls: ssl.SSLContext, node: str) -> bool:
    """The Node object exists and its Ready condition is True (the kubelet registered it and its
    runtime and network are up)."""
    status, body = http_get(f"{server}/api/v1/nodes/{node}", tls=tls)
    if status != 200:
        return False
    conditions = json.loads(body).get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def deployment_available(server: str, tls: ssl.SSLContext, namespace: str, name: str) -> bool:
    status, body = http_get(
        f"{server}/apis/apps/v1/namespaces/{namespace}/deployments/{name}", tls=tls
    )
    if status != 200:
        return False
    deployment = json.loads(body)
    wanted = deployment.get("spec", {}).get("replicas", 1)
    return bool(deployment.get("status", {}).get("availableReplicas", 0) >= wanted)


def dns_query(server: str, name: str, *, timeout: float = 2.0) -> list[str]:
    """The IPv4 addresses ``server`` answers for ``name`` (one UDP query, RFC 1035 section 4);
    empty when it does not answer or knows no address. Used, inside the node's namespace, to wait
    until cluster DNS works through its Service address."""
    query_id = random.randrange(1 << 16)
    question = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split("."))
    packet = struct.pack("!HHHHHH", query_id, 0x0100, 1, 0, 0, 0) + question + b"\0"
    packet += struct.pack("!HH", 1, 1)  # type A, class IN
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.sendto(packet, (server, 53))
            reply = sock.recv(4096)
        except OSError:
            return []
    answer_id, flags, _, answers = struct.unpack("!HHHH", reply[:8])
    if answer_id != query_id or flags & 0x000F:
        return []
    offset = len(packet)  # the reply repeats our question first
    found = []
    for _ in range(answers):
        if reply[offset] & 0xC0 == 0xC0:  # a compressed name: a two-byte pointer
            offset += 2
        else:
            while reply[offset]:
                offset += reply[offset] + 1
            offset += 1
        rtype, _, _, length = struct.unpack("!HHIH", reply[offset : offset + 10])
        offset += 10
        if rtype == 1 and length == 4:
            found.append(socket.inet_ntoa(reply[offset : offset + 4]))
        offset += length
    return found


if __name__ == "__main__":  # python -m controlplane.readiness dns SERVER NAME (in a netns)
    import sys

    if sys.argv[1:2] == ["dns"] and len(sys.argv) == 4:
        sys.exit(0 if dns_query(sys.argv[2], sys.argv[3]) else 1)
    sys.exit(os.EX_USAGE)
