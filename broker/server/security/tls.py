"""TLS for listeners and for this broker's own connections to other brokers, from Kafka's
``ssl.*`` keys (stdlib :mod:`ssl` over OpenSSL; PKCS12 and PEM parsing by ``cryptography``).

Keys are read per listener as Kafka reads them: ``listener.name.<name>.ssl.X`` (the listener's
name lower-cased) wins over ``ssl.X``. What is understood:

- keystore (this broker's certificate and key): ``ssl.keystore.type`` ``PEM`` -- KIP-651,
  ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` inline, or one file at
  ``ssl.keystore.location`` holding the key and the chain -- or ``PKCS12`` at
  ``ssl.keystore.location`` with ``ssl.keystore.password`` (and ``ssl.key.password`` if the
  key has a password of its own). ``JKS``, Kafka's default type, is Java's own format and is
  refused with the way out (``keytool -importkeystore -deststoretype PKCS12``); with the type
  unset a file is read as what it is (PEM text or PKCS12).
- truststore (whom to trust): the same two types, ``ssl.truststore.certificates`` inline PEM,
  or ``ssl.truststore.location`` (+ ``ssl.truststore.password`` for PKCS12). None given: the
  system's CAs, as a JVM falls back to its ``cacerts``.
- ``ssl.client.auth`` none / requested / required (mTLS); ``ssl.enabled.protocols`` (TLSv1.2,
  TLSv1.3: Kafka's default; older versions are refused); ``ssl.cipher.suites`` by IANA names
  as Kafka takes them (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``) or OpenSSL's, for TLS 1.2
  (OpenSSL offers its TLS 1.3 suites whatever is listed); ``ssl.protocol``;
  ``ssl.endpoint.identification.algorithm`` (``https``, Kafka's default: this broker checks
  the peer broker's certificate names the host it dialled; empty turns the check off);
  ``ssl.principal.mapping.rules`` (:mod:`.principal`).

A missing keystore, an unknown ``ssl.`` key, a store that does not open: a start-up error
naming the key, never a listener that silently serves something else.

Rotation (new connections get a new certificate, open ones keep theirs) is
:mod:`.tls_reload`'s; this module only builds contexts. The private key is handed to OpenSSL
through a file (``load_cert_chain`` takes paths only): a temporary one, readable by this
process only, holding the key encrypted with a one-time password, removed at once.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from .principal import PrincipalMapper, rfc2253

SSL_PREFIX = "ssl."

KNOWN_KEYS: dict[str, str | None] = {
    "ssl.protocol": "TLSv1.3",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.cipher.suites": None,
    "ssl.keystore.type": None,
    "ssl.keystore.location": None,
    "ssl.keystore.password": None,
    "ssl.key.password": None,
    "ssl.keystore.certificate.chain": None,
    "ssl.keystore.key": None,
    "ssl.truststore.type": None,
    "ssl.truststore.location": None,
    "ssl.truststore.password": None,
    "ssl.truststore.certificates": None,
    "ssl.client.auth": "none",
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.principal.mapping.rules": "DEFAULT",
    # Java's own machinery: accepted with Kafka's defaults (they name what a JVM uses), refused
    # with any other value, which would mean something this broker cannot do.
    "ssl.keymanager.algorithm": "SunX509",
    "ssl.trustmanager.algorithm": "PKIX",
    "ssl.provider": None,
    "ssl.secure.random.implementation": None,
    "ssl.engine.factory.class": None,
    "ssl.allow.dn.changes": "false",
    "ssl.allow.san.changes": "false",
}
"""Kafka's broker-side ``ssl.*`` keys and their defaults (``SslConfigs``, ``KafkaConfig``)."""

_JAVA_ONLY = {
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.provider",
    "ssl.secure.random.implementation",
    "ssl.engine.factory.class",
}
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
DYNAMIC_KEYSTORE_KEYS = frozenset(
    k for k in KNOWN_KEYS if k.startswith(("ssl.keystore.", "ssl.key.", "ssl.truststore."))
)
"""What Kafka lets ``kafka-configs --alter`` change per listener without a restart."""


def is_dynamic_tls_key(key: str) -> bool:
    """``listener.name.<name>.ssl.keystore.*`` and the like: Kafka's dynamic TLS configs
    (always listener-prefixed: "Dynamic SSL configs must be configured with a listener
    prefix")."""
    if not key.startswith("listener.name."):
        return False
    return key[len("listener.name.") :].partition(".")[2] in DYNAMIC_KEYSTORE_KEYS


class TlsConfigError(ValueError):
    """A TLS setting cannot be used; the message names the key."""


def listener_prefix(listener: str) -> str:
    return f"listener.name.{listener.lower()}."


def ssl_configs_for(configs: Mapping[str, str], listener: str) -> dict[str, str]:
    """The ``ssl.*`` values that apply to ``listener``: its prefixed ones over the plain ones."""
    prefix = listener_prefix(listener)
    out = {k: v for k, v in configs.items() if k.startswith(SSL_PREFIX)}
    for key, value in configs.items():
        if key.startswith(prefix) and key[len(prefix) :].startswith(SSL_PREFIX):
            out[key[len(prefix) :]] = value
    return out


def check_keys(configs: Mapping[str, str], listeners: list[str]) -> None:
    """Refuse an unknown ``ssl.`` key, or a ``listener.name.`` prefix naming no listener."""
    names = {n.lower(): n for n in listeners}
    for key in sorted(configs):
        bare = key
        if key.startswith("listener.name."):
            name, _, bare = key[len("listener.name.") :].partition(".")
            if name not in names:
                raise TlsConfigError(
                    f"configuration key {key!r} names listener {name!r}, which is not one of "
                    f"listeners ({', '.join(listeners)})"
                )
        if bare.startswith(SSL_PREFIX) and bare not in KNOWN_KEYS:
            raise TlsConfigError(f"unknown TLS configuration key {key!r}")


@dataclass(frozen=True)
class TlsSettings:
    """One listener's TLS settings, validated (no file is read here)."""

    listener: str
    values: Mapping[str, str] = field(repr=False)

    def get(self, key: str) -> str | None:
        value = self.values.get(key)
        if value is None or value == "":
            return KNOWN_KEYS[key] if value is None else None
        return value

    def key_name(self, key: str) -> str:
        """The key as the user wrote it (prefixed or not), for messages."""
        return listener_prefix(self.listener) + key if key in self._prefixed else key

    _prefixed: frozenset[str] = frozenset()

    @property
    def client_auth(self) -> ssl.VerifyMode:
        return _CLIENT_AUTH[(self.get("ssl.client.auth") or "none").lower()]

    @property
    def check_hostname(self) -> bool:
        return (self.get("ssl.endpoint.identification.algorithm") or "").lower() == "https"

    @property
    def mapper(self) -> PrincipalMapper:
        return PrincipalMapper.parse(self.get("ssl.principal.mapping.rules"))

    @property
    def has_keystore(self) -> bool:
        return bool(self.get("ssl.keystore.location") or self.get("ssl.keystore.key"))

    def files(self) -> list[Path]:
        """The store files read, to watch for rotation."""
        return [
            Path(p)
            for k in ("ssl.keystore.location", "ssl.truststore.location")
            if (p := self.get(k))
        ]


def tls_settings(configs: Mapping[str, str], listener: str, *, server: bool = True) -> TlsSettings:
    """``listener``'s TLS settings from all configs; ``TlsConfigError`` names a bad key.
    ``server``: a keystore is required (an SSL listener must have a certificate)."""
    values = ssl_configs_for(configs, listener)
    prefix = listener_prefix(listener)
    settings = TlsSettings(
        listener,
        values,
        frozenset(k[len(prefix) :] for k in configs if k.startswith(prefix)),
    )
    name = settings.key_name
    for key in _JAVA_ONLY:
        value = values.get(key)
        if value and value != KNOWN_KEYS[key]:
            raise TlsConfigError(
                f"{name(key)}={value}: Java's TLS machinery, which Spindle does not have "
                "(OpenSSL serves TLS here); remove the key"
            )
    for key in ("ssl.allow.dn.changes", "ssl.allow.san.changes"):
        if (settings.get(key) or "false").lower() not in ("true", "false"):
            raise TlsConfigError(f"{name(key)} must be true or false")
    auth = (settings.get("ssl.client.auth") or "none").lower()
    if auth not in _CLIENT_AUTH:
        raise TlsConfigError(
            f"{name('ssl.client.auth')}={auth}: must be none, requested or required"
        )
    algorithm = (settings.get("ssl.endpoint.identification.algorithm") or "").lower()
    if algorithm not in ("", "https"):
        raise TlsConfigError(
            f"{name('ssl.endpoint.identification.algorithm')}={algorithm}: must be https or empty"
        )
    protocol = settings.get("ssl.protocol") or "TLSv1.3"
    if protocol not in ("TLS", "TLSv1.2", "TLSv1.3"):
        raise TlsConfigError(f"{name('ssl.protocol')}={protocol}: must be TLSv1.2, TLSv1.3 or TLS")
    _enabled_protocols(settings)
    try:
        settings.mapper  # noqa: B018  (parsing is the check)
    except ValueError as exc:
        raise TlsConfigError(f"{name('ssl.principal.mapping.rules')}: {exc}") from None
    _check_store(settings, "keystore", required=server)
    _check_store(settings, "truststore", required=False)
    return settings


def _enabled_protocols(settings: TlsSettings) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    raw = settings.get("ssl.enabled.protocols") or ""
    names = [p.strip() for p in raw.split(",") if p.strip()]
    key = settings.key_name("ssl.enabled.protocols")
    if not names:
        raise TlsConfigError(f"{key} is empty: enable TLSv1.2 and/or TLSv1.3")
    bad = [n for n in names if n not in _PROTOCOLS]
    if bad:
        raise TlsConfigError(
            f"{key}: {', '.join(bad)} not supported (TLSv1.2 and TLSv1.3 are; older versions "
            "are insecure)"
        )
    versions = sorted(_PROTOCOLS[n] for n in names)
    return versions[0], versions[-1]


def _check_store(settings: TlsSettings, store: str, *, required: bool) -> None:
    name = settings.key_name
    kind = (settings.get(f"ssl.{store}.type") or "").upper()
    location = settings.get(f"ssl.{store}.location")
    inline = (
        ("ssl.keystore.certificate.chain", "ssl.keystore.key")
        if store == "keystore"
        else ("ssl.truststore.certificates",)
    )
    given = [k for k in inline if settings.get(k)]
    if kind == "JKS":
        raise TlsConfigError(
            f"{name(f'ssl.{store}.type')}=JKS is Java's own format, which Spindle cannot read: "
            f"convert it (keytool -importkeystore -deststoretype PKCS12) and set {store} type "
            "PKCS12, or use PEM"
        )
    if kind not in ("", "PEM", "PKCS12"):
        raise TlsConfigError(f"{name(f'ssl.{store}.type')}={kind}: must be PEM or PKCS12")
    if given and location:
        raise TlsConfigError(
            f"{name(given[0])} and {name(f'ssl.{store}.location')} are both set: give one"
        )
    if given:
        if kind not in ("", "PEM"):
            raise TlsConfigError(f"{name(given[0])} is PEM text: {store} type must be PEM")
        missing = [k for k in inline if not settings.get(k)]
        if missing:
            raise TlsConfigError(f"{name(given[0])} is set but {name(missing[0])} is not")
    if required and not given and not location:
        raise TlsConfigError(
            f"listener {settings.listener} serves TLS but has no certificate: set "
            f"{name('ssl.keystore.location')} (or {name('ssl.keystore.certificate.chain')} "
            f"and {name('ssl.keystore.key')})"
        )


# --- building contexts (reads the stores) ---------------------------------------------------


@dataclass(frozen=True)
class Keystore:
    """A certificate chain and its key, as PEM text (the key encrypted with ``password``)."""

    chain_pem: bytes
    key_pem: bytes
    password: bytes | None

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.chain_pem)


def _read(settings: TlsSettings, key: str) -> bytes:
    path = settings.get(key)
    assert path is not None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"{settings.key_name(key)}={path}: {exc.strerror}") from None


def _pkcs12(
    settings: TlsSettings, data: bytes, store: str, passwords: list[str | None]
) -> pkcs12.PKCS12KeyAndCertificates:
    last: Exception | None = None
    for password in passwords:
        try:
            return pkcs12.load_pkcs12(data, password.encode() if password else None)
        except ValueError as exc:
            last = exc
    raise TlsConfigError(
        f"{settings.key_name(f'ssl.{store}.location')}: cannot open the PKCS12 store ({last}); "
        f"check {settings.key_name(f'ssl.{store}.password')}"
    )


def _is_pem(data: bytes) -> bool:
    return b"-----BEGIN" in data


def load_keystore(settings: TlsSettings) -> Keystore:
    """This listener's certificate chain and key, whatever store holds them."""
    name = settings.key_name
    key_password = settings.get("ssl.key.password")
    if settings.get("ssl.keystore.key"):
        chain = (settings.get("ssl.keystore.certificate.chain") or "").encode()
        key = (settings.get("ssl.keystore.key") or "").encode()
        return _pem_keystore(settings, chain, key, key_password, "ssl.keystore.key")
    data = _read(settings, "ssl.keystore.location")
    kind = (settings.get("ssl.keystore.type") or "").upper()
    if kind == "PEM" or (not kind and _is_pem(data)):
        return _pem_keystore(settings, data, data, key_password, "ssl.keystore.location")
    store = _pkcs12(
        settings, data, "keystore", [settings.get("ssl.keystore.password"), key_password]
    )
    if store.key is None or store.cert is None:
        raise TlsConfigError(
            f"{name('ssl.keystore.location')}: the PKCS12 store holds no private key and "
            "certificate"
        )
    password = secrets.token_hex(16).encode()
    certs = [store.cert.certificate, *(c.certificate for c in store.additional_certs)]
    return Keystore(
        b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs),
        store.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password),
        ),
        password,
    )


def _pem_keystore(
    settings: TlsSettings, chain: bytes, key: bytes, password: str | None, key_name: str
) -> Keystore:
    try:
        certs = x509.load_pem_x509_certificates(chain)
    except ValueError:
        certs = []
    if not certs:
        raise TlsConfigError(f"{settings.key_name(key_name)}: no PEM certificate found")
    try:
        private = serialization.load_pem_private_key(key, password.encode() if password else None)
    except (ValueError, TypeError) as exc:
        raise TlsConfigError(
            f"{settings.key_name(key_name)}: cannot read the private key ({exc}); check "
            f"{settings.key_name('ssl.key.password')}"
        ) from None
    fresh = secrets.token_hex(16).encode()
    return Keystore(
        b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs),
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(fresh),
        ),
        fresh,
    )


def load_truststore(settings: TlsSettings) -> str | None:
    """The trusted certificates as PEM text; None: the system's."""
    inline = settings.get("ssl.truststore.certificates")
    if inline:
        return inline
    if not settings.get("ssl.truststore.location"):
        return None
    data = _read(settings, "ssl.truststore.location")
    kind = (settings.get("ssl.truststore.type") or "").upper()
    if kind == "PEM" or (not kind and _is_pem(data)):
        return data.decode()
    store = _pkcs12(settings, data, "truststore", [settings.get("ssl.truststore.password"), None])
    certs = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certs.append(store.cert.certificate)
    if not certs:
        name = settings.key_name("ssl.truststore.location")
        raise TlsConfigError(f"{name}: the PKCS12 store holds no certificate")
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


@contextlib.contextmanager
def _pem_file(data: bytes) -> Iterator[str]:
    """``data`` in a file only this process can read, for the one call OpenSSL needs a path
    for (``load_cert_chain``); removed at once. The key in it is encrypted."""
    fd, path = tempfile.mkstemp(prefix="spindle-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        os.unlink(path)


_IANA_KX = {
    "ECDHE_RSA": "ECDHE-RSA-",
    "ECDHE_ECDSA": "ECDHE-ECDSA-",
    "DHE_RSA": "DHE-RSA-",
    "RSA": "",
}


def _openssl_cipher(name: str) -> str:
    """An IANA TLS 1.2 suite name (Java's, Kafka's) as OpenSSL names it; others unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, _, cipher = name[4:].partition("_WITH_")
    if kx not in _IANA_KX:
        return name
    if cipher.startswith("CHACHA20_POLY1305"):
        return _IANA_KX[kx] + "CHACHA20-POLY1305"
    parts = cipher.split("_")  # AES_128_GCM_SHA256 -> AES128-GCM-SHA256
    if len(parts) == 4 and parts[0] == "AES":
        return _IANA_KX[kx] + f"AES{parts[1]}-{parts[2]}-{parts[3]}"
    return name


def _configure(context: ssl.SSLContext, settings: TlsSettings) -> None:
    low, high = _enabled_protocols(settings)
    context.minimum_version, context.maximum_version = low, high
    suites = [s.strip() for s in (settings.get("ssl.cipher.suites") or "").split(",") if s.strip()]
    tls12 = [_openssl_cipher(s) for s in suites if not s.startswith("TLS_AES_")]
    tls12 = [s for s in tls12 if not s.startswith("TLS_CHACHA20")]
    if tls12:
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise TlsConfigError(
                f"{settings.key_name('ssl.cipher.suites')}: no suite OpenSSL knows among "
                f"{', '.join(suites)}"
            ) from None
        offered = {c["name"] for c in context.get_ciphers()}
        unknown = [s for s, o in zip(suites, tls12, strict=False) if o not in offered]
        if unknown:
            raise TlsConfigError(
                f"{settings.key_name('ssl.cipher.suites')}: unknown cipher suite {unknown[0]}"
            )
    truststore = load_truststore(settings)
    if truststore is None:
        if context.verify_mode != ssl.CERT_NONE:
            context.load_default_certs()
    else:
        try:
            context.load_verify_locations(cadata=truststore)
        except (ssl.SSLError, ValueError) as exc:
            key = (
                "ssl.truststore.certificates"
                if settings.get("ssl.truststore.certificates")
                else "ssl.truststore.location"
            )
            raise TlsConfigError(f"{settings.key_name(key)}: not a certificate ({exc})") from None
    if settings.has_keystore:
        keystore = load_keystore(settings)
        with _pem_file(keystore.key_pem + keystore.chain_pem) as path:
            try:
                context.load_cert_chain(path, password=keystore.password)
            except ssl.SSLError as exc:
                key = (
                    "ssl.keystore.key"
                    if settings.get("ssl.keystore.key")
                    else "ssl.keystore.location"
                )
                raise TlsConfigError(
                    f"{settings.key_name(key)}: the key does not fit the certificate ({exc})"
                ) from None


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context an SSL listener accepts with."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.verify_mode = settings.client_auth
    _configure(context, settings)
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context this broker dials another broker's SSL listener with: the peer must be
    trusted, and name the host dialled unless the identification algorithm is empty; this
    broker's own certificate is presented if the listener has one (mTLS between brokers)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = settings.check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    _configure(context, settings)
    return context


def peer_distinguished_name(transport: object) -> str | None:
    """The client certificate's subject in RFC 2253 form (as Java's ``X500Principal.getName``
    writes it), or None: no TLS, or no certificate presented."""
    get = getattr(transport, "get_extra_info", None)
    sslobj = get("ssl_object") if get is not None else None
    if sslobj is None:
        return None
    der = sslobj.getpeercert(binary_form=True)
    if not der:
        return None
    return rfc2253(x509.load_der_x509_certificate(der).subject)
