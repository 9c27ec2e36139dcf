"""Spindle's Kubernetes operator (kopf): Broker, LogVolume, Reassignment and Rebalance resources.

Importing the package registers the kopf handlers, so ``kopf run -m spindle.operator`` and
``spindle-operator run`` serve the same operator. Builders (``specs``) and the storage diff
(``storage_diff``) are pure; ``reconcile`` holds the ordered steps; ``handlers`` only says
when they run.
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
