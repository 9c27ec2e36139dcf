"""Record batch v2: parsing, CRC32C, base-offset rewriting, torn tails."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.records.batch import (
    assign_offsets,
    build_batch,
    offset_parts,
    parse_header,
    valid_prefix,
    validate,
    verify_crc,
)


def test_built_batch_parses_with_its_fields_and_valid_crc() -> None:
    raw = build_batch([b"a", b"bb", None], timestamp_ms=1234, base_offset=7)
    header = parse_header(raw)
    assert (header.base_offset, header.record_count, header.last_offset_delta) == (7, 3, 2)
    assert header.max_timestamp == 1234
    assert header.size == len(raw)
    verify_crc(raw, header)


def test_flipped_payload_bit_fails_crc_as_corrupt_message() -> None:
    raw = bytearray(build_batch([b"hello"]))
    raw[-3] ^= 0x01
    with pytest.raises(KafkaError) as info:
        validate(raw)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE
    assert "CRC32C" in str(info.value)


def test_wrong_magic_and_short_input_are_corrupt_message() -> None:
    raw = bytearray(build_batch([b"x"]))
    raw[16] = 1
    with pytest.raises(KafkaError, match="magic 1"):
        validate(raw)
    with pytest.raises(KafkaError, match="truncated"):
        validate(build_batch([b"x"])[:30])
    with pytest.raises(KafkaError, match="empty"):
        validate(b"")


def test_assigning_offsets_rewrites_only_base_offsets_and_keeps_crcs_valid() -> None:
    raw = build_batch([b"a", b"b"]) + build_batch([b"c"])
    headers = validate(raw)
    out, next_offset = assign_offsets(raw, headers, 100)
    assert next_offset == 103
    rewritten = validate(out)
    assert [h.base_offset for h in rewritten] == [100, 102]
    assert out[8:] != b""
    assert bytes(out[8 : headers[1].position]) == raw[8 : headers[1].position]


@pytest.mark.parametrize("epoch", [None, 7])
def test_offset_parts_write_the_same_bytes_as_assigned_offsets_without_copying(
    epoch: int | None,
) -> None:
    raw = build_batch([b"a", b"b"], partition_leader_epoch=3) + build_batch([b"c"] * 4)
    headers = validate(raw)
    parts, next_offset = offset_parts(raw, headers, 100, epoch)
    expected, expected_next = assign_offsets(raw, headers, 100, epoch)
    assert (b"".join(parts), next_offset) == (bytes(expected), expected_next)
    # The batches' bodies are views of the request's bytes, not copies.
    assert all(isinstance(p, memoryview) and p.obj is raw for p in parts[1::2])
    stored = validate(b"".join(parts))
    assert [h.partition_leader_epoch for h in stored] == ([3, -1] if epoch is None else [7, 7])


@given(
    sizes=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=6),
    cut=st.integers(min_value=0, max_value=10_000),
)
def test_valid_prefix_of_a_torn_record_set_is_exactly_its_whole_batches(
    sizes: list[int], cut: int
) -> None:
    batches = [build_batch([bytes([i]) * 10] * n) for i, n in enumerate(sizes)]
    raw = b"".join(batches)
    cut = min(cut, len(raw))
    boundaries = [0]
    for b in batches:
        boundaries.append(boundaries[-1] + len(b))
    end, headers = valid_prefix(raw[:cut])
    assert end == max(b for b in boundaries if b <= cut)
    assert len(headers) == boundaries.index(end)
