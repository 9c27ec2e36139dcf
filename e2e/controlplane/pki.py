"""The control plane's certificates and kubeconfigs: pure functions returning PEM bytes and
dicts, so what each certificate contains is testable without starting anything.

One CA signs everything (serving certificates, the admin's and each component's client
certificates); Kubernetes reads a client certificate's user from its CN and groups from O.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Service IPs are allocated from here; the API server's own ``kubernetes`` Service takes the
#: first address, which must therefore be in its serving certificate.
SERVICE_CIDR = "10.0.0.0/24"
CLUSTER_DOMAIN = "cluster.local"
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM private key."""

    cert: bytes
    key: bytes


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_ca(*, now: dt.datetime, days: int = 30) -> KeyPair:
    """A self-signed CA that signs every other certificate of this control plane."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name("spindle-local-ca")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def make_leaf(
    ca: KeyPair,
    *,
    common_name: str,
    organization: str | None = None,
    server_hosts: tuple[str, ...] = (),
    client: bool = False,
    now: dt.datetime,
    days: int = 30,
) -> KeyPair:
    """A certificate signed by ``ca``: a server one when ``server_hosts`` (DNS names or IPs)
    are given, a client one when ``client`` (Kubernetes reads the user from the CN and the
    groups from O), or both."""
    if not server_hosts and not client:
        raise ValueError(f"certificate {common_name!r} must be for a server, a client or both")
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key must be an EC key (as make_ca creates)")
    key = ec.generate_private_key(ec.SECP256R1())
    usages = []
    if server_hosts:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organization))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server_hosts:
        sans: list[x509.GeneralName] = []
        for host in server_hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def make_service_account_key() -> tuple[bytes, bytes]:
    """(private PEM, public PEM) of the key that signs service-account tokens (RS256)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _key_pem(key), public


def service_ip(index: int = 1) -> str:
    """The ``index``-th address of SERVICE_CIDR (1: the ``kubernetes`` Service)."""
    return str(ipaddress.ip_network(SERVICE_CIDR)[index])


def api_server_hosts(*extra: str) -> tuple[str, ...]:
    """Names the API server is reached by: loopback from here, the in-cluster Service names and
    the ``kubernetes`` Service IP (first address of SERVICE_CIDR) from Pods, and ``extra``
    addresses (the node's side of the host link, when a node runs)."""
    return (
        LOOPBACK,
        *extra,
        "localhost",
        service_ip(1),
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        f"kubernetes.default.svc.{CLUSTER_DOMAIN}",
    )


def build_kubeconfig(
    *, server: str, ca_cert: bytes, user: str, client: KeyPair, context: str = "spindle-local"
) -> dict[str, object]:
    """A self-contained kubeconfig (certificates inlined) for one user against ``server``."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": context,
                "cluster": {"server": server, "certificate-authority-data": b64(ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(client.cert),
                    "client-key-data": b64(client.key),
                },
            }
        ],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": user, "namespace": "default"},
            }
        ],
        "current-context": context,
        "preferences": {},
    }
