"""Names that are part of the contract with users, with the CRDs and with later issues.

The one place for Spindle's API group and version (the kopf handlers, the API client's
resource paths and the builders' ``apiVersion`` all read them here) and for the labels,
annotations and object names the operator writes:

* PVC ``data-<id>-<broker>``, mounted at ``/var/lib/spindle/data-<id>``;
* Pod, ConfigMap and Service share the Broker's name (one broker, one Pod: a StatefulSet would
  let the broker's disks outlive its identity, which JBOD remediation cannot allow);
* LogVolume ``<broker>-data-<id>``.
"""

from __future__ import annotations

GROUP = "spindle.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
DATA_ROOT = "/var/lib/spindle"
CONFIG_DIR = "/etc/spindle"
CONFIG_FILE = "server.properties"
MANAGED_BY = "spindle-operator"
SPEC_HASH_ANNOTATION = "spindle.io/spec-hash"
LABEL_BROKER = "spindle.io/broker"
LABEL_BROKER_ID = "spindle.io/broker-id"
LABEL_CLUSTER = "spindle.io/cluster"
LABEL_VOLUME_ID = "spindle.io/volume-id"
#: Label on a drain's Reassignment: the LogVolume it empties.
DRAIN_LABEL = "spindle.io/drains"
#: Label on a kept claim and on the LogVolume of a released volume: no longer the broker's
#: (``kubectl get pvc,slv -l spindle.io/released``; ``decisions.release``).
LABEL_RELEASED = "spindle.io/released"


def pvc_name(broker: str, volume_id: int) -> str:
    """``data-<id>-<broker>``: the claim name users see in ``kubectl get pvc``."""
    return f"data-{volume_id}-{broker}"


def logvolume_name(broker: str, volume_id: int) -> str:
    """``<broker>-data-<id>``: sorts a broker's LogVolumes together in ``kubectl get``."""
    return f"{broker}-data-{volume_id}"


def mount_path(volume_id: int) -> str:
    """Where volume ``id`` is mounted in the broker container; one entry of ``log.dirs``."""
    return f"{DATA_ROOT}/data-{volume_id}"
