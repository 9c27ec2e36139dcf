"""The PersistentVolumeClaim of one of a Broker's volumes (one claim per log directory)."""

from __future__ import annotations

from spindle.operator.specs.broker import BrokerSpec, VolumeSpec
from spindle.operator.specs.meta import Obj, metadata
from spindle.operator.specs.names import LABEL_VOLUME_ID, pvc_name


def build_pvc(broker: BrokerSpec, volume: VolumeSpec) -> Obj:
    """The claim for one volume.

    A claim with ``deleteClaim: false`` deliberately has no owner reference: an owner
    reference is exactly what makes the garbage collector delete the claim with its Broker,
    and such a claim must keep its data for a later broker. It is still found by its labels.
    """
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "volumeMode": "Filesystem",
        "resources": {"requests": {"storage": volume.size}},
    }
    if volume.storage_class is not None:
        spec["storageClassName"] = volume.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(
            broker,
            pvc_name(broker.name, volume.id),
            owned=volume.delete_claim,
            extra={LABEL_VOLUME_ID: str(volume.id)},
        ),
        "spec": spec,
    }
