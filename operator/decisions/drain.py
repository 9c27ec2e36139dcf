"""Where a draining directory's replicas go, and how far the drain got. Pure.

``desiredState: Drained`` empties a log directory. Each replica still in it gets a new home:

1. another directory of the same broker (AlterReplicaLogDirs: no data crosses the network),
   the least-used online, uncordoned one *that has room* for it -- the broker's usable bytes
   (DescribeLogDirs v4) less what this plan already sends there less a reserve
   (``RESERVE_FRACTION`` of the directory), so a drain never fills a disk;
2. else another broker (a cross-broker reassignment): a broker not already holding the
   partition, into the directory with the most room that is online and open to new replicas
   (its LogVolume neither cordoned nor draining nor failed, ``closed``), under the same room
   rule. The broker takes the draining broker's place in the replica list (so a preferred
   leader stays preferred at the same position); the other replicas stay where they are;
3. else the replica is *stuck*, with the reason (no broker has room, or the partition already
   lives on every broker).

Replicas already on their way (a future replica in another directory, a partition with a
reassignment in flight) are left alone. ``progress`` turns what is left into the
``status.drain`` of the LogVolume: bytes and replicas left, rate and ETA.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spindle.operator.decisions.reassignment import (
    MIN_RATE_SECONDS,
    TP,
    ClusterView,
    probe_stamp,
    remaining_text,
)
from spindle.operator.decisions.volume_state import DirReport
from spindle.operator.specs.meta import Obj

#: Part of a directory's capacity a drain leaves free: a disk filled to the brim by a drain
#: would fail the next write on it.
RESERVE_FRACTION = 0.05


@dataclass(frozen=True)
class CrossMove:
    """One partition leaving the draining broker: its new replica list and directories
    (``any`` for the replicas that stay where they are)."""

    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...]
    size: int


@dataclass(frozen=True)
class DrainPlan:
    intra: Mapping[TP, str] = field(default_factory=dict)
    cross: Mapping[TP, CrossMove] = field(default_factory=dict)
    stuck: Mapping[TP, str] = field(default_factory=dict)

    @property
    def needs_other_brokers(self) -> bool:
        return bool(self.cross or self.stuck)


def _room(total: int | None, usable: int | None) -> float | None:
    """Bytes a drain may still put in a directory; None when the broker does not say."""
    if usable is None:
        return None
    reserve = RESERVE_FRACTION * total if total else 0.0
    return usable - reserve


def plan_intra(source: DirReport, others: Sequence[DirReport]) -> tuple[dict[TP, str], list[TP]]:
    """Moves inside the broker for the replicas of ``source`` that fit, and the replicas that
    fit nowhere in it (for another broker). ``others``: the broker's other directories."""
    arriving = {tp for r in (source, *others) for tp in r.futures}
    targets = [r for r in others if r.error is None and not r.cordoned]
    used = {r.path: r.used_bytes for r in targets}
    room = {r.path: _room(r.total_bytes, r.usable_bytes) for r in targets}
    moves: dict[TP, str] = {}
    homeless: list[TP] = []
    # Largest first: the big replicas are the hard ones to place.
    for tp, size in sorted(source.partitions.items(), key=lambda i: (-i[1], i[0])):
        if tp in arriving:
            continue
        fits = [p for p in used if (left := room[p]) is None or size <= left]
        if not fits:
            homeless.append(tp)
            continue
        dest = min(fits, key=lambda p: (used[p], p))
        used[dest] += size
        left = room[dest]
        if left is not None:
            room[dest] = left - size
        moves[tp] = dest
    return moves, sorted(homeless)


def plan_cross(
    broker_id: int,
    homeless: Sequence[TP],
    sizes: Mapping[TP, int],
    view: ClusterView,
    closed: Mapping[tuple[int, str], str],
) -> tuple[dict[TP, CrossMove], dict[TP, str]]:
    """New brokers for the ``homeless`` replicas of ``broker_id`` (``sizes``: their bytes),
    from the cluster's view and the directories closed to new replicas."""
    room: dict[tuple[int, str], float | None] = {}
    for b, dirs in view.dirs.items():
        for path, info in dirs.items():
            if b == broker_id or info.error is not None or (b, path) in closed:
                continue
            room[(b, path)] = _room(info.total_bytes, info.usable_bytes)
    cross: dict[TP, CrossMove] = {}
    stuck: dict[TP, str] = {}
    for tp in sorted(homeless, key=lambda t: (-sizes.get(t, 0), t)):
        replicas = view.partitions.get(tp)
        if replicas is None or broker_id not in replicas or tp in view.reassigning:
            continue  # leaving already (its copy here is deleted shortly), or moving
        size = sizes.get(tp, 0)
        candidates = [
            (key, left)
            for key, left in room.items()
            if key[0] not in replicas and (left is None or size <= left)
        ]
        if not candidates:
            others = {b for b, _ in room} - set(replicas)
            stuck[tp] = (
                f"{tp[0]}-{tp[1]}: no other directory of this broker has room for its "
                f"{size} bytes, and "
                + (
                    "no other broker has an open directory with room"
                    if others
                    else "every other broker already holds it or has no open directory"
                )
            )
            continue
        (dest_broker, dest_path), left = max(
            candidates, key=lambda c: (float("inf") if c[1] is None else c[1], -c[0][0], c[0][1])
        )
        if left is not None:
            room[(dest_broker, dest_path)] = left - size
        new = tuple(dest_broker if b == broker_id else b for b in replicas)
        paths = tuple(dest_path if b == dest_broker else "any" for b in new)
        cross[tp] = CrossMove(new, paths, size)
    return cross, stuck


def _parse(stamp: Any) -> datetime.datetime | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.datetime.fromisoformat(stamp)
    except ValueError:
        return None


def progress(
    previous: Mapping[str, Any],
    report: DirReport,
    now: str,
    *,
    reassignment: str | None = None,
    message: str | None = None,
) -> Obj:
    """``status.drain`` of a draining (or just emptied) LogVolume: bytes and replicas left,
    the average rate since the drain started and the ETA at that rate (a drain is one long
    copy: its average is a steadier guide than the last few seconds), which cross-broker
    Reassignment carries replicas away, and why a replica has no home when one has none.

    The bytes are the report's, so the times are too: ``startTime`` and the rate's end are
    when its DescribeLogDirs answered (``report.described_at``, to the millisecond), ``now``
    (the pass's time) only when that is unknown. A reconcile uses the probe loop's last answer,
    up to a probe period older than the pass, and a whole-second pass time: either misstates
    the first seconds of a drain by half or more (as it did a Reassignment's rate). No rate before
    ``MIN_RATE_SECONDS`` of drain: the size moves in the mover's chunks."""
    left, replicas = report.used_bytes, report.replicas
    measured = probe_stamp(report.described_at) if report.described_at is not None else now
    started = previous.get("startTime") or measured
    out: Obj = {
        "startTime": started,
        "bytesLeft": left,
        "replicasLeft": replicas,
        "bytesTotal": max(int(previous.get("bytesTotal") or 0), left),
        "reassignment": reassignment or previous.get("reassignment"),
        "message": message,
    }
    if replicas == 0:
        out.update(completionTime=previous.get("completionTime") or now, bytesPerSecond=0)
        out.update(eta=None, timeRemaining=None)
        return out
    out["completionTime"] = None
    start, current = _parse(started), _parse(measured)
    rate = 0.0
    if start is not None and current is not None:
        elapsed = (current - start).total_seconds()
        if elapsed >= MIN_RATE_SECONDS:
            rate = (out["bytesTotal"] - left) / elapsed
    out["bytesPerSecond"] = round(rate)
    if rate > 0 and current is not None:
        seconds = left / rate
        eta = current + datetime.timedelta(seconds=seconds)
        out["eta"] = eta.strftime("%Y-%m-%dT%H:%M:%SZ")
        out["timeRemaining"] = remaining_text(seconds)
    else:
        out.update(eta=None, timeRemaining=None)
    return out
