"""A fix for kopf's namespace observation, applied when the operator package is imported.

With namespace patterns (``--namespace 'op-*'``) kopf (up to 1.45.2, the newest) lists the
namespaces once, then starts a watch-stream on them whose own first step is a second listing.
That second listing's namespaces arrive as ``type=None`` events, which kopf's
``process_discovered_namespace_event`` drops as already known from the first. A namespace
created between the two listings is in neither the first listing nor the watch (which
starts at the second listing's resourceVersion), so kopf never serves it — until the
namespace object itself changes, which in practice is when it is deleted. kopf reports
healthy before either listing, so "create a namespace as soon as the operator is up" hits the
gap: the session operator's first test once waited out its whole 60 s for exactly this, and
against the local control plane namespaces created within a few milliseconds of kopf's
namespace watch starting were never served (reproduced in 2 of 3 starts).

The fix: a listed namespace that matches a pattern and is not served yet is revised like a
watched one (kopf's own ``revise_namespaces``), so the second listing fills the gap. Listed
namespaces kopf already serves, or that match no pattern, are still skipped, as kopf does.
``tests/operator/test_kopf_patches.py`` checks it against the installed kopf.
"""

from __future__ import annotations

import logging
from typing import Any

from kopf._cogs.structs import bodies, references
from kopf._core.reactor import observation

logger = logging.getLogger(__name__)


async def process_discovered_namespace_event(
    *,
    raw_event: bodies.RawEvent,
    namespaces: Any,
    insights: references.Insights,
    **_: Any,
) -> None:
    """kopf's processor of namespace watch events, listing events included."""
    if raw_event["type"] is None:
        name = references.NamespaceName(raw_event["object"]["metadata"]["name"])
        matched = any(references.match_namespace(name, pattern) for pattern in namespaces)
        if name in insights.namespaces or not matched:
            return
        logger.info("serving namespace %s, created while kopf started watching namespaces", name)
    async with insights.revised:
        observation.revise_namespaces(
            raw_events=[raw_event], insights=insights, namespaces=namespaces
        )
        insights.revised.notify_all()


def apply() -> None:
    """Install the fix (idempotent). kopf looks the processor up when it starts observing
    namespaces, so this must run before ``kopf.run`` (importing the package does it)."""
    observation.process_discovered_namespace_event = process_discovered_namespace_event


apply()
