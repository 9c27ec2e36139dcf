"""Spindle's Kubernetes operator (kopf): Broker, LogVolume, Reassignment and Rebalance resources.

Importing the package registers the kopf handlers, so ``kopf run -m spindle.operator`` and
``spindle-operator run`` serve the same operator. A folder per concern (CloudNativePG's
layout), dependencies pointing one way (import-linter keeps them so):

- ``handlers``: kopf handlers, *when* to reconcile; they only call reconcilers (the kinds
  passed until final are a registry keyed by kind, ``handlers.PASS_KINDS``);
  ``volume_handlers``: *when* disks are looked at (the probe loop, PV and health events);
- ``wiring``: the composition root, the one place the ports and the shared state are made;
- ``reconcile/``: *what* a reconcile does, one module per resource, ordered steps; the only
  code that joins builders, decisions and ports;
- ports, the I/O: ``kube/`` (the Kubernetes API: client, apply-one-way, Events), ``brokers``
  (the one pooled Kafka admin client), ``registry`` (directory ids from the brokers'
  registrations, by the contract ``spindle.broker.common.registration``), the planner;
- pure, no I/O: ``specs/`` (builders: dict makers, one module per kind), ``decisions/``
  (state machines: remediation, drain, reassignment progress, proposal validity, volume state,
  storage diff, release, the roll), ``snapshot`` (the planner's snapshot from the brokers'
  answers), ``quantity``;
- ``kopf_patches``: a fix for a kopf start-up race (namespaces created while kopf starts
  watching them were never served).

A newcomer's map (the one or two files to touch):

- *add a reaction to a volume event*: the decision in ``decisions/volume_state.py`` (a new
  failure source) or ``decisions/remediation.py`` (what to do about it), and, when the event
  is a new kind of Kubernetes object, its kopf handler in ``volume_handlers.py``;
- *add a custom resource*: its reconciler ``reconcile/<kind>.py`` (ordered steps, status last)
  and one ``PassKind`` entry in ``handlers.PASS_KINDS`` (plus its CRD in ``crds/`` and its
  builders in ``specs/``, its decisions in ``decisions/``);
- *change how brokers are restarted*: ``decisions/roll.py`` (the rule) and
  ``reconcile/roller.py`` (the one step that deletes a broker Pod).
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
