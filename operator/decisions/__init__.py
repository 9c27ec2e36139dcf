"""Pure decisions: given what was observed, what the operator should do next.

Each module is a state machine or a rule over plain data (dicts in, small frozen dataclasses
out): no API calls, no clock reads, no kopf, kubernetes or Kafka client, nothing of
``spindle.operator.kube``, ``brokers`` or ``reconcile`` (import-linter keeps it so). The
reconcilers (``spindle.operator.reconcile``) gather the facts through the ports, ask a
decision, and carry out what it names -- the Strimzi ``KafkaAvailability`` / CloudNativePG
``pkg/specs`` vs ``internal/controller`` split. Builders of objects are ``spindle.operator.specs``.

- ``compare``: does a live object already carry what a builder set (apply-one-way's test);
- ``roll``: keep, create, replace or wait for a broker's Pod (the roller's rule).
"""
