"""Produce request bodies v3-v11, read by hand so that record sets stay views of the frame.

kafka-python's generated decoder copies every ``records`` field out of the request
(``bytes(data[pos:pos+n])``): for produce traffic that is a second copy of every byte the
broker receives, about a megabyte per request and 5-6 % of the broker's CPU on the produce
path (py-spy, ``memmove`` under ``_decode``). Here ``records`` is a ``memoryview`` of the
received frame; the log validates it and writes it with one vectored write, so the bytes are
copied only by the kernel (socket to frame, frame to page cache). The view keeps the frame
alive exactly as long as the request is being handled.

Layout (Kafka ``ProduceRequest.json``; v9+ are flexible: compact strings, arrays and bytes
with length + 1 as an unsigned varint, and a tagged-field section after each struct)::

    transactional_id  nullable string
    acks              int16
    timeout_ms        int32
    topic_data        array of
        name            string
        partition_data  array of
            index           int32
            records         nullable bytes

Field names are kafka-python's, so a handler reads this body as it would the library's.
Anything malformed raises :class:`ProduceRequestError` saying where; the connection is then
closed, as Kafka does for a request it cannot read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .header import HeaderError, read_uvarint

FLEXIBLE_FROM = 9
"""The first flexible version of Produce."""
_ACKS_TIMEOUT = struct.Struct(">hi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class ProduceRequestError(ValueError):
    """A Produce request body that cannot be read."""


@dataclass(slots=True)
class PartitionProduceData:
    index: int
    records: memoryview | None


@dataclass(slots=True)
class TopicProduceData:
    name: str
    partition_data: list[PartitionProduceData]


@dataclass(slots=True)
class ProduceRequestBody:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[TopicProduceData]


class _Reader:
    """A cursor over one body; every read checks the bytes are there."""

    __slots__ = ("data", "flexible", "pos")

    def __init__(self, data: memoryview, flexible: bool) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def need(self, n: int, what: str) -> int:
        pos = self.pos
        if n < 0 or pos + n > len(self.data):
            raise ProduceRequestError(
                f"{what} of {n} bytes at byte {pos} runs past the end of the "
                f"{len(self.data)}-byte body"
            )
        self.pos = pos + n
        return pos

    def uvarint(self, what: str) -> int:
        try:
            value, self.pos = read_uvarint(self.data, self.pos)
        except HeaderError as exc:
            raise ProduceRequestError(f"{what}: {exc}") from None
        return value

    def int32(self, what: str) -> int:
        return int(_INT32.unpack_from(self.data, self.need(4, what))[0])

    def length(self, what: str, *, int16: bool = False) -> int:
        """A string's (``int16``), array's or bytes' length; -1 = null."""
        if self.flexible:
            return self.uvarint(what) - 1
        if int16:
            return int(_INT16.unpack_from(self.data, self.need(2, what))[0])
        return self.int32(what)

    def string(self, what: str, *, nullable: bool = False) -> str | None:
        n = self.length(f"{what} length", int16=True)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise ProduceRequestError(f"{what} has length {n}")
        pos = self.need(n, what)
        try:
            return str(self.data[pos : pos + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProduceRequestError(f"{what} is not UTF-8: {exc}") from None

    def array(self, what: str) -> int:
        n = self.length(f"{what} length")
        if n < 0:
            raise ProduceRequestError(f"{what} is null (length {n}); it may not be")
        return n

    def records(self, what: str) -> memoryview | None:
        n = self.length(f"{what} length")
        if n < 0:
            if n == -1:
                return None
            raise ProduceRequestError(f"{what} has length {n}")
        pos = self.need(n, what)
        return self.data[pos : pos + n]

    def tagged_fields(self, what: str) -> None:
        """Skip a tagged-field section: Produce v9-v11 defines no tags, unknown ones are
        ignored (as Kafka does)."""
        if not self.flexible:
            return
        for _ in range(self.uvarint(f"{what} tag count")):
            self.uvarint(f"{what} tag")
            self.need(self.uvarint(f"{what} tag size"), f"{what} tagged field")


def decode_produce_request(data: memoryview, version: int) -> ProduceRequestBody:
    """Read a Produce body of ``version`` (3-11) from ``data``; ``records`` are views of it."""
    r = _Reader(data, version >= FLEXIBLE_FROM)
    transactional_id = r.string("transactional_id", nullable=True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(data, r.need(_ACKS_TIMEOUT.size, "acks"))
    topics = []
    for t in range(r.array("topic_data")):
        name = r.string(f"topic_data[{t}].name")
        assert name is not None
        parts = []
        for p in range(r.array(f"topic_data[{t}].partition_data")):
            where = f"topic_data[{t}].partition_data[{p}]"
            index = r.int32(f"{where}.index")
            parts.append(PartitionProduceData(index, r.records(f"{where}.records")))
            r.tagged_fields(where)
        topics.append(TopicProduceData(name, parts))
        r.tagged_fields(f"topic_data[{t}]")
    r.tagged_fields("request")
    return ProduceRequestBody(transactional_id, int(acks), int(timeout_ms), topics)
