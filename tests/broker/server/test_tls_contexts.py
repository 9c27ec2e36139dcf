"""TLS contexts from Kafka's ``ssl.*`` keys, exercised with real handshakes on loopback: PEM
(inline and file) and PKCS12 stores, client authentication and the principal it gives, TLS
1.2 and 1.3, hostname checks, and keystore rotation for new connections only."""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from spindle.broker.server.config import ConfigError, settings_from_properties
from spindle.broker.server.security.authenticator import authenticator_for
from spindle.broker.server.security.listeners import ListenerSpec, SecurityProtocol
from spindle.broker.server.security.tls import (
    TlsConfigError,
    client_context,
    peer_distinguished_name,
    tls_settings,
)
from spindle.broker.server.security.tls_reload import ListenerTls

from ...certs import CA, Issued, make_ca

SSL_SPEC = ListenerSpec("SSL", "127.0.0.1", 0, SecurityProtocol.SSL)


@pytest.fixture
def ca(tmp_path: Path) -> CA:
    return make_ca(tmp_path / "ca")


@pytest.fixture
def server_cert(ca: CA) -> Issued:
    return ca.issue("broker", sans=["localhost", "127.0.0.1"])


def _pem_files(cert: Issued, ca: CA, **extra: str) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(cert.pem_keystore()),
        "ssl.truststore.location": str(ca.cert_file),
        **extra,
    }


@asynccontextmanager
async def _serving(tls: ListenerTls) -> AsyncIterator[tuple[int, list[str]]]:
    """A TLS server on the listener's bound context; yields its port and the principals of
    the connections it accepted."""
    principals: list[str] = []
    writers: list[asyncio.StreamWriter] = []

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        name = peer_distinguished_name(writer.transport)
        principals.append(authenticator_for(SSL_SPEC, peer_name=name, mapper=tls.mapper).principal)
        with contextlib.suppress(OSError):
            await reader.read()  # until the client closes
        writer.close()

    server = await asyncio.start_server(accepted, "127.0.0.1", 0, ssl=tls.bound)
    try:
        yield server.sockets[0].getsockname()[1], principals
    finally:
        server.close()
        for writer in writers:
            writer.close()
        await server.wait_closed()
        await asyncio.sleep(0.05)  # the handlers see their streams end


def _client(ca: CA, cert: Issued | None = None, **kw: object) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca.cert_file))
    if cert is not None:
        ctx.load_cert_chain(cert.cert_file, cert.key_file)
    for k, v in kw.items():
        setattr(ctx, k, v)
    return ctx


async def _connect(
    port: int, ctx: ssl.SSLContext, host: str = "localhost"
) -> tuple[asyncio.StreamWriter, dict[str, object]]:
    _r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname=host)
    sslobj = w.get_extra_info("ssl_object")
    return w, {"version": sslobj.version(), "cert": w.get_extra_info("peercert")}


async def _close(w: asyncio.StreamWriter) -> None:
    w.close()
    await w.wait_closed()


async def _settle(principals: list[str], n: int) -> None:
    for _ in range(100):
        if len(principals) >= n:
            return
        await asyncio.sleep(0.01)


async def test_a_client_certificate_is_the_principal_through_the_mapping_rules(
    ca: CA, server_cert: Issued
) -> None:
    rules = "RULE:^CN=([^,]*),OU=apps,.*$/$1/L,DEFAULT"
    tls = ListenerTls(
        tls_settings(
            _pem_files(
                server_cert,
                ca,
                **{"ssl.client.auth": "requested", "ssl.principal.mapping.rules": rules},
            ),
            "SSL",
        )
    )
    alice = ca.issue("alice", subject={"CN": "Alice", "OU": "apps", "O": "Acme"}, client=True)
    bob = ca.issue("bob", subject={"CN": "bob", "O": "Acme", "C": "GB"}, client=True)
    async with _serving(tls) as (port, principals):
        for cert in (alice, bob, None):
            w, _ = await _connect(port, _client(ca, cert))
            await _settle(principals, len(principals) + 1)
            await _close(w)
    assert principals == ["User:alice", "User:CN=bob,O=Acme,C=GB", "User:ANONYMOUS"]


async def test_required_client_auth_refuses_a_client_without_a_certificate(
    ca: CA, server_cert: Issued
) -> None:
    tls = ListenerTls(
        tls_settings(_pem_files(server_cert, ca, **{"ssl.client.auth": "required"}), "SSL")
    )
    stranger = make_ca(ca.dir.parent / "other").issue("eve", client=True)
    async with _serving(tls) as (port, principals):
        for cert in (None, stranger):
            # TLS 1.3: the client's side of the handshake ends before the server has checked
            # its certificate; the server's alert then ends the stream.
            try:
                r, w = await asyncio.open_connection(
                    "127.0.0.1", port, ssl=_client(ca, cert), server_hostname="localhost"
                )
                assert await asyncio.wait_for(r.read(), 5) == b""
            except (ssl.SSLError, ConnectionResetError):
                pass
        w, _ = await _connect(port, _client(ca, ca.issue("ok", client=True)))
        await _settle(principals, 1)
        await _close(w)
    assert principals == ["User:CN=ok"]


@pytest.mark.parametrize("version", ["TLSv1.2", "TLSv1.3"])
async def test_each_enabled_protocol_is_negotiated_and_a_disabled_one_refused(
    ca: CA, server_cert: Issued, version: str
) -> None:
    tls = ListenerTls(
        tls_settings(_pem_files(server_cert, ca, **{"ssl.enabled.protocols": version}), "SSL")
    )
    other = "TLSv1.3" if version == "TLSv1.2" else "TLSv1.2"
    pin = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
    async with _serving(tls) as (port, _):
        w, info = await _connect(port, _client(ca))
        assert info["version"] == version
        await _close(w)
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            await _connect(
                port, _client(ca, minimum_version=pin[other], maximum_version=pin[other])
            )


async def test_pkcs12_and_inline_pem_stores_serve_the_same_certificate(
    ca: CA, server_cert: Issued
) -> None:
    stores: list[dict[str, str]] = [
        {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(server_cert.pkcs12("store-pw")),
            "ssl.keystore.password": "store-pw",
            "ssl.key.password": "store-pw",
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(ca.truststore_pkcs12("trust-pw")),
            "ssl.truststore.password": "trust-pw",
        },
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": server_cert.cert_pem,
            "ssl.keystore.key": server_cert.encrypted_key_pem("key-pw"),
            "ssl.key.password": "key-pw",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": ca.pem,
        },
        {"ssl.keystore.location": str(server_cert.pkcs12("pw")), "ssl.keystore.password": "pw"},
    ]
    for configs in stores:
        tls = ListenerTls(tls_settings(configs, "SSL"))
        async with _serving(tls) as (port, _):
            w, info = await _connect(port, _client(ca))
            assert dict(x[0] for x in info["cert"]["subject"])["commonName"] == "broker"  # type: ignore[index]
            await _close(w)


async def test_a_client_checking_hostnames_refuses_a_certificate_without_the_name(
    ca: CA, server_cert: Issued
) -> None:
    tls = ListenerTls(tls_settings(_pem_files(server_cert, ca), "SSL"))
    async with _serving(tls) as (port, _):
        with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
            await _connect(port, _client(ca), host="kafka.example.com")
        # The broker's own client side: https identification (Kafka's default) checks too,
        # and an empty algorithm does not.
        peer = client_context(tls_settings(_pem_files(server_cert, ca), "SSL", server=False))
        assert peer.check_hostname
        with pytest.raises(ssl.SSLCertVerificationError):
            await _connect(port, peer, host="kafka.example.com")
        lax = client_context(
            tls_settings(
                _pem_files(server_cert, ca, **{"ssl.endpoint.identification.algorithm": ""}),
                "SSL",
                server=False,
            )
        )
        w, _ = await _connect(port, lax, host="kafka.example.com")
        await _close(w)


async def test_a_rotated_keystore_reaches_new_connections_and_spares_open_ones(
    ca: CA, server_cert: Issued
) -> None:
    keystore = server_cert.pem_keystore()
    tls = ListenerTls(tls_settings(_pem_files(server_cert, ca), "SSL"))
    serial: Callable[[dict[str, object]], int] = lambda info: int(info["cert"]["serialNumber"], 16)  # type: ignore[index]  # noqa: E731
    async with _serving(tls) as (port, _):
        old, first = await _connect(port, _client(ca))
        assert not tls.reload_if_changed()  # nothing changed
        renewed = ca.issue("broker", sans=["localhost", "127.0.0.1"])
        keystore.write_text(renewed.key_pem + renewed.cert_pem)
        os.utime(keystore, (1, 1))
        assert tls.reload_if_changed()
        new, second = await _connect(port, _client(ca))
        assert serial(second) == renewed.cert.serial_number
        assert serial(first) == server_cert.cert.serial_number
        old.write(b"still here")  # the old connection is still up
        await old.drain()
        await _close(old)
        await _close(new)
        # A certificate for another subject is refused (ssl.allow.dn.changes=false) and the
        # current one keeps serving.
        other = ca.issue("impostor", sans=["localhost"])
        keystore.write_text(other.key_pem + other.cert_pem)
        with pytest.raises(TlsConfigError, match="names CN=impostor, not CN=broker"):
            tls.reload_if_changed()
        w, third = await _connect(port, _client(ca))
        assert serial(third) == serial(second)
        await _close(w)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({}, r"listener SSL serves TLS but has no certificate: set ssl\.keystore\.location"),
        ({"ssl.keystore.locaton": "/x"}, r"unknown TLS configuration key 'ssl\.keystore\.locaton'"),
        (
            {"listener.name.other.ssl.keystore.location": "/x"},
            "names listener 'other', which is not one of listeners",
        ),
        ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/x"}, "JKS is Java's own format"),
        ({"ssl.keystore.location": "/nonexistent.p12"}, r"ssl\.keystore\.location=/nonexistent"),
        (
            {"listener.name.ssl.ssl.enabled.protocols": "TLSv1.1", "ssl.keystore.location": "/x"},
            r"listener\.name\.ssl\.ssl\.enabled\.protocols: TLSv1\.1 not supported",
        ),
        ({"ssl.client.auth": "always", "ssl.keystore.location": "/x"}, "must be none, requested"),
        (
            {"ssl.keymanager.algorithm": "PKIX", "ssl.keystore.location": "/x"},
            "Java's TLS machinery",
        ),
    ],
)
def test_a_bad_tls_setting_stops_start_up_naming_the_key(
    tmp_path: Path, props: dict[str, str], message: str
) -> None:
    base = {
        "node.id": "1",
        "log.dirs": str(tmp_path),
        "listeners": "PLAINTEXT://:9092,SSL://:9093",
    }
    with pytest.raises(ConfigError, match=message):
        _start_up({**base, **props})


def _start_up(props: dict[str, str]) -> None:
    """What a broker checks before binding: the keys, then (``BrokerServer``) the stores."""
    broker, _ = settings_from_properties(props)
    try:
        ListenerTls(broker.tls_for("SSL"))
    except TlsConfigError as exc:
        raise ConfigError(str(exc)) from None


def test_a_wrong_store_password_names_the_password_key(ca: CA, server_cert: Issued) -> None:
    configs = {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(server_cert.pkcs12("right")),
        "ssl.keystore.password": "wrong",
    }
    with pytest.raises(TlsConfigError, match=r"check ssl\.keystore\.password"):
        ListenerTls(tls_settings(configs, "SSL"))
