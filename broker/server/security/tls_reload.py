"""Keystore rotation without a restart: one SSL listener's TLS contexts, rebuilt when a store
file changes (polled: ``spindle.ssl.keystore.reload.interval.ms``) or when a dynamic config
update changes the listener's ``ssl.keystore.*`` / ``ssl.truststore.*`` keys, as Kafka allows
(``kafka-configs --entity-type brokers --alter --add-config
listener.name.ssl.ssl.keystore.location=...``).

The acceptor is bound with one context for its life; :class:`ListenerTls` keeps the newest one
and the bound context's server-name callback hands each new handshake over to it (OpenSSL calls
that callback for every ClientHello, with or without SNI). So new connections get the new
certificate and connections already up keep theirs: nothing is closed, nothing is lost.

A new certificate must name the same subject and alternative names as the old one unless
``ssl.allow.dn.changes`` / ``ssl.allow.san.changes`` (Kafka's check, so a mix-up of files does
not silently turn a broker into another); a store that does not load (half written, wrong
password) leaves the old context serving, and the poll tries again.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

from cryptography import x509

from .principal import rfc2253
from .tls import TlsConfigError, TlsSettings, load_keystore, server_context


class ListenerTls:
    """One SSL listener's contexts: the one its acceptor is bound with (:attr:`bound`), the
    newest built from its stores (:meth:`current`), and the reload that rebuilds it when a
    store file changes (:meth:`reload_if_changed`, polled) or its settings are updated
    (:meth:`update`, a dynamic config change). Event loop only."""

    def __init__(
        self,
        settings: TlsSettings,
        *,
        build: Callable[[TlsSettings], ssl.SSLContext] = server_context,
    ) -> None:
        self.settings = settings
        self._build = build
        self._current = build(settings)
        self._stamps = self._stat()
        self._certificate = load_keystore(settings).certificate if settings.has_keystore else None
        self.bound = self._current
        self.bound.sni_callback = self._hand_over
        self.mapper = settings.mapper
        """The listener's ``ssl.principal.mapping.rules``, parsed once."""
        self.reloads = 0

    def current(self) -> ssl.SSLContext:
        return self._current

    def _hand_over(
        self, sslobj: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext
    ) -> None:
        if self._current is not context:
            sslobj.context = self._current

    def _stat(self) -> dict[Path, tuple[float, int] | None]:
        out: dict[Path, tuple[float, int] | None] = {}
        for path in self.settings.files():
            try:
                st = path.stat()
                out[path] = (st.st_mtime, st.st_size)
            except OSError:
                out[path] = None
        return out

    def reload_if_changed(self) -> bool:
        """Rebuild the context if a store file changed since it was read; True if it did.
        A store that does not load (half written, wrong password) leaves the old context
        serving and is retried at the next poll; the error is raised for the caller to log."""
        stamps = self._stat()
        if stamps == self._stamps:
            return False
        context = self._build(self.settings)  # raises: the stamps stay, retried next poll
        self._check_identity(context)
        self._stamps = stamps
        self._swap(context)
        return True

    def update(self, settings: TlsSettings) -> None:
        """New settings (a dynamic ``listener.name.X.ssl.keystore.*`` update)."""
        context = self._build(settings)
        self.settings = settings
        self._check_identity(context)
        self._stamps = self._stat()
        self._swap(context)

    def _check_identity(self, context: ssl.SSLContext) -> None:
        """Kafka refuses a new keystore whose certificate names another subject or other
        alternative names unless ``ssl.allow.dn.changes`` / ``ssl.allow.san.changes``."""
        del context  # the certificates are compared from the stores, see below
        if not self.settings.has_keystore:
            return
        old = self._certificate
        new = load_keystore(self.settings).certificate
        self._certificate = new
        if old is None:
            return
        if (self.settings.get("ssl.allow.dn.changes") or "false") != "true" and (
            old.subject != new.subject
        ):
            self._certificate = old
            raise TlsConfigError(
                f"listener {self.settings.listener}: the new keystore's certificate names "
                f"{rfc2253(new.subject)}, not {rfc2253(old.subject)} "
                "(set ssl.allow.dn.changes=true to allow it)"
            )
        if (self.settings.get("ssl.allow.san.changes") or "false") != "true" and (
            _sans(old) != _sans(new)
        ):
            self._certificate = old
            raise TlsConfigError(
                f"listener {self.settings.listener}: the new keystore's certificate has other "
                "subject alternative names (set ssl.allow.san.changes=true to allow it)"
            )

    def _swap(self, context: ssl.SSLContext) -> None:
        self._current = context
        self.reloads += 1


def _sans(cert: x509.Certificate) -> set[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    return {str(n.value) for n in ext.value}
