"""Reconcilers: *what* the operator does to make the cluster match a resource.

One module per resource, each a short ordered tuple of named steps with status written last
(Strimzi's ``KafkaReconciler.reconcile()``): ``broker`` (the Broker: ConfigMap, Service, Pod,
its status), ``reassignment`` (a Reassignment) and ``rebalance`` (a Rebalance). The Broker's
steps that are a concern of their own have a module each: ``logvolume`` (claims and
LogVolumes, checked by the pure storage diff before anything is written), ``release``,
``drain``, ``remediation`` and ``roller`` (the one step that restarts a broker's Pod).
``context`` is what the steps hand each other.

Reconcilers join the three kinds of parts and nothing else does: they feed what the ports read
to the pure decisions (``spindle.operator.decisions``), apply what the pure builders
(``spindle.operator.specs``) make, and do all I/O through the ports --
``spindle.operator.kube``, ``spindle.operator.brokers`` (Kafka) and the planner. The kopf
handlers only decide *when* a reconciler runs; ``spindle.operator.wiring`` hands them the
ports.
"""

from spindle.operator.reconcile.broker import reconcile_broker, refresh_broker
from spindle.operator.reconcile.context import Context, EventSink, Prober

__all__ = ["Context", "EventSink", "Prober", "reconcile_broker", "refresh_broker"]
