"""Fetch response bodies v4-v12, written by hand as the pieces of one vectored write.

A fetch answer is a few hundred bytes of offsets and lengths around megabytes of record sets
that the connection sends from the segment files (``sendfile``) or from memory. kafka-python's
schema encoder can only write a whole body into one buffer: every record set was swapped for
a marker, the body encoded through the schema's objects (a ``DataContainer`` per partition)
and split again at the markers. Profiled with one consumer reading a 4-partition topic
(py-spy, samples holding the GIL), building and encoding the answer was a quarter of the
broker's Python time per fetch -- more than reading the log. Here the small fields are packed
straight into bytes, and each large record set becomes a piece of its own, never copied.

Layout (Kafka ``FetchResponse.json``; v12 is flexible: compact strings, arrays and bytes with
length + 1 as an unsigned varint, and a tagged-field section after each struct)::

    throttle_time_ms        int32 (v1+)
    error_code              int16 (v7+)
    session_id              int32 (v7+)
    responses               array of
        topic                   string
        partitions              array of
            partition_index         int32
            error_code              int16
            high_watermark          int64
            last_stable_offset      int64 (v4+)
            log_start_offset        int64 (v5+)
            aborted_transactions    nullable array of (producer_id int64, first_offset int64)
            preferred_read_replica  int32 (v11+)
            records                 nullable bytes
            tagged (v12+): 0 diverging_epoch (epoch int32, end_offset int64),
                           1 current_leader (leader_id int32, leader_epoch int32),
                           2 snapshot_id (end_offset int64, epoch int32)

The body is the handler's plain dict with the schema's snake_case names, as for every other
API; fields left out take Kafka's defaults. tests/broker/protocol hold the bytes against
kafka-python's encoder for every version.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .header import write_uvarint

FLEXIBLE_FROM = 12
"""The first flexible version of Fetch."""
ZERO_COPY_MIN_BYTES = 4096
"""Record sets in memory at least this large are pieces of their own instead of copied."""


class SplicedBlob(Protocol):
    """A record set the connection sends itself (e.g. a file region sent with sendfile): the
    encoder only needs its length. Marked by a true ``is_spliced_blob`` attribute."""

    is_spliced_blob: bool

    def __len__(self) -> int: ...


Piece = bytes | memoryview | SplicedBlob
"""One piece of an encoded answer: bytes, or a record set sent as it is."""

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I16_I32 = struct.Struct(">hi")
_I64_I64 = struct.Struct(">qq")
_HEAD_V4 = struct.Struct(">ihqq")
_HEAD_V5 = struct.Struct(">ihqqq")
_EPOCH_END = struct.Struct(">iqB")  # epoch, end_offset, no tagged fields
_LEADER = struct.Struct(">iiB")  # leader_id, leader_epoch, no tagged fields
_SNAPSHOT = struct.Struct(">qiB")  # end_offset, epoch, no tagged fields

_TAGGED: Sequence[tuple[int, str, struct.Struct, tuple[str, str]]] = (
    (0, "diverging_epoch", _EPOCH_END, ("epoch", "end_offset")),
    (1, "current_leader", _LEADER, ("leader_id", "leader_epoch")),
    (2, "snapshot_id", _SNAPSHOT, ("end_offset", "epoch")),
)
"""A partition's tagged fields (v12+), in tag order: tag, name, layout, field names."""


def _length(out: bytearray, n: int, flexible: bool) -> None:
    """An array's or bytes' length (-1 = null)."""
    out += write_uvarint(n + 1) if flexible else _I32.pack(n)


def _string(out: bytearray, value: str, flexible: bool) -> None:
    raw = value.encode()
    out += write_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))
    out += raw


def _tagged_fields(out: bytearray, p: Mapping[str, Any]) -> None:
    """A partition's tagged-field section: the tagged structs the handler set."""
    present = [t for t in _TAGGED if p.get(t[1]) is not None]
    out += write_uvarint(len(present))
    for tag, name, layout, (first, second) in present:
        value = p[name]
        out += write_uvarint(tag)
        out += write_uvarint(layout.size)
        out += layout.pack(value.get(first, -1), value.get(second, -1), 0)


def encode_fetch_response(body: Mapping[str, Any], version: int) -> tuple[int, list[Piece]]:
    """The Fetch body of ``version`` (4-12) as pieces for a vectored write, and their total
    size. Record sets of :data:`ZERO_COPY_MIN_BYTES` or more, and every :class:`SplicedBlob`,
    are pieces of their own (the caller sends them); the rest is packed into bytes."""
    flexible = version >= FLEXIBLE_FROM
    pieces: list[Piece] = []
    out = bytearray()
    if version >= 1:
        out += _I32.pack(body.get("throttle_time_ms", 0))
    if version >= 7:
        out += _I16_I32.pack(body.get("error_code", 0), body.get("session_id", 0))
    responses = body.get("responses", ())
    _length(out, len(responses), flexible)
    for t in responses:
        _string(out, t["topic"], flexible)
        partitions = t.get("partitions", ())
        _length(out, len(partitions), flexible)
        for p in partitions:
            out = _partition(out, pieces, p, version)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    pieces.append(bytes(out))
    return sum(len(piece) for piece in pieces), pieces


def _partition(
    out: bytearray, pieces: list[Piece], p: Mapping[str, Any], version: int
) -> bytearray:
    """Write one partition's answer after ``out``; returns the buffer to go on with (a new
    one once a record set became a piece of its own, after ``out``)."""
    flexible = version >= FLEXIBLE_FROM
    index, error = p["partition_index"], p.get("error_code", 0)
    hw, lso = p.get("high_watermark", 0), p.get("last_stable_offset", -1)
    if version >= 5:
        out += _HEAD_V5.pack(index, error, hw, lso, p.get("log_start_offset", -1))
    else:
        out += _HEAD_V4.pack(index, error, hw, lso)
    aborted = p.get("aborted_transactions", ())  # left out: empty; None: null
    if aborted is None:
        _length(out, -1, flexible)
    else:
        _length(out, len(aborted), flexible)
        for a in aborted:
            out += _I64_I64.pack(a["producer_id"], a["first_offset"])
            if flexible:
                out.append(0)
    if version >= 11:
        out += _I32.pack(p.get("preferred_read_replica", -1))
    records = p.get("records")
    if records is None:
        _length(out, -1, flexible)
    else:
        _length(out, len(records), flexible)
        if isinstance(records, bytes | memoryview) and len(records) < ZERO_COPY_MIN_BYTES:
            out += records
        else:
            pieces += [bytes(out), records]
            out = bytearray()
    if flexible:
        _tagged_fields(out, p)
    return out
