"""A small JSON client for the Kubernetes API: dicts in, dicts out, any resource.

The operator's builders produce plain dicts (``spindle.operator.specs``), so the client speaks
plain dicts too, over the ``kubernetes`` package's authenticated connection (kubeconfig or
in-cluster service account). Patches are JSON merge patches: lists are replaced whole, which
is what "make the owned fields equal to the builder's" needs (strategic merge would keep a
stale owner reference). Synchronous: kopf runs sync handlers in its thread pool.
``namespace`` is ``None`` for cluster-scoped resources (``Resource.namespaced`` is False).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from kubernetes import client, config
from kubernetes.config.incluster_config import InClusterConfigLoader
from spindle.operator.kube.resources import Resource

# Where the kubelet mounts a Pod's ServiceAccount token and the cluster's CA.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def load_configuration(
    kubeconfig: str | None = None,
    *,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
    environ: Mapping[str, str] = os.environ,
) -> client.Configuration:
    """Credentials like kubectl's: ``kubeconfig`` when given; else, in a Pod, the
    ServiceAccount (token and CA under ``service_account_dir``, API server from
    ``KUBERNETES_SERVICE_HOST``/``_PORT``), with the token re-read as the kubelet rotates it;
    else ``$KUBECONFIG``. One loader for the operator's client and the dashboard's."""
    configuration = client.Configuration()
    if kubeconfig is None:
        loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
            token_filename=str(service_account_dir / "token"),
            cert_filename=str(service_account_dir / "ca.crt"),
            environ=environ,
        )
        try:
            loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            pass
        else:
            return configuration
    config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)  # type: ignore[no-untyped-call]
    return configuration


def auth_headers(configuration: client.Configuration) -> dict[str, str]:
    """The HTTP headers that authenticate a request (``Authorization: Bearer ...`` for a
    token; none for a client certificate). Asks the configuration itself, as the
    ``kubernetes`` package's own calls do, so the in-cluster loader's refresh hook runs and a
    rotated token is used; the key the loaders store it under changed between releases."""
    bearer = configuration.auth_settings().get("BearerToken")
    return {bearer["key"]: str(bearer["value"])} if bearer and bearer["value"] else {}


class KubeError(RuntimeError):
    """A non-2xx answer from the API server, with its status code and the server's message."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        message = body
        with contextlib.suppress(ValueError, AttributeError):
            message = json.loads(body).get("message", body)
        super().__init__(f"{method} {path}: HTTP {status}: {message}")
        self.status = status
        self.server_message = message


class KubeApi:
    """Thread-safe (one urllib3 pool) JSON access to the API server."""

    def __init__(self, api_client: client.ApiClient, *, timeout: float = 30.0) -> None:
        self._api = api_client
        self._timeout = timeout

    @classmethod
    def from_environment(cls, *, timeout: float = 30.0) -> KubeApi:
        """Connect like kubectl: in-cluster service account in a Pod, else ``$KUBECONFIG``."""
        return cls(client.ApiClient(load_configuration()), timeout=timeout)

    @classmethod
    def from_kubeconfig(cls, path: str, *, timeout: float = 30.0) -> KubeApi:
        """Connect with an explicit kubeconfig file (tests, scripts)."""
        return cls(client.ApiClient(load_configuration(path)), timeout=timeout)

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        """One API call; returns the decoded JSON answer or raises ``KubeError``."""
        if query:
            path = f"{path}?{urlencode(query)}"
        headers = {"Accept": "application/json", "Content-Type": content_type}
        _method, url, headers, serialized, _post = self._api.param_serialize(
            method=method,
            resource_path=path,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self._api.call_api(
            method, url, header_params=headers, body=serialized, _request_timeout=self._timeout
        )
        data = response.read()  # type: ignore[no-untyped-call]
        text = data.decode() if isinstance(data, bytes) else str(data or "")
        if not 200 <= response.status < 300:
            raise KubeError(method, path, response.status, text)
        return json.loads(text) if text else None

    def get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object, or ``None`` when it does not exist."""
        try:
            result: dict[str, Any] = self.request("GET", resource.path(namespace, name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    def list(
        self, resource: Resource, namespace: str | None, selector: str
    ) -> list[dict[str, Any]]:
        """Objects matching a label selector."""
        answer = self.request("GET", resource.path(namespace), query={"labelSelector": selector})
        items: list[dict[str, Any]] = answer.get("items") or []
        return items

    def create(
        self, resource: Resource, namespace: str | None, body: dict[str, Any]
    ) -> dict[str, Any]:
        result: dict[str, Any] = self.request("POST", resource.path(namespace), body=body)
        return result

    def patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """JSON merge patch (lists replaced whole)."""
        result: dict[str, Any] = self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            body=patch,
            content_type="application/merge-patch+json",
        )
        return result

    def delete(self, resource: Resource, namespace: str | None, name: str) -> bool:
        """Delete in the background (dependents collected by the GC); False if already gone."""
        try:
            self.request(
                "DELETE",
                resource.path(namespace, name),
                body={
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "propagationPolicy": "Background",
                },
            )
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True
