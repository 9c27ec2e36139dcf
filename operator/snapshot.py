"""The planner's snapshot, built from what every broker says about its disks.

A Rebalance starts here: the operator asks each broker for DescribeLogDirs (its log
directories with their error, ``TotalBytes``/``UsableBytes`` and the size of every replica they
hold) and the cluster metadata (brokers with racks, partitions with replica lists and leaders),
and turns the two into the planner's snapshot, version 1: exactly the document
``spindle.rebalance.parse_snapshot`` accepts (``spindle-rebalance plan --snapshot``).

Two layers, so that the part with decisions in it is tested without a cluster:

- ``build_snapshot`` is pure: typed reports in, the snapshot dict out. Every rule below lives
  there.
- ``spindle.operator.brokers.gather_snapshot`` (the operator's one door to Kafka) is thin: three
  admin calls with kafka-python (``describe_cluster``, ``describe_topics``,
  ``describe_log_dirs``), converted by ``brokers_from_admin``/``partitions_from_admin`` (pure as
  well, here) and handed to ``build_snapshot``. No I/O in this module.

Rules, and why:

- A directory DescribeLogDirs answers with KAFKA_STORAGE_ERROR is ``Offline``, with the -1
  byte counts DescribeLogDirs reports (the planner reads negatives as 0). The broker's word
  that a disk failed wins over any other state.
- Cordoned and Draining are the operator's decisions, not the broker's: they come from the
  LogVolume resources as an optional ``dir_states`` mapping (broker id, path) -> state, default
  Active. A mapping entry naming a directory no broker reported is an error, not ignored: a
  typo there would otherwise place replicas on a disk meant to be emptied.
- A replica's directory is the one whose DescribeLogDirs entry lists it as a current (not
  future) replica. A future replica (an AlterReplicaLogDirs copy in flight) does not move the
  replica: until the swap the data lives in the current directory; its bytes show up in the
  destination's used space, which the planner keeps as that directory's external load.
- An Offline directory lists no replicas, so a replica the broker does not report in any
  online directory lives on one of its Offline directories: the only one if there is one, else
  the one ``offline_replica_dirs`` names ((topic, partition, broker) -> path, from the
  controller's directory assignments). With several Offline directories and no such entry the
  build fails rather than guess (the summary's per-directory figures would be wrong). A broker
  with no Offline directory that does not report a replica the metadata assigns to it (the
  replica is not created yet, or was just moved) is an error too: snapshot again.
- A partition's ``sizeBytes`` is the largest size any of its replicas reports (followers lag
  the leader; the planner must not under-estimate what a move needs room for). A partition
  no live directory reports (all replicas Offline) has size 0: its bytes are gone anyway.
- Replicas DescribeLogDirs lists that the metadata does not know (a topic being deleted) are
  left out; their bytes stay in the directory's used space, as external load.

Not wired to any handler yet: the operator's Rebalance reconciler will call
``spindle.operator.brokers.gather_snapshot_async`` and hand the document to the planner's job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from spindle.broker.common.errors import ErrorCode
from spindle.rebalance import STATES

#: (topic, partition)
PartitionKey = tuple[str, int]


class SnapshotBuildError(ValueError):
    """The brokers' reports cannot be turned into a snapshot the planner may trust."""


@dataclass(frozen=True, kw_only=True)
class LogDirReport:
    """One log directory of one broker, as DescribeLogDirs (v4) reports it."""

    path: str
    #: Kafka error code of the directory: 0, or KAFKA_STORAGE_ERROR for an offline disk.
    error_code: int = 0
    #: -1 when unknown (an offline directory, or DescribeLogDirs before v4).
    total_bytes: int = -1
    usable_bytes: int = -1
    #: Current replicas in this directory: (topic, partition) -> size in bytes.
    replicas: Mapping[PartitionKey, int] = field(default_factory=dict)
    #: Future replicas being copied into this directory (AlterReplicaLogDirs in flight).
    futures: Mapping[PartitionKey, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class BrokerReport:
    """One broker: its rack (from the metadata) and its directories (from DescribeLogDirs)."""

    id: int
    rack: str | None
    log_dirs: Sequence[LogDirReport]


@dataclass(frozen=True, kw_only=True)
class PartitionReport:
    """One partition from the metadata: replica list in order (first is preferred leader)."""

    topic: str
    partition: int
    replicas: Sequence[int]
    #: -1 when the partition has no leader.
    leader: int = -1


class SnapshotOptions(TypedDict, total=False):
    """What the operator knows about the directories beyond the brokers' answers (keyword
    arguments of ``build_snapshot`` and of ``spindle.operator.brokers.gather_snapshot``)."""

    #: (broker id, path) -> Active|Cordoned|Draining|Offline, from LogVolumes.
    dir_states: Mapping[tuple[int, str], str] | None
    #: (broker id, path) -> directory id, written as ``directoryId`` when known.
    directory_ids: Mapping[tuple[int, str], str] | None
    #: (topic, partition, broker id) -> path of the Offline directory holding that replica.
    offline_replica_dirs: Mapping[tuple[str, int, int], str] | None


def build_snapshot(
    brokers: Sequence[BrokerReport],
    partitions: Sequence[PartitionReport],
    *,
    dir_states: Mapping[tuple[int, str], str] | None = None,
    directory_ids: Mapping[tuple[int, str], str] | None = None,
    offline_replica_dirs: Mapping[tuple[str, int, int], str] | None = None,
) -> dict[str, Any]:
    """The planner's snapshot (version 1) from the brokers' reports; see the module docstring
    for the rules. Brokers come out sorted by id, directories by path, partitions by topic and
    number, so the same cluster always gives the same document (and so the same plan).

    ``dir_states``: (broker id, path) -> Active|Cordoned|Draining|Offline, from LogVolumes.
    ``directory_ids``: (broker id, path) -> directory id, written as ``directoryId`` when known.
    ``offline_replica_dirs``: (topic, partition, broker id) -> path of the Offline directory
    holding that replica, for brokers with more than one Offline directory.
    """
    states = dict(dir_states or {})
    ids = dict(directory_ids or {})
    hints = dict(offline_replica_dirs or {})
    by_id, known_dirs = _index_brokers(brokers)
    _check_dir_mappings(by_id, known_dirs, states, ids)
    doc_brokers, state_of = _broker_entries(by_id, states, ids)
    home, size = _replica_homes(known_dirs)
    ordered = _ordered_partitions(partitions, hints)
    doc_parts = [
        _partition_entry(part, by_id=by_id, home=home, size=size, hints=hints, state_of=state_of)
        for part in ordered
    ]
    return {"version": 1, "brokers": doc_brokers, "partitions": doc_parts}


def _index_brokers(
    brokers: Sequence[BrokerReport],
) -> tuple[dict[int, BrokerReport], dict[tuple[int, str], LogDirReport]]:
    """Brokers by id and their directories by (broker id, path); each reported once."""
    by_id: dict[int, BrokerReport] = {}
    for broker in brokers:
        if broker.id in by_id:
            raise SnapshotBuildError(f"broker {broker.id} reported twice")
        if not broker.log_dirs:
            raise SnapshotBuildError(f"broker {broker.id}: DescribeLogDirs listed no log dirs")
        by_id[broker.id] = broker
    known_dirs: dict[tuple[int, str], LogDirReport] = {}
    for broker in by_id.values():
        for d in broker.log_dirs:
            if (broker.id, d.path) in known_dirs:
                raise SnapshotBuildError(f"broker {broker.id}: log dir {d.path!r} listed twice")
            known_dirs[(broker.id, d.path)] = d
    return by_id, known_dirs


def _check_dir_mappings(
    by_id: Mapping[int, BrokerReport],
    known_dirs: Mapping[tuple[int, str], LogDirReport],
    states: Mapping[tuple[int, str], str],
    ids: Mapping[tuple[int, str], str],
) -> None:
    """Every (broker, path) the caller names is a reported directory; every state is known."""
    for what, mapping in (("dir_states", states), ("directory_ids", ids)):
        for bid, path in mapping:
            if (bid, path) not in known_dirs:
                raise SnapshotBuildError(
                    f"{what}: broker {bid} reported no log dir {path!r} "
                    f"(its dirs: {_paths_of(by_id.get(bid))})"
                )
    for (bid, path), state in states.items():
        if state not in STATES:
            raise SnapshotBuildError(
                f"dir_states: broker {bid} dir {path}: state {state!r} not in {STATES}"
            )


def _broker_entries(
    by_id: Mapping[int, BrokerReport],
    states: Mapping[tuple[int, str], str],
    ids: Mapping[tuple[int, str], str],
) -> tuple[list[dict[str, Any]], dict[tuple[int, str], str]]:
    """The snapshot's ``brokers`` (by id, directories by path) and each directory's state."""
    state_of: dict[tuple[int, str], str] = {}
    doc_brokers: list[dict[str, Any]] = []
    for bid in sorted(by_id):
        broker = by_id[bid]
        dirs = []
        for d in sorted(broker.log_dirs, key=lambda d: d.path):
            state = _dir_state(bid, d, states.get((bid, d.path), "Active"))
            state_of[(bid, d.path)] = state
            entry: dict[str, Any] = {"path": d.path}
            if (bid, d.path) in ids:
                entry["directoryId"] = ids[(bid, d.path)]
            entry.update(state=state, totalBytes=d.total_bytes, usableBytes=d.usable_bytes)
            dirs.append(entry)
        doc_brokers.append({"id": bid, "rack": broker.rack, "logDirs": dirs})
    return doc_brokers, state_of


def _replica_homes(
    known_dirs: Mapping[tuple[int, str], LogDirReport],
) -> tuple[dict[tuple[str, int, int], str], dict[tuple[str, int, int], int]]:
    """Where each (topic, partition, broker) replica is, and its size, from the online
    directories' lists of current replicas."""
    home: dict[tuple[str, int, int], str] = {}
    size: dict[tuple[str, int, int], int] = {}
    for (bid, path), d in known_dirs.items():
        for (topic, num), nbytes in d.replicas.items():
            where = (topic, num, bid)
            if where in home:
                raise SnapshotBuildError(
                    f"partition {topic}-{num}: broker {bid} reports a current replica in both "
                    f"{home[where]!r} and {path!r}"
                )
            home[where] = path
            size[where] = nbytes
    return home, size


def _ordered_partitions(
    partitions: Sequence[PartitionReport], hints: Mapping[tuple[str, int, int], str]
) -> list[PartitionReport]:
    """Partitions by topic and number, each once; every hint names a replica they have."""
    ordered = sorted(partitions, key=lambda p: (p.topic, p.partition))
    replicas_of: dict[PartitionKey, Sequence[int]] = {}
    for part in ordered:
        if (part.topic, part.partition) in replicas_of:
            raise SnapshotBuildError(
                f"partition {part.topic}-{part.partition} appears twice in the metadata"
            )
        replicas_of[(part.topic, part.partition)] = part.replicas
    for (topic, num, bid), path in hints.items():
        if bid not in replicas_of.get((topic, num), ()):
            raise SnapshotBuildError(
                f"offline_replica_dirs: partition {topic}-{num} has no replica on broker {bid} "
                f"in the metadata (entry {path!r})"
            )
    return ordered


def _partition_entry(
    part: PartitionReport,
    *,
    by_id: Mapping[int, BrokerReport],
    home: Mapping[tuple[str, int, int], str],
    size: Mapping[tuple[str, int, int], int],
    hints: Mapping[tuple[str, int, int], str],
    state_of: Mapping[tuple[int, str], str],
) -> dict[str, Any]:
    """One entry of the snapshot's ``partitions``."""
    name = f"{part.topic}-{part.partition}"
    if not part.replicas:
        raise SnapshotBuildError(f"partition {name}: the metadata lists no replicas")
    paths = [_replica_dir(part, bid, by_id, home, hints, state_of) for bid in part.replicas]
    return {
        "topic": part.topic,
        "partition": part.partition,
        "replicas": list(part.replicas),
        "leader": part.leader if part.leader >= 0 else -1,
        "logDirs": paths,
        "sizeBytes": max(
            (size.get((part.topic, part.partition, bid), 0) for bid in part.replicas),
        ),
    }


def _paths_of(broker: BrokerReport | None) -> list[str]:
    return [] if broker is None else sorted(d.path for d in broker.log_dirs)


def _dir_state(bid: int, d: LogDirReport, wanted: str) -> str:
    if d.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
        return "Offline"
    if d.error_code != 0:
        raise SnapshotBuildError(
            f"broker {bid} dir {d.path}: DescribeLogDirs error code {d.error_code} "
            "(only 0 and KAFKA_STORAGE_ERROR say anything about the disk)"
        )
    if wanted != "Offline" and d.total_bytes <= 0:
        raise SnapshotBuildError(
            f"broker {bid} dir {d.path}: no totalBytes reported (DescribeLogDirs v4 or later "
            "is needed to know a disk's capacity)"
        )
    return wanted


def _replica_dir(
    part: PartitionReport,
    bid: int,
    by_id: Mapping[int, BrokerReport],
    home: Mapping[tuple[str, int, int], str],
    hints: Mapping[tuple[str, int, int], str],
    state_of: Mapping[tuple[int, str], str],
) -> str:
    """The directory of one replica: reported by an online dir, else an Offline one."""
    name = f"{part.topic}-{part.partition}"
    broker = by_id.get(bid)
    if broker is None:
        raise SnapshotBuildError(
            f"partition {name}: replica on broker {bid}, which reported no log dirs "
            f"(reported: {sorted(by_id)})"
        )
    key = (part.topic, part.partition, bid)
    offline = [d.path for d in broker.log_dirs if state_of[(bid, d.path)] == "Offline"]
    if key in home:  # also on a dir the operator calls Offline: the broker's list wins
        if key in hints and hints[key] != home[key]:
            raise SnapshotBuildError(
                f"partition {name}: broker {bid} reports the replica in {home[key]!r}, "
                f"offline_replica_dirs says {hints[key]!r}"
            )
        return home[key]
    if key in hints:
        path = hints[key]
        if path not in offline:
            raise SnapshotBuildError(
                f"partition {name}: offline_replica_dirs names {path!r} on broker {bid}, which "
                f"is not one of its Offline log dirs {sorted(offline)} "
                f"(its dirs: {_paths_of(broker)})"
            )
        return path
    if len(offline) == 1:
        return offline[0]
    if not offline:
        raise SnapshotBuildError(
            f"partition {name}: broker {bid} holds the replica per the metadata but no log dir "
            "reports it (not created yet, or moved while the snapshot was taken): snapshot again"
        )
    raise SnapshotBuildError(
        f"partition {name}: broker {bid} has {len(offline)} Offline log dirs "
        f"{sorted(offline)} and none reports replicas; say which one held it in "
        "offline_replica_dirs"
    )


# --- From kafka-python's admin client ------------------------------------------------------


def brokers_from_admin(
    cluster: Mapping[str, Any], log_dirs: Sequence[Mapping[str, Any]]
) -> list[BrokerReport]:
    """Brokers from ``KafkaAdminClient.describe_cluster()`` (ids, racks) and
    ``describe_log_dirs()`` (kafka-python 3: ``[{"broker", "log_dirs": [{"error_code",
    "log_dir", "topics": [{"name", "partitions": [{"partition_index", "partition_size",
    "offset_lag", "is_future_key"}]}], "total_bytes", "usable_bytes"}]}]``)."""
    racks = {int(b["broker_id"]): b.get("rack") for b in cluster["brokers"]}
    reports = []
    for entry in log_dirs:
        bid = int(entry["broker"])
        if bid not in racks:
            raise SnapshotBuildError(
                f"broker {bid} answered DescribeLogDirs but is not in the metadata"
            )
        dirs = []
        for d in entry["log_dirs"]:
            current: dict[PartitionKey, int] = {}
            future: dict[PartitionKey, int] = {}
            for t in d.get("topics") or ():
                for p in t["partitions"]:
                    target = future if p.get("is_future_key") else current
                    target[(t["name"], int(p["partition_index"]))] = int(p["partition_size"])
            dirs.append(
                LogDirReport(
                    path=d["log_dir"],
                    error_code=int(d["error_code"]),
                    total_bytes=int(d.get("total_bytes", -1)),
                    usable_bytes=int(d.get("usable_bytes", -1)),
                    replicas=current,
                    futures=future,
                )
            )
        reports.append(BrokerReport(id=bid, rack=racks[bid], log_dirs=dirs))
    missing = sorted(set(racks) - {r.id for r in reports})
    if missing:
        raise SnapshotBuildError(f"brokers {missing} are in the metadata but sent no log dirs")
    return reports


def partitions_from_admin(topics: Sequence[Mapping[str, Any]]) -> list[PartitionReport]:
    """Partitions from ``KafkaAdminClient.describe_topics()`` (Metadata: ``name``,
    ``error_code``, ``partitions: [{"partition_index", "leader_id", "replica_nodes"}]``).
    A partition-level error (no leader, offline replicas) is kept: those are exactly the
    partitions fix-offline is for. A topic-level error is not: its partitions are unknown."""
    reports = []
    for t in topics:
        if int(t.get("error_code", 0)) != 0:
            raise SnapshotBuildError(
                f"topic {t.get('name')!r}: metadata error code {t['error_code']}: snapshot again"
            )
        for p in t["partitions"]:
            reports.append(
                PartitionReport(
                    topic=t["name"],
                    partition=int(p["partition_index"]),
                    replicas=[int(b) for b in p["replica_nodes"]],
                    leader=int(p["leader_id"]),
                )
            )
    return reports
