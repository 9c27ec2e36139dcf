"""One configured log directory: its identity (``meta.properties``), lock and marker files.

``meta.properties`` (KIP-858; Kafka's ``MetaProperties``/``MetaPropertiesEnsemble``) is a Java
properties file::

    #Written by Spindle
    version=1
    cluster.id=<cluster id>
    node.id=<node id>
    directory.id=<22-char Kafka UUID>

Start-up rules checked here, before any log is loaded: a missing ``directory.id`` is generated
(never a reserved id) and written atomically; two directories with one id, or with different
``cluster.id``/``node.id``, refuse start-up naming both paths.

Raises ``OSError`` for disk problems (the caller's failure guard decides what goes offline)
and ``StorageStartupError`` for configurations that must stop the broker.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from spindle.broker.common.kafka_uuid import (
    from_kafka_str,
    is_reserved,
    random_directory_id,
    to_kafka_str,
)
from spindle.broker.common.properties import parse_properties
from spindle.broker.storage.checkpoint import fsync_dir, write_atomically

META_PROPERTIES = "meta.properties"
LOCK_FILE = ".lock"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
META_VERSION = 1


class StorageStartupError(Exception):
    """The log directories cannot be used together; the broker must not start."""


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """The identity a directory carries; ``directory_id`` None until generated."""

    cluster_id: str | None
    node_id: int | None
    directory_id: uuid.UUID | None
    version: int = META_VERSION
    extra: Mapping[str, str] = field(default_factory=dict)


def parse_meta(text: str, *, path: str) -> MetaProperties:
    """Parse ``meta.properties``; ``StorageStartupError`` naming ``path`` for bad values."""
    try:
        props = parse_properties(text)
        version = int(props.pop("version", str(META_VERSION)))
        broker = props.pop("broker.id", None)  # version 0 (ZooKeeper era) name of node.id
        node = props.pop("node.id", broker)
        node_id = int(node) if node is not None else None
        dir_text = props.pop("directory.id", None)
        directory_id = from_kafka_str(dir_text) if dir_text else None
    except ValueError as exc:
        raise StorageStartupError(f"{path}: invalid meta.properties: {exc}") from None
    if directory_id is not None and is_reserved(directory_id):
        raise StorageStartupError(
            f"{path}: directory.id {to_kafka_str(directory_id)} is a reserved id"
        )
    return MetaProperties(
        cluster_id=props.pop("cluster.id", None),
        node_id=node_id,
        directory_id=directory_id,
        version=version,
        extra=props,
    )


def format_meta(meta: MetaProperties) -> bytes:
    lines = ["#Written by Spindle", f"version={meta.version}"]
    if meta.cluster_id is not None:
        lines.append(f"cluster.id={meta.cluster_id}")
    if meta.node_id is not None:
        lines.append(f"node.id={meta.node_id}")
    if meta.directory_id is not None:
        lines.append(f"directory.id={to_kafka_str(meta.directory_id)}")
    lines += [f"{k}={v}" for k, v in sorted(meta.extra.items())]
    return ("\n".join(lines) + "\n").encode()


def read_meta(dir_path: str) -> MetaProperties | None:
    """The directory's ``meta.properties``, or None if it has none yet (OSError if unreadable)."""
    path = os.path.join(dir_path, META_PROPERTIES)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    return parse_meta(text, path=path)


def write_meta(dir_path: str, meta: MetaProperties) -> None:
    write_atomically(os.path.join(dir_path, META_PROPERTIES), format_meta(meta))


_V = TypeVar("_V", str, int)


def _agreeing(
    first: tuple[str, _V] | None, path: str, value: _V | None, key: str
) -> tuple[str, _V] | None:
    """The first (directory, value) of ``key`` seen so far, after checking that ``path``'s
    value (if it has one) agrees with it; disagreeing directories are refused by name."""
    if value is None:
        return first
    if first is not None and first[1] != value:
        raise StorageStartupError(
            f"log directories disagree on {key}: {first[0]} has {first[1]!r}, {path} has {value!r}"
        )
    return first or (path, value)


def complete_ensemble(
    metas: Mapping[str, MetaProperties | None], *, cluster_id: str, node_id: int
) -> dict[str, MetaProperties]:
    """The identity every readable directory must have after start-up (pure; no I/O).

    Fills in missing fields (a new ``directory.id`` for each directory without one) and
    refuses, naming both paths, directories that disagree with each other or share an id.
    """
    out: dict[str, MetaProperties] = {}
    first_cluster: tuple[str, str] | None = None
    first_node: tuple[str, int] | None = None
    owners: dict[uuid.UUID, str] = {}
    for path in sorted(metas):
        meta = metas[path]
        if meta is None:
            meta = MetaProperties(cluster_id=None, node_id=None, directory_id=None)
        first_cluster = _agreeing(first_cluster, path, meta.cluster_id, "cluster.id")
        first_node = _agreeing(first_node, path, meta.node_id, "node.id")
        if meta.directory_id is not None:
            other = owners.get(meta.directory_id)
            if other is not None:
                raise StorageStartupError(
                    f"log directories {other} and {path} have the same directory.id "
                    f"{to_kafka_str(meta.directory_id)}"
                )
            owners[meta.directory_id] = path
        out[path] = meta
    if first_cluster is not None and first_cluster[1] != cluster_id:
        raise StorageStartupError(
            f"log directory {first_cluster[0]} belongs to cluster {first_cluster[1]!r}, "
            f"this broker is configured for cluster {cluster_id!r}"
        )
    if first_node is not None and first_node[1] != node_id:
        raise StorageStartupError(
            f"log directory {first_node[0]} belongs to node {first_node[1]}, "
            f"this broker is node {node_id}"
        )
    for path, meta in out.items():
        directory_id = meta.directory_id
        while directory_id is None or (directory_id in owners and owners[directory_id] != path):
            directory_id = random_directory_id()
        owners[directory_id] = path
        out[path] = MetaProperties(
            cluster_id=cluster_id,
            node_id=node_id,
            directory_id=directory_id,
            version=META_VERSION,
            extra=meta.extra,
        )
    return out


class LogDir:
    """One configured directory: path, id, the held ``.lock`` and the clean-shutdown marker.

    Holds no logs (the LogManager does). Only ``checkpoint_lock`` is for concurrent use; the
    rest is called by the LogManager at start-up, failure and shutdown.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.directory_id: uuid.UUID | None = None
        self._lock_fd: int | None = None
        self.checkpoint_lock = threading.Lock()
        """Held while writing this directory's checkpoint files."""

    def __repr__(self) -> str:
        return f"LogDir({self.path!r})"

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def acquire_lock(self) -> None:
        """Hold an exclusive ``flock`` on ``.lock``: a second broker on one dir fails here."""
        # Read-only: a descriptor open for writing would keep the mount busy (no ro remount).
        fd = os.open(self.file(LOCK_FILE), os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise OSError(
                exc.errno, f"{self.file(LOCK_FILE)} is locked by another process"
            ) from None
        self._lock_fd = fd

    def release_lock(self) -> None:
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            with contextlib.suppress(OSError):
                os.close(fd)

    def had_clean_shutdown(self) -> bool:
        return os.path.exists(self.file(CLEAN_SHUTDOWN))

    def clear_clean_shutdown(self) -> None:
        """Remove the marker at start-up, so a crash from now on is seen as unclean."""
        try:
            os.unlink(self.file(CLEAN_SHUTDOWN))
        except FileNotFoundError:
            return
        fsync_dir(self.path)

    def mark_clean_shutdown(self) -> None:
        write_atomically(self.file(CLEAN_SHUTDOWN), b"")
