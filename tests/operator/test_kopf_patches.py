"""kopf serves a namespace that only its namespace watch-stream's own listing shows (one
created between kopf's first listing and the watch), and still skips what it skipped."""

from __future__ import annotations

from typing import Any

import spindle.operator  # noqa: F401  (importing the operator installs the fix)
from kopf._cogs.structs import references
from kopf._core.reactor import observation


def _listed(name: str, **metadata: Any) -> Any:
    return {"type": None, "object": {"metadata": {"name": name, **metadata}}}


async def test_a_namespace_seen_only_in_the_watch_streams_listing_is_served() -> None:
    insights = references.Insights()
    await observation.process_discovered_namespace_event(
        raw_event=_listed("op-late"), namespaces=["op-*"], insights=insights
    )
    assert insights.namespaces == {"op-late"}


async def test_listed_namespaces_outside_the_patterns_are_not_served() -> None:
    insights = references.Insights()
    await observation.process_discovered_namespace_event(
        raw_event=_listed("kube-system"), namespaces=["op-*"], insights=insights
    )
    assert insights.namespaces == set()


async def test_watched_events_are_revised_as_kopf_revises_them() -> None:
    insights = references.Insights()
    added = {"type": "ADDED", "object": {"metadata": {"name": "op-new"}}}
    await observation.process_discovered_namespace_event(
        raw_event=added, namespaces=["op-*"], insights=insights
    )
    assert insights.namespaces == {"op-new"}
    deleted = {"type": "DELETED", "object": {"metadata": {"name": "op-new"}}}
    await observation.process_discovered_namespace_event(
        raw_event=deleted, namespaces=["op-*"], insights=insights
    )
    assert insights.namespaces == set()
