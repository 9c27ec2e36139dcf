"""The planner's data: a validated snapshot turned into flat arrays, the goal settings, and the
plan it produces.

Why arrays: a million replicas as Python objects cost seconds and gigabytes; as a handful of
numpy columns they cost tens of megabytes, convert to Spark DataFrames through Arrow without
copies per row, and let the sequential core look replicas up by index. Pure data, no I/O
except ``load_snapshot``/``parse_snapshot`` reading the operator's JSON.

Snapshot format (built by the operator from DescribeLogDirs v4 of every broker)::

    {"version": 1,
     "brokers": [{"id": 1, "rack": "a",
                  "logDirs": [{"path": "/var/lib/spindle/data-0", "directoryId": "...",
                               "state": "Active|Cordoned|Draining|Offline",
                               "totalBytes": 0, "usableBytes": 0}]}],
     "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3], "leader": 1,
                     "logDirs": ["/var/lib/spindle/data-0", "...", "..."], "sizeBytes": 0}]}

``usableBytes`` is the free space the file system reports; bytes used on a directory that do
not belong to any listed replica (other files, deleted-but-open segments) are kept as that
directory's "external" load, which no plan can move. An Offline directory reports -1 bytes
in DescribeLogDirs; any negative figure is read as 0.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
B8 = npt.NDArray[np.bool_]

#: Directory states, as the operator's LogVolume reports them. The order is the array code.
STATES = ("Active", "Cordoned", "Draining", "Offline")
ACTIVE, CORDONED, DRAINING, OFFLINE = range(4)

MODES = ("full", "intra-broker", "remove-volumes", "remove-brokers", "add-brokers", "fix-offline")


class SnapshotError(ValueError):
    """The snapshot (or a flag naming part of it) is not a cluster the planner can reason about."""


class PlanError(RuntimeError):
    """A hard goal cannot be met: the plan is refused rather than silently violating it."""


@dataclass(frozen=True, kw_only=True)
class Goals:
    """Thresholds for the hard and soft goals; defaults are Cruise Control's."""

    #: Hard: no directory may end above this fraction of its total bytes.
    capacity_threshold: float = 0.8
    #: Soft: each Active directory's utilisation within this factor of its broker's mean.
    disk_balance: float = 1.10
    #: Soft: each broker's utilisation within this factor of the cluster mean.
    broker_balance: float = 1.10
    #: Soft: each broker's replica count within this factor of the mean.
    replica_balance: float = 1.10
    #: Soft: each broker's leader count within this factor of the mean.
    leader_balance: float = 1.10
    #: Hard unless false: replicas of one partition on distinct racks (as far as racks allow).
    rack_aware: bool = True
    #: Even out leader counts by making another replica the preferred leader (first in the
    #: list; Kafka: reassign, then a preferred election) before moving any data for them.
    #: Off: replica order is kept and leaders are balanced by moving replicas only.
    leader_reorder: bool = True

    @classmethod
    def from_json(cls, data: object) -> Goals:
        """Read a ``--goals`` file's object; unknown keys and out-of-range values are errors."""
        if not isinstance(data, dict):
            raise SnapshotError("goals: expected a JSON object")
        known = {f.name: f for f in fields(cls)}
        aliases = {_camel(name): name for name in known}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            name = aliases.get(key, key)
            if name not in known:
                raise SnapshotError(f"goals: unknown key {key!r}; known: {sorted(aliases)}")
            if name in ("rack_aware", "leader_reorder"):
                if not isinstance(value, bool):
                    raise SnapshotError(f"goals: {key} must be true or false")
            elif isinstance(value, bool) or not isinstance(value, int | float):
                raise SnapshotError(f"goals: {key} must be a number")
            kwargs[name] = value
        goals = cls(**kwargs)
        if not 0 < goals.capacity_threshold <= 1:
            raise SnapshotError("goals: capacityThreshold must be in (0, 1]")
        for name in ("disk_balance", "broker_balance", "replica_balance", "leader_balance"):
            if not 1 <= getattr(goals, name) < 2:
                raise SnapshotError(f"goals: {_camel(name)} must be in [1, 2)")
        return goals


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclass(kw_only=True)
class Cluster:
    """A snapshot as columns. Brokers, directories, partitions and replicas are numbered by
    their order in the snapshot; every cross-reference is such an index.
    """

    broker_ids: I64
    broker_rack: I32  # index into ``racks``
    racks: list[str]
    dir_broker: I32
    dir_path: list[str]
    dir_state: npt.NDArray[np.int8]
    dir_total: I64
    dir_usable: I64
    part_topic: list[str]
    part_num: I64
    part_start: I64  # CSR: replicas of partition p are rep[part_start[p]:part_start[p+1]]
    part_leader: I32  # broker index, -1 when the partition has no leader
    rep_part: I32
    rep_broker: I32
    rep_dir: I32
    rep_size: I64
    rep_leader: B8
    _dir_index: dict[tuple[int, str], int] = field(default_factory=dict, repr=False)

    @property
    def n_brokers(self) -> int:
        return len(self.broker_ids)

    @property
    def n_dirs(self) -> int:
        return len(self.dir_broker)

    @property
    def n_partitions(self) -> int:
        return len(self.part_num)

    @property
    def n_replicas(self) -> int:
        return len(self.rep_part)

    def dir_index(self, broker_id: int, path: str) -> int:
        """Index of a directory named by broker id and path (``--dirs`` flags, log_dirs)."""
        if not self._dir_index:
            for d in range(self.n_dirs):
                self._dir_index[(int(self.broker_ids[self.dir_broker[d]]), self.dir_path[d])] = d
        try:
            return self._dir_index[(broker_id, path)]
        except KeyError:
            raise SnapshotError(f"broker {broker_id} has no log directory {path!r}") from None

    def broker_index(self, broker_id: int) -> int:
        hits = np.flatnonzero(self.broker_ids == broker_id)
        if len(hits) == 0:
            raise SnapshotError(f"no broker with id {broker_id} in the snapshot")
        return int(hits[0])

    def replica_bytes_per_dir(self) -> I64:
        return np.bincount(self.rep_dir, weights=self.rep_size, minlength=self.n_dirs).astype(
            np.int64
        )

    def dir_external(self) -> I64:
        """Bytes on each directory that belong to no listed replica (never moved by a plan)."""
        used = np.maximum(self.dir_total - self.dir_usable, 0)
        ext = np.maximum(used - self.replica_bytes_per_dir(), 0)
        ext[self.dir_state == OFFLINE] = 0
        out: I64 = ext.astype(np.int64)
        return out


def load_snapshot(path: str | Path) -> Cluster:
    """Read and validate a snapshot file."""
    try:
        raw = json.loads(Path(path).read_bytes())
    except (OSError, json.JSONDecodeError) as exc:
        raise SnapshotError(f"cannot read snapshot {path}: {exc}") from exc
    return parse_snapshot(raw)


def _int(value: object, what: str, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SnapshotError(f"{what}: expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise SnapshotError(f"{what}: must be >= {minimum}, got {value}")
    return value


def parse_snapshot(raw: object) -> Cluster:
    """Validate a decoded snapshot and turn it into columns. Every error names the offending
    broker, directory or partition: a planner that guesses about its input moves real data.
    """
    if not isinstance(raw, dict) or raw.get("version") != 1:
        raise SnapshotError('snapshot: expected an object with "version": 1')
    brokers = raw.get("brokers")
    partitions = raw.get("partitions")
    if not isinstance(brokers, list) or not brokers:
        raise SnapshotError("snapshot: 'brokers' must be a non-empty list")
    if not isinstance(partitions, list):
        raise SnapshotError("snapshot: 'partitions' must be a list")
    bc = _BrokerColumns()
    for b, broker in enumerate(brokers):
        bc.add(b, broker)
    pc = _PartitionColumns(len(partitions), bc)
    for p, part in enumerate(partitions):
        pc.add(p, part)
    counts = np.diff(pc.part_start)
    rep_part = np.repeat(np.arange(len(partitions), dtype=np.int32), counts)
    rep_broker_a = np.asarray(pc.rep_broker, np.int32)
    return Cluster(
        broker_ids=np.asarray(bc.broker_ids, np.int64),
        broker_rack=np.asarray(bc.broker_rack, np.int32),
        racks=bc.rack_names,
        dir_broker=np.asarray(bc.dir_broker, np.int32),
        dir_path=bc.dir_path,
        dir_state=np.asarray(bc.dir_state, np.int8),
        dir_total=np.asarray(bc.dir_total, np.int64),
        dir_usable=np.asarray(bc.dir_usable, np.int64),
        part_topic=pc.part_topic,
        part_num=pc.part_num,
        part_start=pc.part_start,
        part_leader=pc.part_leader,
        rep_part=rep_part,
        rep_broker=rep_broker_a,
        rep_dir=np.asarray(pc.rep_dir, np.int32),
        rep_size=np.repeat(pc.sizes, counts),
        rep_leader=rep_broker_a == pc.part_leader[rep_part],
        _dir_index=bc.dir_index,
    )


class _BrokerColumns:
    """The snapshot's brokers and their log directories, validated one by one into columns."""

    def __init__(self) -> None:
        self.broker_ids: list[int] = []
        self.rack_names: list[str] = []
        self.rack_of: dict[str, int] = {}
        self.broker_rack: list[int] = []
        self.dir_broker: list[int] = []
        self.dir_path: list[str] = []
        self.dir_state: list[int] = []
        self.dir_total: list[int] = []
        self.dir_usable: list[int] = []
        self.dir_index: dict[tuple[int, str], int] = {}
        self.broker_pos: dict[int, int] = {}

    def add(self, b: int, broker: object) -> None:
        if not isinstance(broker, dict):
            raise SnapshotError(f"brokers[{b}]: expected an object")
        bid = _int(broker.get("id"), f"brokers[{b}].id", minimum=0)
        if bid in self.broker_pos:
            raise SnapshotError(f"broker id {bid} appears twice")
        self.broker_pos[bid] = b
        self.broker_ids.append(bid)
        rack = broker.get("rack")
        rack = f"\0broker-{bid}" if rack is None else str(rack)  # no rack: a rack of its own
        self.broker_rack.append(self.rack_of.setdefault(rack, len(self.rack_of)))
        if len(self.rack_of) > len(self.rack_names):
            self.rack_names.append(rack)
        dirs = broker.get("logDirs")
        if not isinstance(dirs, list) or not dirs:
            raise SnapshotError(f"broker {bid}: 'logDirs' must be a non-empty list")
        for entry in dirs:
            self._add_dir(b, bid, entry)

    def _add_dir(self, b: int, bid: int, entry: object) -> None:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise SnapshotError(f"broker {bid}: each log dir needs a string 'path'")
        path = entry["path"]
        if (bid, path) in self.dir_index:
            raise SnapshotError(f"broker {bid}: log dir {path!r} listed twice")
        state = entry.get("state", "Active")
        if state not in STATES:
            raise SnapshotError(f"broker {bid} dir {path}: state {state!r} not in {STATES}")
        total = max(_int(entry.get("totalBytes", 0), f"broker {bid} dir {path} totalBytes"), 0)
        usable = max(_int(entry.get("usableBytes", 0), f"broker {bid} dir {path} usableBytes"), 0)
        if state != "Offline" and total <= 0:
            raise SnapshotError(f"broker {bid} dir {path}: totalBytes must be > 0")
        if usable > total:
            raise SnapshotError(f"broker {bid} dir {path}: usableBytes > totalBytes")
        self.dir_index[(bid, path)] = len(self.dir_path)
        self.dir_broker.append(b)
        self.dir_path.append(path)
        self.dir_state.append(STATES.index(state))
        self.dir_total.append(total)
        self.dir_usable.append(usable)


class _PartitionColumns:
    """The snapshot's partitions, validated one by one against the brokers into columns."""

    def __init__(self, n_parts: int, brokers: _BrokerColumns) -> None:
        self.brokers = brokers
        self.part_topic: list[str] = []
        self.part_num = np.empty(n_parts, np.int64)
        self.part_start = np.zeros(n_parts + 1, np.int64)
        self.part_leader = np.empty(n_parts, np.int32)
        self.rep_broker: list[int] = []
        self.rep_dir: list[int] = []
        self.sizes = np.empty(n_parts, np.int64)
        self.seen: set[tuple[str, int]] = set()

    def add(self, p: int, part: object) -> None:
        if not isinstance(part, dict):
            raise SnapshotError(f"partitions[{p}]: expected an object")
        topic = part.get("topic")
        if not isinstance(topic, str) or not topic:
            raise SnapshotError(f"partitions[{p}]: 'topic' must be a non-empty string")
        num = _int(part.get("partition"), f"{topic} partition", minimum=0)
        name = f"{topic}-{num}"
        if (topic, num) in self.seen:
            raise SnapshotError(f"partition {name} appears twice")
        self.seen.add((topic, num))
        replicas, dirs, leader = self._replicas(name, part)
        broker_pos = self.brokers.broker_pos
        for bid, path in zip(replicas, dirs, strict=True):
            if isinstance(bid, bool) or not isinstance(bid, int) or bid not in broker_pos:
                raise SnapshotError(f"partition {name}: replica on unknown broker {bid!r}")
            d = self.brokers.dir_index.get((bid, path)) if isinstance(path, str) else None
            if d is None:
                raise SnapshotError(f"partition {name}: broker {bid} has no log dir {path!r}")
            self.rep_broker.append(broker_pos[bid])
            self.rep_dir.append(d)
        self.part_topic.append(topic)
        self.part_num[p] = num
        self.part_start[p + 1] = self.part_start[p] + len(replicas)
        self.part_leader[p] = broker_pos[leader] if leader >= 0 else -1
        self.sizes[p] = _int(part.get("sizeBytes", 0), f"partition {name} sizeBytes", minimum=0)

    @staticmethod
    def _replicas(name: str, part: dict[str, Any]) -> tuple[list[Any], list[Any], int]:
        """The partition's replica list, log dir list and leader (-1: none), checked."""
        replicas = part.get("replicas")
        dirs = part.get("logDirs")
        if not isinstance(replicas, list) or not replicas:
            raise SnapshotError(f"partition {name}: 'replicas' must be a non-empty list")
        if not isinstance(dirs, list) or len(dirs) != len(replicas):
            raise SnapshotError(f"partition {name}: 'logDirs' must match 'replicas' in length")
        if len(set(replicas)) != len(replicas):
            raise SnapshotError(f"partition {name}: a broker appears twice in {replicas}")
        leader = part.get("leader", -1)
        leader = -1 if leader is None else _int(leader, f"partition {name} leader")
        if leader >= 0 and leader not in replicas:
            raise SnapshotError(f"partition {name}: leader {leader} is not a replica")
        return replicas, dirs, leader


def cluster_to_json(cluster: Cluster) -> dict[str, Any]:
    """The snapshot document for a cluster (the generator writes its clusters with this)."""
    ext = cluster.dir_external()
    rep_bytes = cluster.replica_bytes_per_dir()
    brokers = []
    for b in range(cluster.n_brokers):
        rack = cluster.racks[cluster.broker_rack[b]]
        dirs = []
        for d in np.flatnonzero(cluster.dir_broker == b):
            used = int(rep_bytes[d] + ext[d])
            total = int(cluster.dir_total[d])
            dirs.append(
                {
                    "path": cluster.dir_path[d],
                    "directoryId": f"dir-{int(cluster.broker_ids[b])}-{int(d)}",
                    "state": STATES[cluster.dir_state[d]],
                    "totalBytes": total,
                    "usableBytes": max(total - used, 0),
                }
            )
        brokers.append(
            {
                "id": int(cluster.broker_ids[b]),
                "rack": None if rack.startswith("\0") else rack,
                "logDirs": dirs,
            }
        )
    parts = []
    ids = cluster.broker_ids.tolist()
    rb = cluster.rep_broker.tolist()
    rd = cluster.rep_dir.tolist()
    starts = cluster.part_start.tolist()
    for p in range(cluster.n_partitions):
        lo, hi = starts[p], starts[p + 1]
        leader = int(cluster.part_leader[p])
        parts.append(
            {
                "topic": cluster.part_topic[p],
                "partition": int(cluster.part_num[p]),
                "replicas": [ids[b] for b in rb[lo:hi]],
                "leader": ids[leader] if leader >= 0 else -1,
                "logDirs": [cluster.dir_path[d] for d in rd[lo:hi]],
                "sizeBytes": int(cluster.rep_size[lo]) if hi > lo else 0,
            }
        )
    return {"version": 1, "brokers": brokers, "partitions": parts}


def executed(
    cluster: Cluster, placement: tuple[np.ndarray, np.ndarray], leader: np.ndarray | None = None
) -> Cluster:
    """The cluster after a plan is executed (reassignment, then a preferred election):
    replicas where the plan put them, directory free space updated, each partition led by
    the replica the plan made its leader (``leader``; None: the same replica as before).
    What a re-plan sees: the planner's second pass, the stability checks and the sweep."""
    cur_b, cur_d = placement
    ext = cluster.dir_external()
    rep = np.bincount(cur_d, weights=cluster.rep_size, minlength=cluster.n_dirs).astype(np.int64)
    lead = cluster.rep_leader if leader is None else np.asarray(leader, bool)
    part_leader = cluster.part_leader.copy()
    lead_rep = np.flatnonzero(lead)
    part_leader[cluster.rep_part[lead_rep]] = cur_b[lead_rep]
    return replace(
        cluster,
        rep_broker=cur_b.astype(np.int32).copy(),
        rep_dir=cur_d.astype(np.int32).copy(),
        dir_usable=np.maximum(cluster.dir_total - rep - ext, 0),
        part_leader=part_leader,
        rep_leader=lead.copy(),
        _dir_index={},
    )


def max_per_rack(replication: int, n_racks: int) -> int:
    """Most replicas of one partition a rack may hold: one when racks allow, else an even
    spread (Kafka's rack-aware assignment does the same)."""
    return max(1, math.ceil(replication / max(n_racks, 1)))
