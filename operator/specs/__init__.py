"""Pure builders: a Broker custom resource → the Kubernetes objects it should own.

Everything in this package turns dicts into dicts. No API calls, no clock reads, no
environment, no kopf or kubernetes imports (import-linter keeps it so): the reconcilers feed in
what they read and apply what comes out, so every object the operator creates is unit-tested
by looking at the returned dict (the CloudNativePG ``pkg/specs`` shape). ``build_<thing>``
returns the complete desired object; the apply layer (``spindle.operator.kube``) decides
whether the live object differs.

One module per kind: ``broker`` (the validated custom resource), ``pvc``, ``configmap``,
``service``, ``pod``, ``logvolume``, ``reassignment`` (a drain's and a Rebalance's),
``planner`` (the planner's Job); ``names`` holds the API group/version, labels and the
naming rules, ``meta`` the metadata every owned object carries, ``status`` and
``broker_status`` the conditions and phases written to a Broker's status. The names below are
re-exported so callers write ``specs.build_pod(broker)``.

What to do next from observed state (remediation, drain, reassignment progress, proposal
validity, volume state and status, storage diff, release, the roll) is not built here: those
are the pure state machines of ``spindle.operator.decisions``, which may read this package's
types; nothing here imports a decision.
"""

from spindle.operator.specs.broker import (
    RESERVED_CONFIG,
    BrokerSpec,
    SpecError,
    VolumeSpec,
    log_dirs,
)
from spindle.operator.specs.configmap import build_configmap, server_properties
from spindle.operator.specs.logvolume import build_logvolume
from spindle.operator.specs.meta import Obj, labels, owner_reference, spec_hash
from spindle.operator.specs.names import (
    API_VERSION,
    CONFIG_DIR,
    CONFIG_FILE,
    DATA_ROOT,
    GROUP,
    LABEL_BROKER,
    LABEL_BROKER_ID,
    LABEL_CLUSTER,
    LABEL_VOLUME_ID,
    MANAGED_BY,
    SPEC_HASH_ANNOTATION,
    VERSION,
    logvolume_name,
    mount_path,
    pvc_name,
)
from spindle.operator.specs.pod import build_pod
from spindle.operator.specs.pvc import build_pvc
from spindle.operator.specs.service import build_service
from spindle.operator.specs.status import (
    ONLINE_STATES,
    Condition,
    broker_phase,
    merge_conditions,
    used_percent,
)

__all__ = [
    "API_VERSION",
    "CONFIG_DIR",
    "CONFIG_FILE",
    "DATA_ROOT",
    "GROUP",
    "LABEL_BROKER",
    "LABEL_BROKER_ID",
    "LABEL_CLUSTER",
    "LABEL_VOLUME_ID",
    "MANAGED_BY",
    "ONLINE_STATES",
    "RESERVED_CONFIG",
    "SPEC_HASH_ANNOTATION",
    "VERSION",
    "BrokerSpec",
    "Condition",
    "Obj",
    "SpecError",
    "VolumeSpec",
    "broker_phase",
    "build_configmap",
    "build_logvolume",
    "build_pod",
    "build_pvc",
    "build_service",
    "labels",
    "log_dirs",
    "logvolume_name",
    "merge_conditions",
    "mount_path",
    "owner_reference",
    "pvc_name",
    "server_properties",
    "spec_hash",
    "used_percent",
]
