"""Reconcilers: *what* the operator does to make the cluster match a resource.

One module per resource, each a short ordered tuple of named steps with status written last
(Strimzi's ``KafkaReconciler.reconcile()``): ``broker`` (ConfigMap, Service, Pod, the Broker's
status) and ``logvolume`` (the broker's claims and LogVolumes, checked by the pure storage
diff before anything is written). ``context`` is what the steps hand each other. The builders
they apply are pure (``spindle.operator.specs``); all I/O goes through
``spindle.operator.kube`` (and, for Kafka, ``spindle.operator.brokers``). The kopf handlers
only decide *when* a reconciler runs.
"""

from spindle.operator.reconcile.broker import reconcile_broker, refresh_broker
from spindle.operator.reconcile.context import Context, EventSink, Prober

__all__ = ["Context", "EventSink", "Prober", "reconcile_broker", "refresh_broker"]
