"""The dashboard's Kubernetes client connects as the operator's does: in a Pod, as the Pod's
ServiceAccount (token and CA from the kubelet's mount, the API server from
``KUBERNETES_SERVICE_HOST``/``_PORT``), not as ``system:anonymous``.

The service-account directory is faked (a boundary: the kubelet is not here); in the last test
the token in it is a real one for a real ServiceAccount, and the API server is the real one.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import types
from pathlib import Path
from typing import Any

import pytest
from kubernetes.config import incluster_config
from spindle.operator.dashboard.client import LOGVOLUMES, ApiError, AsyncKube
from spindle.operator.kube.client import auth_headers, load_configuration


def _service_account(
    directory: Path, token: str, ca: str = "-----BEGIN CERTIFICATE-----\n"
) -> Path:
    directory.mkdir(exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_text(ca)
    return directory


class _Clock:
    """``datetime`` as the in-cluster loader sees it, with a hand that moves on request."""

    def __init__(self) -> None:
        self.offset = dt.timedelta()
        clock = self

        class _DateTime(dt.datetime):
            @classmethod
            def now(cls, tz: dt.tzinfo | None = None) -> Any:
                return dt.datetime.now(tz) + clock.offset

        self.module = types.SimpleNamespace(datetime=_DateTime, timedelta=dt.timedelta)


def test_in_a_pod_the_dashboard_sends_the_service_account_token_and_trusts_its_ca(
    tmp_path: Path,
) -> None:
    sa = _service_account(tmp_path / "sa", "first-token")
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    configuration = load_configuration(service_account_dir=sa, environ=environ)
    assert configuration.host == "https://10.96.0.1:443"
    assert configuration.ssl_ca_cert == str(sa / "ca.crt")
    assert auth_headers(configuration) == {"authorization": "bearer first-token"}
    assert AsyncKube(configuration)._headers() == {"authorization": "bearer first-token"}


def test_a_rotated_service_account_token_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(incluster_config, "datetime", clock.module)
    sa = _service_account(tmp_path / "sa", "first-token")
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    kube = AsyncKube(load_configuration(service_account_dir=sa, environ=environ))
    assert kube._headers() == {"authorization": "bearer first-token"}
    (sa / "token").write_text("rotated-token")  # the kubelet rewrites the projected token
    clock.offset = dt.timedelta(minutes=2)  # past the loader's one-minute re-read period
    assert kube._headers() == {"authorization": "bearer rotated-token"}


def test_outside_a_pod_the_kubeconfig_is_used(tmp_path: Path, kube: Any) -> None:
    # No KUBERNETES_SERVICE_HOST: not in a Pod, so the kubeconfig's credentials apply.
    sa = _service_account(tmp_path / "sa", "never-used")
    configuration = load_configuration(str(kube.kubeconfig), service_account_dir=sa, environ={})
    assert configuration.host == kube.server
    assert "bearer never-used" not in auth_headers(configuration).values()


def test_with_a_real_service_account_token_the_dashboard_lists_as_that_account(
    tmp_path: Path, kube: Any, demo: Any
) -> None:
    token = demo.token("dash-operator-user")
    ca = (kube.state_dir / "pki" / "ca.crt").read_text()
    sa = _service_account(tmp_path / "sa", token, ca)
    host, port = kube.server.removeprefix("https://").rsplit(":", 1)
    environ = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}

    async def run(namespace: str) -> list[dict[str, Any]]:
        client = AsyncKube(load_configuration(service_account_dir=sa, environ=environ))
        try:
            items, _version = await client.list(LOGVOLUMES, namespace)
            return items
        finally:
            await client.close()

    assert len(asyncio.run(run(demo.namespace))) == 9
    # The account may read its own namespace only: the API server saw who it is.
    with pytest.raises(ApiError) as denied:
        asyncio.run(run("default"))
    assert denied.value.status == 403
    assert f"system:serviceaccount:{demo.namespace}:dash-operator-user" in str(denied.value)
