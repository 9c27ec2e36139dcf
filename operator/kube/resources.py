"""Resource types the operator reads and writes, by API group, version and plural.

Spindle's own kinds take their group and version from ``spindle.operator.specs.names``, the
one place that names them (the kopf handlers and the builders read the same constants).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from spindle.operator.specs.names import GROUP, VERSION


@dataclass(frozen=True)
class Resource:
    """A resource type by API group, version and plural (``""`` group = core).

    ``namespaced=False`` for cluster-scoped kinds (PersistentVolumes, StorageClasses): their
    paths have no namespace, and the client's calls take ``None`` for it.
    """

    group: str
    version: str
    plural: str
    namespaced: bool = True

    def path(
        self, namespace: str | None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The API path of the collection, or of one object (and its subresource)."""
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced:
            if namespace is None:
                raise ValueError(f"{self.plural} are namespaced: a namespace is needed")
            base = f"{base}/namespaces/{quote(namespace)}"
        elif namespace is not None:
            raise ValueError(f"{self.plural} are cluster-scoped: no namespace, got {namespace!r}")
        path = f"{base}/{self.plural}"
        if name is not None:
            path += f"/{quote(name)}"
        if subresource is not None:
            path += f"/{subresource}"
        return path


PODS = Resource("", "v1", "pods")
PVCS = Resource("", "v1", "persistentvolumeclaims")
CONFIGMAPS = Resource("", "v1", "configmaps")
SERVICES = Resource("", "v1", "services")
EVENTS = Resource("", "v1", "events")
PERSISTENTVOLUMES = Resource("", "v1", "persistentvolumes", namespaced=False)
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts")
JOBS = Resource("batch", "v1", "jobs")
ROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings")
CLUSTERROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False)
NODES = Resource("", "v1", "nodes", namespaced=False)
BROKERS = Resource(GROUP, VERSION, "brokers")
LOGVOLUMES = Resource(GROUP, VERSION, "logvolumes")
REASSIGNMENTS = Resource(GROUP, VERSION, "reassignments")
REBALANCES = Resource(GROUP, VERSION, "rebalances")

RESOURCES_BY_KIND = {
    "Pod": PODS,
    "PersistentVolumeClaim": PVCS,
    "ConfigMap": CONFIGMAPS,
    "Service": SERVICES,
    "PersistentVolume": PERSISTENTVOLUMES,
    "ServiceAccount": SERVICEACCOUNTS,
    "Job": JOBS,
    "RoleBinding": ROLEBINDINGS,
    "ClusterRole": CLUSTERROLES,
    "Broker": BROKERS,
    "LogVolume": LOGVOLUMES,
    "Reassignment": REASSIGNMENTS,
    "Rebalance": REBALANCES,
}
