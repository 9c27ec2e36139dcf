"""Names of replica directories inside a log directory, as Kafka's ``LocalLog`` gives them.

A live replica is ``<topic>-<partition>``; a future replica (a move in progress, KIP-113)
``<topic>-<partition>.<uuid32hex>-future``, one being deleted ``...-delete`` and one the
controller no longer assigns here ``...-stray``. Pure: no I/O here.
"""

from __future__ import annotations

import re
import uuid

from spindle.broker.common.ids import TopicPartition

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"
_SUFFIXED = re.compile(r"^(?P<tp>.+)\.(?P<uuid>[0-9a-f]{32})(?P<kind>-future|-delete|-stray)$")


def partition_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


NAME_MAX = 255
TOPIC_FILE = "partition.topic"
"""Inside a future replica whose directory name had to cut the topic: the full topic name."""
REHOMED_FILE = "rehomed-at"
"""Inside a replica re-created live for one in an offline directory (Spindle): when, in wall
milliseconds. At start-up it wins over another live copy of the partition with an older (or
no) stamp -- the failed directory's, readable again -- which is set aside as ``-stray``."""


def suffixed_dir_name(tp: TopicPartition, suffix: str) -> str:
    """``topic-partition.<uuid32hex><suffix>`` as Kafka names future and deleted replicas,
    with the topic cut so the name fits in 255 bytes (Kafka's ``LocalLog``): a 249-character
    topic would otherwise fail with ENAMETOOLONG and take the directory offline."""
    tail = f"-{tp.partition}.{uuid.uuid4().hex}{suffix}"
    return tp.topic[: NAME_MAX - len(tail)] + tail


def name_is_cut(tp: TopicPartition, name: str) -> bool:
    return not name.startswith(partition_dir_name(tp) + ".")


def parse_dir_name(name: str) -> tuple[TopicPartition, str] | None:
    """(topic-partition, kind) of a replica directory name; kind is ``""`` for a live replica,
    else ``-future``/``-delete``/``-stray``. None for names that are not replica directories."""
    kind = ""
    match = _SUFFIXED.match(name)
    if match:
        name, kind = match.group("tp"), match.group("kind")
    topic, dash, part = name.rpartition("-")
    if not dash or not topic or not part.isdigit():
        return None
    return TopicPartition(topic, int(part)), kind
