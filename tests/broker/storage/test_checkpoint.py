"""Checkpoint files: Kafka's text format, atomic replacement, bad files are I/O errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spindle.broker.common.ids import TopicPartition
from spindle.broker.storage.checkpoint import (
    CheckpointFormatError,
    format_checkpoint,
    parse_checkpoint,
    read_checkpoint,
    write_checkpoint,
)


def test_checkpoint_file_is_kafkas_text_format(tmp_path: Path) -> None:
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    write_checkpoint(path, {TopicPartition("b", 1): 7, TopicPartition("a", 0): 12})
    assert Path(path).read_text() == "0\n2\na 0 12\nb 1 7\n"
    assert not os.path.exists(path + ".tmp")
    assert read_checkpoint(path) == {TopicPartition("a", 0): 12, TopicPartition("b", 1): 7}


def test_missing_checkpoint_reads_as_empty(tmp_path: Path) -> None:
    assert read_checkpoint(str(tmp_path / "nope")) == {}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1\n0\n", "version"),
        ("0\n2\na 0 1\n", "declares 2"),
        ("0\n1\na zero 1\n", "malformed"),
        ("0\n", "truncated"),
    ],
)
def test_bad_checkpoint_is_an_io_error_naming_the_problem(text: str, why: str) -> None:
    with pytest.raises(CheckpointFormatError, match=why) as info:
        parse_checkpoint(text, path="/x/cp")
    assert isinstance(info.value, OSError)
    assert "/x/cp" in str(info.value)


@given(
    st.dictionaries(
        st.builds(
            TopicPartition,
            st.text("abcxyz._-", min_size=1, max_size=12),
            st.integers(0, 1000),
        ),
        st.integers(0, 2**62),
        max_size=20,
    )
)
def test_checkpoint_round_trips(offsets: dict[TopicPartition, int]) -> None:
    assert parse_checkpoint(format_checkpoint(offsets).decode()) == offsets
