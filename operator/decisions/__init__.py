"""Pure decisions: given what was observed, what the operator should do next.

Each module is a state machine or a rule over plain data (dicts in, small frozen dataclasses
out): no API calls, no clock reads, no kopf, kubernetes or Kafka client, nothing of
``spindle.operator.kube``, ``brokers`` or ``reconcile`` (import-linter keeps it so). The
reconcilers (``spindle.operator.reconcile``) gather the facts through the ports, ask a
decision, and carry out what it names -- the Strimzi ``KafkaAvailability`` / CloudNativePG
``pkg/specs`` vs ``internal/controller`` split. Builders of objects are ``spindle.operator.specs``.

Decisions may read the builders' types and names (``specs.meta.Obj``, ``specs.status.Condition``,
``BrokerSpec``); builders never ask a decision (import-linter: ``decisions`` above ``specs``).

- ``storage_diff``: what a volume edit means, checked before anything is written;
- ``volume_state`` (a directory's state and failure from the evidence) and ``volume_status``
  (the LogVolume's status written from it);
- ``remediation`` (+ ``remediation_settings``): what to do about an offline directory;
- ``drain``: where a draining directory's replicas go, and how far the drain got;
- ``reassignment``: a Reassignment's validity, what to submit, its progress and rollback;
- ``proposal``: a Rebalance's proposal, its batches, and whether it went stale;
- ``release``: a released (and re-declared) volume's status;
- ``roll``: keep, create, replace or wait for a broker's Pod (the roller's rule);
- ``compare``: does a live object already carry what a builder set (apply-one-way's test).
"""
