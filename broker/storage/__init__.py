"""The part of the broker that owns disks: log directories, segments, partition logs,
the log manager, the single disk-failure channel and the replica mover (KIP-112, KIP-113, KIP-858).

Synchronous and thread-safe (per-partition locks, mover threads); no asyncio here, so the
protocol layer calls it from an executor. Errors surface as ``KafkaError``/``KafkaStorageError``
carrying Kafka's error codes, which the protocol layer returns unchanged.
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
