"""The operator's dashboard: every disk at a glance, proposals move by move, approve or stop.

Served by the operator process (aiohttp, on kopf's event loop) from what the Kubernetes API
shows -- Broker, LogVolume, Reassignment and Rebalance objects and their Events, kept current by
watches -- never from broker internals. Anything that changes state is one merge patch on one
of those objects, made only for a user whose token the API server accepts (TokenReview) and who
may patch that object (SubjectAccessReview), CSRF-protected, and recorded as an Event naming
the user.

Modules: ``client`` (async API access), ``store`` (watched objects), ``views``/``proposals``
(pure view models; the JSON endpoints return them), ``auth``, ``actions``, ``api`` (JSON and
server-sent events), ``pages`` (templates), ``app`` (the aiohttp application, ``start``).
"""

from spindle.operator.dashboard.app import Running, create_app, start
from spindle.operator.dashboard.settings import DashboardSettings, parse_listen

__all__ = ["DashboardSettings", "Running", "create_app", "parse_listen", "start"]
