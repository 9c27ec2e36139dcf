"""Spindle's Kubernetes operator (kopf): Broker, LogVolume, Reassignment and Rebalance resources.

Importing the package registers the kopf handlers, so ``kopf run -m spindle.operator`` and
``spindle-operator run`` serve the same operator. A folder per concern (CloudNativePG's
layout), dependencies pointing one way (import-linter keeps them so):

- ``handlers``: kopf handlers, *when* to reconcile; they only call reconcilers;
  ``volume_handlers``: *when* disks are looked at (the probe loop, PV and health events);
- ``reconcile/``: *what* a reconcile does, one module per resource, ordered steps;
- ``kube/`` (the Kubernetes API: client, apply-one-way, Events) and ``brokers`` (the one door
  to Kafka's admin API): the I/O;
- pure, no I/O: ``specs/`` (builders: dict makers, one module per kind), ``decisions/``
  (state machines: remediation, drain, reassignment progress, proposal validity, volume state,
  storage diff, release, the roll), ``snapshot`` (the planner's snapshot from the brokers'
  answers), ``quantity``;
- ``kopf_patches``: a fix for a kopf start-up race (namespaces created while kopf starts
  watching them were never served).
"""

if __name__ == "operator":
    # Loaded as the standard library's ``operator``: Python was started from the repository root
    # with the working directory first on sys.path. Say so instead of failing obscurely later.
    raise ImportError(
        "the repository's operator/ folder is shadowing the standard library module 'operator' "
        "(Python was started from the repository root). Use the console scripts "
        "(spindle-broker, spindle-operator, spindle-rebalance) or `python -P -m ...`."
    )

from spindle.operator import handlers as handlers
from spindle.operator import kopf_patches as kopf_patches
from spindle.operator import volume_handlers as volume_handlers
