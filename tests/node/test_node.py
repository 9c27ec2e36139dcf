"""The node: Ready with the pinned components, runs Pods from a locally built image, and its Pods
reach each other, the API server and Services by name; the host reaches a NodePort."""

from __future__ import annotations

import ipaddress
import json
import urllib.request

from controlplane import LocalControlPlane

from .kit import Kit


def test_node_is_ready_with_the_pinned_kubelet_and_containerd(
    node_cluster: LocalControlPlane,
) -> None:
    layout = node_cluster.node_layout
    assert layout is not None
    body = json.loads(node_cluster.kubectl("get", "node", layout.name, "-o", "json").stdout)
    ready = {c["type"]: c["status"] for c in body["status"]["conditions"]}["Ready"]
    assert ready == "True"
    info = body["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.36.3"
    assert info["containerRuntimeVersion"] == "containerd://2.3.7"
    addresses = {a["type"]: a["address"] for a in body["status"]["addresses"]}
    assert addresses["InternalIP"] == layout.net.node_ip


def test_pod_from_the_locally_built_image_runs_on_the_pod_network(kit: Kit) -> None:
    kit.apply(kit.pod("hello", "echo hello from $(hostname); sleep 3600"))
    pod = kit.wait_running("hello")
    assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(
        kit.kube.node_layout.net.pod_cidr  # type: ignore[union-attr]
    )
    # kubectl logs goes API server -> kubelet (by InternalIP, with a client certificate).
    assert kit.wait_for(lambda: "hello from hello" in kit.logs("hello"), what="the Pod's log")


def test_pods_reach_the_api_server_and_services_by_name(kit: Kit) -> None:
    kit.apply(
        kit.pod(
            "web",
            "mkdir -p /tmp/www && echo served > /tmp/www/index.html && "
            "httpd -f -p 8080 -h /tmp/www",
        ),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )
    kit.wait_running("web")
    # busybox's nc resolves names through the Pod's resolv.conf (cluster DNS); its wget
    # crashes resolving names in a libc-less image, so HTTP is spoken through nc.
    script = (
        "until printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 web 80 > /tmp/out "
        "&& grep -q served /tmp/out; do sleep 1; done; echo web-reachable; "
        # The API server through the kubernetes Service, by name: its TLS port accepts.
        "until echo | nc -w 2 kubernetes.default.svc 443; do sleep 1; done; echo api-reachable; "
        "sleep 3600"
    )
    kit.apply(kit.pod("client", script))
    kit.wait_for(
        lambda: kit.logs("client").split() == ["web-reachable", "api-reachable"],
        what="the client Pod to reach web and the API server by name",
    )


def test_host_reaches_a_pod_through_a_node_port(kit: Kit) -> None:
    kit.apply(
        kit.pod(
            "nodeport",
            "mkdir -p /tmp/www && echo from-the-pod > /tmp/www/index.html && "
            "httpd -f -p 8080 -h /tmp/www",
        ),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "nodeport"},
            "spec": {
                "type": "NodePort",
                "selector": {"app": "nodeport"},
                "ports": [{"port": 80, "targetPort": 8080}],
            },
        },
    )
    kit.wait_running("nodeport")
    port = kit.get("service", "nodeport")["spec"]["ports"][0]["nodePort"]
    node_ip = kit.kube.node_layout.net.node_ip  # type: ignore[union-attr]

    def fetch() -> str | None:
        try:
            with urllib.request.urlopen(f"http://{node_ip}:{port}/", timeout=3) as response:
                return str(response.read().decode())
        except OSError:
            return None

    assert kit.wait_for(fetch, what=f"{node_ip}:{port} from the host").strip() == "from-the-pod"
