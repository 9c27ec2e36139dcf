"""Kafka's text form of a UUID (``org.apache.kafka.common.Uuid``): 16 bytes, URL-safe base64,
no padding (22 characters). Used for ``directory.id`` in ``meta.properties``, directory ids in
the cluster metadata, topic ids and the cluster id: the one codec every layer uses.
"""

from __future__ import annotations

import base64
import uuid

RESERVED_LOW_LIMIT = 100
"""Ids with the high 64 bits 0 and the low 64 bits below this are reserved (KIP-858:
UNASSIGNED = 0, LOST = 1, MIGRATING = 2, …) and never name a real directory."""


def to_kafka_str(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def from_kafka_str(text: str) -> uuid.UUID:
    """Parse Kafka's form; ``ValueError`` naming the text if it is not 16 base64 bytes."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{text!r} is not a Kafka UUID (URL-safe base64): {exc}") from None
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a Kafka UUID: decodes to {len(raw)} bytes, not 16")
    return uuid.UUID(bytes=raw)


def is_reserved(value: uuid.UUID) -> bool:
    return (value.int >> 64) == 0 and (value.int & ((1 << 64) - 1)) < RESERVED_LOW_LIMIT


def random_directory_id() -> uuid.UUID:
    """A fresh, non-reserved directory id."""
    while True:
        candidate = uuid.uuid4()
        if not is_reserved(candidate):
            return candidate


UNASSIGNED_DIR = to_kafka_str(uuid.UUID(int=0))
"""Kafka's ``DirectoryId.UNASSIGNED``: the broker may place the replica in any dir."""
LOST_DIR = to_kafka_str(uuid.UUID(int=1))
"""Kafka's ``DirectoryId.LOST``: the replica's directory is offline."""
