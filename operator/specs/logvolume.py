"""The LogVolume of one of a Broker's volumes. Its status (what the operator sees of the
directory) is ``spindle.operator.decisions.volume_status``."""

from __future__ import annotations

from spindle.operator.specs.broker import BrokerSpec, VolumeSpec
from spindle.operator.specs.meta import Obj, metadata
from spindle.operator.specs.names import API_VERSION, LABEL_VOLUME_ID, logvolume_name


def build_logvolume(broker: BrokerSpec, volume: VolumeSpec) -> Obj:
    """The LogVolume for one volume. ``spec.desiredState`` is the user's and is not set here:
    the CRD defaults it to Active on creation and the operator never overwrites it."""
    return {
        "apiVersion": API_VERSION,
        "kind": "LogVolume",
        "metadata": metadata(
            broker,
            logvolume_name(broker.name, volume.id),
            extra={LABEL_VOLUME_ID: str(volume.id)},
        ),
        "spec": {"broker": broker.name, "brokerId": broker.broker_id, "volumeId": volume.id},
    }
