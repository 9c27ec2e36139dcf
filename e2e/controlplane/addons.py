"""The cluster add-ons every node-backed cluster gets, as pure builders of Kubernetes objects:
CoreDNS (the Deployment, Service, RBAC and Corefile kubeadm installs, trimmed to one replica)
and the default StorageClass whose volumes the provisioner (``provisioner``) creates."""

from __future__ import annotations

from controlplane.node_config import DNS_SERVICE_INDEX
from controlplane.pki import CLUSTER_DOMAIN, service_ip

#: The StorageClass of real per-PV file systems, the cluster's default class.
STORAGE_CLASS = "spindle-local"
#: The provisioner name written on the class and on the PVs it creates.
PROVISIONER = "spindle.io/local-fs"

Obj = dict[str, object]

COREFILE = f"""\
.:53 {{
    errors
    health {{
        lameduck 5s
    }}
    ready
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    forward . /etc/resolv.conf {{
        max_concurrent 1000
    }}
    cache 30
    loop
    reload
    loadbalance
}}
"""


def storage_class() -> Obj:
    """Volumes bound when a Pod using them is scheduled (as for every node-local volume), removed
    with their claim, and growable by nobody (a file system image has a fixed size)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": False,
    }


def _coredns_rbac() -> list[Obj]:
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "coredns", "namespace": "kube-system"},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:coredns"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["list", "watch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:coredns"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:coredns",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}],
        },
    ]


def _coredns_deployment(image: str) -> Obj:
    labels = {"k8s-app": "kube-dns"}
    container = {
        "name": "coredns",
        "image": image,
        "imagePullPolicy": "Never",
        "args": ["-conf", "/etc/coredns/Corefile"],
        "ports": [
            {"name": "dns", "containerPort": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
        ],
        "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}],
        "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 10},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        },
        "resources": {"requests": {"cpu": "50m", "memory": "70Mi"}, "limits": {"memory": "170Mi"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "coredns", "namespace": "kube-system", "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "coredns",
                    "priorityClassName": "system-cluster-critical",
                    # Upstream resolv.conf is the node's, not the cluster DNS itself.
                    "dnsPolicy": "Default",
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                },
            },
        },
    }


def coredns(image: str) -> list[Obj]:
    """CoreDNS serving ``cluster.local`` from the API (Services, endpoints, Pods) at the address
    the kubelet writes into every Pod's resolv.conf."""
    labels = {"k8s-app": "kube-dns"}
    return [
        *_coredns_rbac(),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "coredns", "namespace": "kube-system"},
            "data": {"Corefile": COREFILE},
        },
        _coredns_deployment(image),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
            "spec": {
                "selector": labels,
                "clusterIP": service_ip(DNS_SERVICE_INDEX),
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                ],
            },
        },
    ]


def cluster_addons(*, coredns_image: str) -> list[Obj]:
    return [storage_class(), *coredns(coredns_image)]
