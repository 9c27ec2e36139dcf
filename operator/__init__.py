"""Spindle's Kubernetes operator (kopf): Broker, LogVolume, Reassignment and Rebalance resources.

Importing the package registers the kopf handlers, so ``kopf run -m spindle.operator`` and
``spindle-operator run`` serve the same operator. Builders (``specs``) and the storage diff
(``storage_diff``) are pure; ``reconcile`` holds the ordered steps; ``handlers`` only says
when they run.
"""

from spindle.operator import handlers as handlers
