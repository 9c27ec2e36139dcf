"""Time and size retention of one partition's log (Kafka's ``UnifiedLog.deleteOldSegments``
rules): which leading segments ``log.retention.ms`` and ``log.retention.bytes`` delete.

A rule over a :class:`~spindle.broker.storage.log.Log`'s public surface, kept apart from the
log so the log holds only its segments and offsets. Runs under the log's lock (reentrant);
``Log.delete_segments`` never deletes the active segment nor a segment reaching past the high
watermark, and moves the log start offset and the leader-epoch cache with what it deletes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spindle.broker.storage.settings import StorageSettings

if TYPE_CHECKING:
    from spindle.broker.storage.log import Log
    from spindle.broker.storage.segment import Segment


def apply_retention(lg: Log, settings: StorageSettings, now_ms: int) -> int:
    """Delete ``lg``'s segments older than ``log.retention.ms`` (by their largest timestamp),
    then the oldest ones while the log exceeds ``log.retention.bytes``; a compact-only log
    keeps everything (the cleaner owns it). Returns the number of segments deleted."""
    with lg.lock:
        if lg.compact_only:
            return 0
        deleted = 0
        if settings.log_retention_ms >= 0:
            limit = now_ms - settings.log_retention_ms
            deleted += lg.delete_segments(lambda seg, _: seg.max_timestamp < limit)
        if settings.log_retention_bytes >= 0:
            excess = lg.size - settings.log_retention_bytes

            def over(seg: Segment, _: Segment) -> bool:
                nonlocal excess
                if excess - seg.size < 0:
                    return False
                excess -= seg.size
                return True

            deleted += lg.delete_segments(over)
        return deleted
