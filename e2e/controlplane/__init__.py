"""A real local Kubernetes cluster for tests and the main job: the control plane (etcd,
kube-apiserver, kube-controller-manager) and optionally a node (kube-scheduler, containerd, a
kubelet, kube-proxy, CoreDNS, a StorageClass of real per-PV file systems).

The binaries are built from Go modules by ``scripts/install.d/``; this package only starts,
waits for and stops them. Nothing here mocks the API server: operator tests need the real
server's schema validation, CEL, watches and garbage collection. Modules: ``local`` (the
cluster), ``pki``, ``processes``, ``readiness``, ``binaries``; the node: ``node``,
``node_config``, ``network``, ``cleanup``, ``addons``, ``images``, ``volumes``, ``provisioner``.
"""

from controlplane.binaries import Binaries, ControlPlaneError, NodeBinaries
from controlplane.local import LocalControlPlane, stop_recorded_cluster
from controlplane.processes import stop_process_group

__all__ = [
    "Binaries",
    "ControlPlaneError",
    "LocalControlPlane",
    "NodeBinaries",
    "stop_process_group",
    "stop_recorded_cluster",
]
