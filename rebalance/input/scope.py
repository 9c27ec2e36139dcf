"""What a mode is allowed to touch: which directories must be emptied, which may receive
replicas, whether replicas may change broker, and which balance goals are in play.

Pure: a function of the cluster and the request, so each mode's promise ("fix-offline moves
nothing else") is decided in one place and unit-tested without Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from spindle.rebalance.input.model import (
    ACTIVE,
    B8,
    DRAINING,
    MODES,
    OFFLINE,
    Cluster,
    SnapshotError,
)


@dataclass(frozen=True, kw_only=True)
class Request:
    """One planning request, as the CLI (or the operator) states it."""

    #: One of ``MODES``.
    mode: str
    #: remove-volumes: the directories to drain, as (broker id, path). Draining dirs count too.
    dirs: tuple[tuple[int, str], ...] = ()
    #: remove-brokers: brokers to empty; add-brokers: the new brokers (default: empty brokers).
    brokers: tuple[int, ...] = ()
    #: At most this many replica moves (a replica changing broker or directory is one move).
    max_moves: int | None = None
    #: At most this many bytes moved (sum of the sizes of moved replicas).
    max_bytes: int | None = None


@dataclass(frozen=True, kw_only=True)
class Scope:
    """The mode's reach, as masks over directories (D) and brokers (B)."""

    mode: str
    #: D: every replica here must get a new home.
    evacuate: B8
    #: D: replicas evacuated from here must also change broker (Offline dir, removed broker).
    must_leave_broker: B8
    #: D: directories that will still hold data after the plan (their bytes count in balance).
    hosting: B8
    #: D: directories that may receive replicas.
    receivable: B8
    #: B: brokers whose directories may trade replicas among themselves.
    intra_ok: B8
    #: D: fix-offline -- directories that may take the replicas of an offline directory of
    #: their own broker, and nothing else: Spindle re-creates such a replica live in another
    #: directory (AlterReplicaLogDirs), where Kafka needs a broker restart (KIP-858).
    rehome: B8
    #: Replicas may change broker at all.
    cross_ok: bool
    #: Balance goals this mode works on.
    balance_brokers: bool
    balance_disks: bool
    balance_counts: bool
    #: Fix partitions whose replicas share a rack although racks allow otherwise.
    fix_racks: bool


def build_scope(cluster: Cluster, request: Request) -> Scope:
    """Translate a request into masks. Kafka refuses AlterReplicaLogDirs with
    KAFKA_STORAGE_ERROR on a broker with any offline directory, so such a broker never gets an
    intra-broker move and never receives a replica with a chosen directory -- except, in
    fix-offline, the replicas of its offline directory into its live ones (``rehome``: a
    Spindle broker re-creates them there and refetches them from their leaders).
    """
    mode = request.mode
    if mode not in MODES:
        raise SnapshotError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    n_b = cluster.n_brokers
    state = cluster.dir_state
    offline = state == OFFLINE
    broker_has_offline = np.zeros(n_b, bool)
    broker_has_offline[cluster.dir_broker[offline]] = True
    named_brokers, named_dirs = _named(cluster, request)
    removed = named_brokers if mode == "remove-brokers" else np.zeros(n_b, bool)
    evacuate = _evacuate(cluster, mode, named_dirs, removed)
    must_leave = (offline | removed[cluster.dir_broker]) & evacuate
    hosting = ~offline & ~evacuate
    dest_broker = ~removed & ~broker_has_offline
    if mode == "add-brokers":
        dest_broker &= _new_brokers(cluster, named_brokers)
    receivable = hosting & (state == ACTIVE) & dest_broker[cluster.dir_broker]
    rehome = np.zeros(cluster.n_dirs, bool)
    if mode == "fix-offline":
        # A replica of an offline directory may stay on its broker, in a live directory.
        must_leave = removed[cluster.dir_broker] & evacuate
        rehome = hosting & (state == ACTIVE) & broker_has_offline[cluster.dir_broker]
    intra_ok = ~broker_has_offline & (mode in ("full", "intra-broker", "remove-volumes"))
    return Scope(
        mode=mode,
        evacuate=evacuate,
        must_leave_broker=must_leave,
        hosting=hosting,
        receivable=receivable,
        intra_ok=intra_ok,
        rehome=rehome,
        cross_ok=mode != "intra-broker",
        balance_brokers=mode in ("full", "add-brokers"),
        balance_disks=mode in ("full", "intra-broker"),
        balance_counts=mode in ("full", "add-brokers"),
        fix_racks=mode == "full",
    )


def _named(cluster: Cluster, request: Request) -> tuple[np.ndarray, np.ndarray]:
    """The brokers and directories the request names, checked against its mode."""
    mode = request.mode
    named_brokers = np.zeros(cluster.n_brokers, bool)
    for bid in request.brokers:
        named_brokers[cluster.broker_index(bid)] = True
    named_dirs = np.zeros(cluster.n_dirs, bool)
    for bid, path in request.dirs:
        named_dirs[cluster.dir_index(bid, path)] = True
    if request.brokers and mode not in ("remove-brokers", "add-brokers"):
        raise SnapshotError(f"--brokers applies to remove-brokers and add-brokers, not {mode}")
    if request.dirs and mode != "remove-volumes":
        raise SnapshotError(f"--dirs applies to remove-volumes, not {mode}")
    if mode == "remove-brokers" and not named_brokers.any():
        raise SnapshotError("remove-brokers needs --brokers naming the brokers to empty")
    return named_brokers, named_dirs


def _evacuate(
    cluster: Cluster, mode: str, named_dirs: np.ndarray, removed: np.ndarray
) -> np.ndarray:
    """The directories every replica must leave in this mode."""
    offline = cluster.dir_state == OFFLINE
    draining = cluster.dir_state == DRAINING
    evacuate = np.zeros(cluster.n_dirs, bool)
    if mode in ("full", "fix-offline"):
        evacuate |= offline
    if mode in ("full", "intra-broker", "remove-volumes"):
        evacuate |= draining
    if mode == "remove-volumes":
        if not (named_dirs | draining).any():
            raise SnapshotError("remove-volumes needs --dirs (or Draining directories)")
        if (named_dirs & offline).any():
            raise SnapshotError(
                "remove-volumes: an Offline directory cannot be drained; use fix-offline"
            )
        evacuate |= named_dirs
    if mode == "remove-brokers":
        evacuate |= removed[cluster.dir_broker]
    return evacuate


def _new_brokers(cluster: Cluster, named_brokers: np.ndarray) -> np.ndarray:
    """add-brokers: the brokers named, else every broker holding no replica."""
    new = named_brokers.copy()
    if not new.any():
        counts = np.bincount(cluster.rep_broker, minlength=cluster.n_brokers)
        new = counts == 0
    if not new.any():
        raise SnapshotError("add-brokers: no broker named with --brokers and none is empty")
    return np.asarray(new)
