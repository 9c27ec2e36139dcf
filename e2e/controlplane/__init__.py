"""A real local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager) for tests.

The binaries are built from Go modules by ``scripts/install.d/10-controlplane.sh``; this package
only starts, waits for and stops them (``local``). Nothing here mocks the API server: operator
tests need the real server's schema validation, CEL, watches and garbage collection.
"""

from controlplane.local import Binaries, ControlPlaneError, LocalControlPlane, stop_process_group

__all__ = ["Binaries", "ControlPlaneError", "LocalControlPlane", "stop_process_group"]
