"""The consumer protocol's subscription bytes (``ConsumerProtocolSubscription``), read only
to learn which topics a group consumes (OffsetDelete refuses to delete offsets of a topic the
group is still subscribed to, and DescribeGroups tools show them). kafka-python ships the schema.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription


def subscription_topics(metadata: bytes) -> set[str] | None:
    """Topics of a consumer-protocol subscription; None if the bytes are not one."""
    if not metadata:
        return set()
    try:
        sub = ConsumerProtocolSubscription.decode(metadata)
    except Exception:  # any malformed client metadata: unknown, not an error of ours
        return None
    return {str(t) for t in sub.topics or []}
