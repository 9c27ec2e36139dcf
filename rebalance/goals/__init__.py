"""The planner's soft goals by name: one vocabulary for the greedy, the report, the
reachability check and the summary JSON.

The names are the keys the summary has always used (``goalStatus``, ``balance``, ``unmet``),
so operators' tooling and pinned plans keep reading the same bytes; code says
``BROKER_BYTES`` rather than repeating ``"brokerUtilisation"`` so a typo is a NameError, not
a goal that silently never matches.
"""

from __future__ import annotations

#: Each broker's bytes over its capacity, within the band around the cluster mean.
BROKER_BYTES = "brokerUtilisation"
#: Each Active directory's bytes over its capacity, within the band around its broker's mean.
DISK_BYTES = "diskUtilisationOverBrokerMean"
#: Replicas per broker, within the band around the mean.
REPLICAS = "replicas"
#: Leaders per broker, within the band around the mean.
LEADERS = "leaders"

#: In the order the summary lists them.
SOFT_GOALS = (BROKER_BYTES, DISK_BYTES, REPLICAS, LEADERS)
