"""Offset checkpoint files in Kafka's text format, written atomically.

Format (``server-common/.../CheckpointFile.java``, version 0)::

    0                       version
    2                       number of entries
    topic-a 0 1234          topic, partition, offset; one line per entry
    topic-b 3 17

Writes go to ``<name>.tmp``, are fsynced, then renamed over the old file and the directory is
fsynced, so a crash leaves either the old or the new checkpoint, never half of one. A file with
a wrong version, a wrong count or a malformed line is an I/O error (Kafka raises IOException),
which the failure channel turns into an offline directory.

Raises ``OSError`` only; callers run these inside the failure guard.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from spindle.broker.common.ids import TopicPartition

RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET = "log-start-offset-checkpoint"
REPLICATION_OFFSET = "replication-offset-checkpoint"
VERSION = 0


class CheckpointFormatError(OSError):
    """A checkpoint file that is not in Kafka's format (treated like any disk error)."""


def format_checkpoint(offsets: Mapping[TopicPartition, int]) -> bytes:
    """The file content for ``offsets``, entries in topic-partition order."""
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{tp.topic} {tp.partition} {offsets[tp]}" for tp in sorted(offsets)]
    return ("\n".join(lines) + "\n").encode()


def parse_checkpoint(text: str, *, path: str = "<checkpoint>") -> dict[TopicPartition, int]:
    """Entries of a checkpoint file; ``CheckpointFormatError`` naming ``path`` if malformed."""
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointFormatError(f"checkpoint {path} is truncated: {len(lines)} lines")
    if lines[0].strip() != str(VERSION):
        raise CheckpointFormatError(f"checkpoint {path} has unknown version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointFormatError(f"checkpoint {path} has a bad count {lines[1]!r}") from None
    entries = [line for line in lines[2:] if line.strip()]
    if count != len(entries):
        raise CheckpointFormatError(
            f"checkpoint {path} declares {count} entries but holds {len(entries)}"
        )
    out: dict[TopicPartition, int] = {}
    for line in entries:
        parts = line.split()
        if len(parts) != 3:
            raise CheckpointFormatError(f"checkpoint {path} has a malformed line {line!r}")
        try:
            out[TopicPartition(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise CheckpointFormatError(
                f"checkpoint {path} has a malformed line {line!r}"
            ) from None
    return out


def fsync_dir(path: str) -> None:
    """fsync a directory so a rename or create inside it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, content: bytes) -> None:
    """Replace ``path`` with ``content`` via ``.tmp`` + fsync + rename + directory fsync."""
    write_all_atomically({path: content})


def write_all_atomically(files: Mapping[str, bytes]) -> None:
    """Replace each file (all in one directory) like :func:`write_atomically`, with a single
    directory fsync for all the renames: every file is either old or new after a crash."""
    directories = {os.path.dirname(path) or "." for path in files}
    for path, content in files.items():
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(content)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
    for path in files:
        os.replace(path + ".tmp", path)
    for directory in directories:
        fsync_dir(directory)


def write_checkpoint(path: str, offsets: Mapping[TopicPartition, int]) -> None:
    write_atomically(path, format_checkpoint(offsets))


def read_checkpoint(path: str) -> dict[TopicPartition, int]:
    """Entries of the checkpoint at ``path``; empty if the file does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    return parse_checkpoint(text, path=path)
