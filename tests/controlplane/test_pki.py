"""The generated certificates say what the API server's authenticator and Pods rely on."""

from __future__ import annotations

import datetime as dt
import ipaddress

import pytest
from controlplane.pki import api_server_hosts, build_kubeconfig, make_ca, make_leaf
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_admin_client_certificate_puts_the_user_in_system_masters() -> None:
    ca = make_ca(now=NOW)
    admin = make_leaf(ca, common_name="alice", organization="system:masters", client=True, now=NOW)
    cert = x509.load_pem_x509_certificate(admin.cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == (
        "system:masters"
    )
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert))


def test_serving_certificate_covers_loopback_and_the_in_cluster_service_names() -> None:
    ca = make_ca(now=NOW)
    server = make_leaf(ca, common_name="kube-apiserver", server_hosts=api_server_hosts(), now=NOW)
    cert = x509.load_pem_x509_certificate(server.cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    # The `kubernetes` Service takes the first address of the service range.
    assert ipaddress.ip_address("10.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc.cluster.local" in sans.get_values_for_type(x509.DNSName)
    assert cert.not_valid_before_utc < NOW < cert.not_valid_after_utc


def test_certificate_for_neither_server_nor_client_is_refused() -> None:
    with pytest.raises(ValueError, match="server, a client or both"):
        make_leaf(make_ca(now=NOW), common_name="nobody", now=NOW)


def test_kubeconfig_inlines_the_ca_and_client_credentials() -> None:
    ca = make_ca(now=NOW)
    admin = make_leaf(ca, common_name="alice", client=True, now=NOW)
    config = build_kubeconfig(
        server="https://127.0.0.1:6443", ca_cert=ca.cert, user="alice", client=admin
    )
    assert config["current-context"] == "spindle-local"
    (cluster,) = config["clusters"]  # type: ignore[misc]
    assert cluster["cluster"]["server"] == "https://127.0.0.1:6443"
    assert cluster["cluster"]["certificate-authority-data"]
