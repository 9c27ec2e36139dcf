"""Test certificates made with ``cryptography``: a CA, and server and client certificates it
signs, written as PEM and PKCS12 files -- what a broker's ``ssl.keystore.*`` and
``ssl.truststore.*`` keys and a client's TLS settings point at.

Shared by every test that needs TLS (listeners, SASL_SSL, the operator's certificates): no
``openssl`` or ``keytool`` is run, and each certificate is made in milliseconds (EC P-256 keys).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CA", "Issued", "make_ca"]


def _write(path: Path, text: str) -> Path:
    """Write ``text`` unless the file holds it already (a rewrite would change its mtime,
    which is what a broker watching its stores reacts to)."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def _name(dn: dict[str, str] | str) -> x509.Name:
    if isinstance(dn, str):
        dn = {"CN": dn}
    oids = {
        "CN": NameOID.COMMON_NAME,
        "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
        "O": NameOID.ORGANIZATION_NAME,
        "L": NameOID.LOCALITY_NAME,
        "ST": NameOID.STATE_OR_PROVINCE_NAME,
        "C": NameOID.COUNTRY_NAME,
    }
    # Written most significant first (C, ..., CN), so RFC 2253 reads CN first.
    order = ["C", "ST", "L", "O", "OU", "CN"]
    attrs = [x509.NameAttribute(oids[k], dn[k]) for k in order if k in dn]
    return x509.Name(attrs)


@dataclass
class Issued:
    """One certificate and its key, with the files written for it under ``dir``."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    chain: list[x509.Certificate]
    dir: Path
    name: str

    @property
    def cert_pem(self) -> str:
        return "".join(
            c.public_bytes(serialization.Encoding.PEM).decode() for c in [self.cert, *self.chain]
        )

    @property
    def key_pem(self) -> str:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()

    def encrypted_key_pem(self, password: str) -> str:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password.encode()),
        ).decode()

    @property
    def cert_file(self) -> Path:
        return _write(self.dir / f"{self.name}.crt", self.cert_pem)

    @property
    def key_file(self) -> Path:
        return _write(self.dir / f"{self.name}.key", self.key_pem)

    def pem_keystore(self) -> Path:
        """One PEM file holding the key then the certificate chain (a ``PEM`` keystore)."""
        return _write(self.dir / f"{self.name}.keystore.pem", self.key_pem + self.cert_pem)

    def pkcs12(self, password: str) -> Path:
        path = self.dir / f"{self.name}-{len(password)}-{abs(hash(password))}.p12"
        path.write_bytes(
            pkcs12.serialize_key_and_certificates(
                self.name.encode(),
                self.key,
                self.cert,
                self.chain or None,
                serialization.BestAvailableEncryption(password.encode()),
            )
        )
        return path

    @property
    def rfc2253(self) -> str:
        return self.cert.subject.rfc4514_string()


@dataclass
class CA:
    """A self-signed certificate authority that issues server and client certificates."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    dir: Path

    @property
    def pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    @property
    def cert_file(self) -> Path:
        return _write(self.dir / "ca.crt", self.pem)

    def truststore_pkcs12(self, password: str) -> Path:
        """A PKCS12 truststore holding the CA certificate only (no key)."""
        path = self.dir / "ca.truststore.p12"
        path.write_bytes(
            pkcs12.serialize_key_and_certificates(
                None,
                None,
                None,
                [self.cert],
                serialization.BestAvailableEncryption(password.encode()),
            )
        )
        return path

    def issue(
        self,
        name: str,
        *,
        subject: dict[str, str] | str | None = None,
        sans: list[str] = (),  # type: ignore[assignment]
        client: bool = False,
        days: int = 30,
    ) -> Issued:
        """A certificate for ``subject`` (default ``CN=name``) valid ``days``; ``sans`` are DNS
        names or IP addresses; ``client`` makes it a client certificate (clientAuth)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(subject or name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.CLIENT_AUTH]
                    if client
                    else [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if sans:
            entries: list[x509.GeneralName] = []
            for san in sans:
                try:
                    entries.append(x509.IPAddress(ipaddress.ip_address(san)))
                except ValueError:
                    entries.append(x509.DNSName(san))
            builder = builder.add_extension(x509.SubjectAlternativeName(entries), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return Issued(cert, key, [self.cert], self.dir, name)


def make_ca(directory: Path, name: str = "Spindle Test CA") -> CA:
    """A new CA whose files go to ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    subject = _name(name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CA(cert, key, directory)
