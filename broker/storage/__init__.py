"""The part of the broker that owns disks (KIP-112, KIP-113, KIP-858), split as Kafka splits it:

- ``logdir``: one configured directory (``meta.properties``, lock, clean-shutdown marker);
- ``segment``, ``log``: one segment's files, one partition's log; ``packed_index``: a segment's
  indexes as file bytes; ``names``: replica dir names;
- ``manager``: the LogManager (every directory and replica, placement, moves, failures);
- ``loader``: start-up loading and recovery; ``housekeeping``: checkpoints, retention, deletes;
- ``failure``: the one failure channel; ``mover``: the replica mover; ``throttle``;
  ``priority``: the movers' threads copy at a lower CPU and I/O priority than the event loop;
  ``writeback``: the mover starts the write-back of what it copied at once;
- ``descriptions``: DescribeLogDirs data and the placement rule; ``file_range``: zero-copy reads.

Synchronous, thread-safe (partition locks, the manager lock) and free of asyncio (an
import-linter contract). Its own threads do the long work: movers, the deleter, housekeeping
and the failure handler. The broker calls it directly on its event loop for appends, reads and
metadata-sized work, which touch the page cache only and keep each connection's order without
a thread hop; opening and closing the LogManager (recovery, flushes) go through
``asyncio.to_thread``. Errors surface as ``KafkaError``/``KafkaStorageError`` carrying Kafka's
error codes, which the request handlers return unchanged.
"""

from spindle.broker.storage.descriptions import (
    LogDirDescription,
    MoveStatus,
    PartitionDescription,
)
from spindle.broker.storage.failure import LogDirFailureChannel
from spindle.broker.storage.file_range import FileRange, ReadSlice
from spindle.broker.storage.log import AppendResult, Log
from spindle.broker.storage.logdir import StorageStartupError
from spindle.broker.storage.manager import LogManager
from spindle.broker.storage.settings import StorageSettings

__all__ = [
    "AppendResult",
    "FileRange",
    "Log",
    "LogDirDescription",
    "LogDirFailureChannel",
    "LogManager",
    "MoveStatus",
    "PartitionDescription",
    "ReadSlice",
    "StorageSettings",
    "StorageStartupError",
]
