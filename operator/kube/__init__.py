"""The operator's one door to the Kubernetes API: a JSON client and apply-one-way.

``client`` is a small dicts-in, dicts-out client (``KubeApi``, ``KubeError``); ``resources``
names the resource types, Spindle's own with the group and version of
``spindle.operator.specs.names``; ``apply`` makes a live object match a builder's dict in one
direction (read, compare, create or patch only when different) and says what it did;
``events`` records what was done as core/v1 Events. Nothing here decides *what* an object
should be: that is ``spindle.operator.specs`` (pure) and ``spindle.operator.reconcile``.
"""

from spindle.operator.kube.apply import Outcome, apply_object, differences, is_subset
from spindle.operator.kube.client import KubeApi, KubeError
from spindle.operator.kube.events import post_event
from spindle.operator.kube.resources import (
    BROKERS,
    CLUSTERROLES,
    CONFIGMAPS,
    EVENTS,
    JOBS,
    LOGVOLUMES,
    NODES,
    PERSISTENTVOLUMES,
    PODS,
    PVCS,
    REASSIGNMENTS,
    REBALANCES,
    RESOURCES_BY_KIND,
    ROLEBINDINGS,
    SERVICEACCOUNTS,
    SERVICES,
    Resource,
)

__all__ = [
    "BROKERS",
    "CLUSTERROLES",
    "CONFIGMAPS",
    "EVENTS",
    "JOBS",
    "LOGVOLUMES",
    "NODES",
    "PERSISTENTVOLUMES",
    "PODS",
    "PVCS",
    "REASSIGNMENTS",
    "REBALANCES",
    "RESOURCES_BY_KIND",
    "ROLEBINDINGS",
    "SERVICEACCOUNTS",
    "SERVICES",
    "KubeApi",
    "KubeError",
    "Outcome",
    "Resource",
    "apply_object",
    "differences",
    "is_subset",
    "post_event",
]
