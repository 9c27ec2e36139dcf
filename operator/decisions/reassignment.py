"""A Reassignment's decisions, pure: what is invalid, what to submit, how far it got.

``kafka-reassign-partitions --execute/--verify/--cancel`` makes the same decisions against the
live cluster; here they are functions of the spec and of a ``ClusterView`` (what the brokers
answered: metadata, DescribeLogDirs, ListPartitionReassignments), so every rule is unit-tested
without a broker. ``spindle.operator.brokers`` builds the view; the reconciler
(``spindle.operator.reconcile.reassignment``) applies what comes out.

Rules, and why:

- Validation names every problem, not the first: unknown topics, partitions, brokers and
  directories; a broker listed twice; ``logDirs`` of the wrong length or relative; a
  destination directory that is offline (DescribeLogDirs error) or that a LogVolume marks as
  taking no new replicas (Cordoned, Draining, ...). A directory a replica already lives in is
  not a *destination*: keeping a replica on a cordoned disk is allowed.
- The originals (replicas and the directory of each) are recorded in status *before* anything
  is submitted, and read only from status afterwards: after a restart the metadata already
  shows the target, so re-reading it would make a cancel "restore" the target.
- A partition is Completed when the controller no longer lists it as reassigning, its replicas
  equal the target, and each replica with an explicit directory is there with no future
  replica left. Bytes: every replica that must be copied (a new broker, or a new directory)
  counts the partition's size once; done is what the copy holds (capped), all of it once done.
- The rate is the bytes done between two probes over the time between their DescribeLogDirs
  answers (not between the passes' starts), from probes at least ``MIN_RATE_SECONDS`` apart.
- A cancel rolls back all the way (KIP-236 and more): in-flight reassignments are cancelled
  (null target), partitions that already completed are reassigned back to their original
  replicas, and every replica whose directory changed is moved back. Cancelled once every
  partition is exactly as recorded.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spindle.operator.specs.broker import SpecError
from spindle.operator.specs.meta import Obj

#: (topic, partition)
TP = tuple[str, int]
#: (topic, partition, broker id)
TPR = tuple[str, int, int]

THROTTLE_LEADER_RATE = "leader.replication.throttled.rate"
THROTTLE_FOLLOWER_RATE = "follower.replication.throttled.rate"
THROTTLE_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
THROTTLED_LEADERS = "leader.replication.throttled.replicas"
THROTTLED_FOLLOWERS = "follower.replication.throttled.replicas"
BROKER_THROTTLES = (THROTTLE_LEADER_RATE, THROTTLE_FOLLOWER_RATE, THROTTLE_DIR_RATE)
TOPIC_THROTTLES = (THROTTLED_LEADERS, THROTTLED_FOLLOWERS)

#: Phases of a Reassignment; Completed, Cancelled and Failed are final.
FINAL_PHASES = frozenset({"Completed", "Cancelled", "Failed"})
#: LogVolume states (and desired states) in which a directory takes new replicas.
OPEN_STATES = frozenset({"", "Active", "Pending"})


@dataclass(frozen=True)
class DirInfo:
    """One log directory as DescribeLogDirs reports it."""

    path: str
    #: Kafka error name of the directory (``KAFKA_STORAGE_ERROR`` when offline), else None.
    error: str | None = None
    replicas: Mapping[TP, int] = field(default_factory=dict)
    futures: Mapping[TP, int] = field(default_factory=dict)
    #: File system capacity and free bytes (DescribeLogDirs v4); None when not reported.
    total_bytes: int | None = None
    usable_bytes: int | None = None


@dataclass(frozen=True)
class ClusterView:
    """What the brokers said at one moment."""

    brokers: frozenset[int]
    #: Metadata: (topic, partition) -> replicas, in order.
    partitions: Mapping[TP, tuple[int, ...]]
    #: broker -> path -> directory.
    dirs: Mapping[int, Mapping[str, DirInfo]]
    #: ListPartitionReassignments: partitions with a reassignment in progress.
    reassigning: frozenset[TP] = frozenset()
    #: When the DescribeLogDirs answer arrived (UTC): the time of the sizes in ``dirs``, which
    #: a rate divides by; None when not known (the pass's time stands in).
    described_at: datetime.datetime | None = None

    def current_dir(self, tp: TP, broker: int) -> str | None:
        for d in self.dirs.get(broker, {}).values():
            if tp in d.replicas:
                return d.path
        return None

    def future(self, tp: TP, broker: int) -> tuple[str, int] | None:
        for d in self.dirs.get(broker, {}).values():
            if tp in d.futures:
                return d.path, d.futures[tp]
        return None

    def replica_bytes(self, tp: TP, broker: int) -> int | None:
        for d in self.dirs.get(broker, {}).values():
            if tp in d.replicas:
                return d.replicas[tp]
        return None

    def size(self, tp: TP) -> int:
        """Largest size any replica reports (followers lag the leader)."""
        sizes = [
            d.replicas[tp] for dirs in self.dirs.values() for d in dirs.values() if tp in d.replicas
        ]
        return max(sizes, default=0)


@dataclass(frozen=True)
class Target:
    """One partition's target placement; ``log_dirs`` entries are paths or ``"any"``."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)

    def dir_for(self, broker: int) -> str | None:
        """The explicit directory asked for on ``broker``; None for ``any``."""
        if self.log_dirs is None:
            return None
        d = self.log_dirs[self.replicas.index(broker)]
        return None if d == "any" else d


@dataclass(frozen=True)
class ReassignmentSpec:
    cluster: str
    targets: tuple[Target, ...]
    inter_broker_rate: int | None = None
    intra_broker_rate: int | None = None
    cancel: bool = False


def parse_reassignment(spec: Mapping[str, Any]) -> ReassignmentSpec:
    """The spec as typed values; the CRD's schema has checked the shapes already."""
    cluster = spec.get("cluster")
    if not isinstance(cluster, str) or not cluster:
        raise SpecError("spec.cluster is required")
    targets = []
    for entry in spec.get("partitions") or []:
        dirs = entry.get("logDirs")
        targets.append(
            Target(
                topic=str(entry["topic"]),
                partition=int(entry["partition"]),
                replicas=tuple(int(r) for r in entry["replicas"]),
                log_dirs=tuple(str(d) for d in dirs) if dirs else None,
            )
        )
    if not targets:
        raise SpecError("spec.partitions is empty: nothing to reassign")
    throttle = spec.get("throttle") or {}
    return ReassignmentSpec(
        cluster=cluster,
        targets=tuple(targets),
        inter_broker_rate=throttle.get("interBrokerBytesPerSecond"),
        intra_broker_rate=throttle.get("intraBrokerBytesPerSecond"),
        cancel=bool(spec.get("cancel")),
    )


def closed_dirs(logvolumes: Iterable[Mapping[str, Any]]) -> dict[tuple[int, str], str]:
    """(broker id, path) -> why no new replica may go there, from the cluster's LogVolumes."""
    out: dict[tuple[int, str], str] = {}
    for lv in logvolumes:
        spec, status = lv.get("spec") or {}, lv.get("status") or {}
        path = status.get("path")
        if not path or "brokerId" not in spec:
            continue
        desired = spec.get("desiredState") or "Active"
        state = status.get("state") or ""
        name = (lv.get("metadata") or {}).get("name", "?")
        if state not in OPEN_STATES:
            out[(int(spec["brokerId"]), path)] = f"is {state} (LogVolume {name})"
        elif desired not in OPEN_STATES:
            out[(int(spec["brokerId"]), path)] = f"is {desired} (LogVolume {name})"
    return out


def _replica_problems(name: str, t: Target, view: ClusterView) -> list[str]:
    out = []
    seen: set[int] = set()
    for b in t.replicas:
        if b in seen:
            out.append(f"{name}: broker {b} is listed twice in replicas")
        seen.add(b)
        if b not in view.brokers:
            known = ", ".join(map(str, sorted(view.brokers))) or "none"
            out.append(f"{name}: broker {b} is not in the cluster (brokers: {known})")
    return out


def _dir_problem(
    name: str, t: Target, b: int, d: str, view: ClusterView, closed: Mapping[tuple[int, str], str]
) -> str | None:
    """What is wrong with directory ``d`` as broker ``b``'s destination, if anything."""
    if d == "any":
        return None
    if not d.startswith("/"):
        return f"{name}: log dir {d!r} for broker {b} is not an absolute path"
    if b not in view.brokers:
        return None  # already named as an unknown broker
    info = view.dirs.get(b, {}).get(d)
    if info is None:
        have = ", ".join(sorted(view.dirs.get(b, {}))) or "none"
        return f"{name}: broker {b} has no log dir {d} (it has: {have})"
    if view.current_dir(t.tp, b) == d:
        return None  # staying put is not a destination
    if info.error:
        return f"{name}: destination log dir {d} on broker {b} is offline ({info.error})"
    if (b, d) in closed:
        return (
            f"{name}: destination log dir {d} on broker {b} {closed[(b, d)]}: "
            "it takes no new replicas"
        )
    return None


def _target_problems(
    t: Target, view: ClusterView, closed: Mapping[tuple[int, str], str]
) -> list[str]:
    name = f"{t.topic}-{t.partition}"
    if t.tp not in view.partitions:
        if not any(topic == t.topic for topic, _ in view.partitions):
            return [f"{name}: topic {t.topic!r} does not exist"]
        return [f"{name}: topic {t.topic!r} has no partition {t.partition}"]
    out = _replica_problems(name, t, view)
    if t.log_dirs is None:
        return out
    if len(t.log_dirs) != len(t.replicas):
        return [
            *out,
            f"{name}: logDirs has {len(t.log_dirs)} entries for {len(t.replicas)} replicas",
        ]
    for b, d in zip(t.replicas, t.log_dirs, strict=True):
        problem = _dir_problem(name, t, b, d, view, closed)
        if problem:
            out.append(problem)
    return out


def validate(
    spec: ReassignmentSpec, view: ClusterView, closed: Mapping[tuple[int, str], str]
) -> list[str]:
    """Every problem with the spec against the live cluster; empty when it may run."""
    problems = []
    seen: set[TP] = set()
    for t in spec.targets:
        if t.tp in seen:
            problems.append(f"{t.topic}-{t.partition}: listed twice")
        seen.add(t.tp)
        problems.extend(_target_problems(t, view, closed))
    return problems


def originals(spec: ReassignmentSpec, view: ClusterView) -> list[Obj]:
    """Per partition, what a cancel restores: replicas and the directory of each."""
    out = []
    for t in spec.targets:
        replicas = list(view.partitions[t.tp])
        out.append(
            {
                "topic": t.topic,
                "partition": t.partition,
                "phase": "Pending",
                "originalReplicas": replicas,
                "originalLogDirs": [view.current_dir(t.tp, b) or "any" for b in replicas],
                "bytesTotal": 0,
                "bytesDone": 0,
            }
        )
    return out


def replica_changes(targets: Iterable[Target], view: ClusterView) -> dict[TP, list[int]]:
    """AlterPartitionReassignments: partitions whose replicas (or their order) change."""
    return {
        t.tp: list(t.replicas)
        for t in targets
        if tuple(view.partitions.get(t.tp, ())) != t.replicas
    }


def dir_changes(targets: Iterable[Target], view: ClusterView) -> dict[TPR, str]:
    """AlterReplicaLogDirs still to send: explicit directories the replica is neither in nor
    already being copied to. Sent again on every pass until the broker has the replica (it
    answers REPLICA_NOT_AVAILABLE until a new replica exists, as the tool's retry loop knows)."""
    out: dict[TPR, str] = {}
    for t in targets:
        for b in t.replicas:
            d = t.dir_for(b)
            if d is None or view.current_dir(t.tp, b) == d:
                continue
            future = view.future(t.tp, b)
            if future is None or future[0] != d:
                out[(t.topic, t.partition, b)] = d
    return out


def throttles(
    spec: ReassignmentSpec, view: ClusterView
) -> tuple[dict[int, dict[str, str]], dict[str, dict[str, str]]]:
    """Broker and topic configs to set, as ``kafka-reassign-partitions --throttle`` and
    ``--replica-alter-log-dirs-throttle`` set them: the inter-broker rate on every broker of a
    moving partition, with its current replicas as throttled leaders and the new ones as
    throttled followers; the directory rate on brokers with a directory move."""
    brokers: dict[int, dict[str, str]] = {}
    topics: dict[str, dict[str, list[str]]] = {}
    moving = replica_changes(spec.targets, view)
    if spec.inter_broker_rate is not None:
        rate = str(spec.inter_broker_rate)
        for tp, target in moving.items():
            current = view.partitions[tp]
            for b in set(current) | set(target):
                brokers.setdefault(b, {}).update(
                    {THROTTLE_LEADER_RATE: rate, THROTTLE_FOLLOWER_RATE: rate}
                )
            entry = topics.setdefault(tp[0], {THROTTLED_LEADERS: [], THROTTLED_FOLLOWERS: []})
            entry[THROTTLED_LEADERS] += [f"{tp[1]}:{b}" for b in current]
            entry[THROTTLED_FOLLOWERS] += [f"{tp[1]}:{b}" for b in target if b not in current]
    if spec.intra_broker_rate is not None:
        for _t, _p, b in dir_changes(spec.targets, view):
            brokers.setdefault(b, {})[THROTTLE_DIR_RATE] = str(spec.intra_broker_rate)
    topic_configs = {
        topic: {k: ",".join(v) for k, v in cfg.items() if v} for topic, cfg in topics.items()
    }
    return brokers, topic_configs


def _moving_replicas(t: Target, original: Sequence[int]) -> list[int]:
    """Replicas that need a copy: new brokers, and existing ones asked into another dir."""
    return [b for b in t.replicas if b not in original or t.dir_for(b) is not None]


def partition_progress(t: Target, record: Mapping[str, Any], view: ClusterView) -> Obj:
    """One partition's status entry from the live view (the recorded originals kept)."""
    original = list(record.get("originalReplicas") or [])
    size = view.size(t.tp)
    done_flag = (
        t.tp not in view.reassigning
        and tuple(view.partitions.get(t.tp, ())) == t.replicas
        and all(
            t.dir_for(b) is None
            or (view.current_dir(t.tp, b) == t.dir_for(b) and view.future(t.tp, b) is None)
            for b in t.replicas
        )
    )
    total = done = 0
    for b in _moving_replicas(t, original):
        want = t.dir_for(b)
        if b in original and want is not None and record.get("originalLogDirs"):
            dirs = record["originalLogDirs"]
            if dirs[original.index(b)] == want:
                continue  # already there when it started: nothing to copy
        total += size
        if done_flag:
            done += size
            continue
        future = view.future(t.tp, b)
        if future is not None and (want is None or future[0] == want):
            done += min(future[1], size)
        elif b not in original:
            done += min(view.replica_bytes(t.tp, b) or 0, size)
    phase = "Completed" if done_flag else ("Moving" if total else "Pending")
    return {**record, "phase": phase, "bytesTotal": total, "bytesDone": min(done, total)}


def is_rolled_back(records: Iterable[Mapping[str, Any]], view: ClusterView) -> bool:
    """Every partition back on its original replicas and directories, nothing in flight."""
    for r in records:
        tp = (r["topic"], r["partition"])
        replicas = list(r.get("originalReplicas") or [])
        if tp in view.reassigning or list(view.partitions.get(tp, ())) != replicas:
            return False
        for b, d in zip(replicas, r.get("originalLogDirs") or ["any"] * len(replicas), strict=True):
            if view.future(tp, b) is not None:
                return False
            if d != "any" and view.current_dir(tp, b) != d:
                return False
    return True


def rollback_actions(
    records: Iterable[Mapping[str, Any]], view: ClusterView
) -> tuple[dict[TP, list[int] | None], dict[TPR, str]]:
    """What to send to roll back: a null target for reassignments in flight, the original
    replicas for partitions whose reassignment already completed, and the original directory
    for each replica elsewhere (moving a replica to where it is cancels its future copy)."""
    replicas: dict[TP, list[int] | None] = {}
    dirs: dict[TPR, str] = {}
    for r in records:
        tp = (r["topic"], r["partition"])
        original = list(r.get("originalReplicas") or [])
        if tp in view.reassigning:
            replicas[tp] = None
        elif list(view.partitions.get(tp, ())) != original:
            replicas[tp] = original
        for b, d in zip(original, r.get("originalLogDirs") or ["any"] * len(original), strict=True):
            if d == "any" or b not in view.brokers:
                continue
            current = view.current_dir(tp, b)
            if current is None:
                continue  # the broker does not hold it (yet): next pass
            if current != d or view.future(tp, b) is not None:
                dirs[(tp[0], tp[1], b)] = d
    return replicas, dirs


def _parse_time(text: str | None) -> datetime.datetime | None:
    """An RFC 3339 UTC time, whole seconds or with a fraction."""
    if not text:
        return None
    return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.UTC)


def probe_stamp(t: datetime.datetime) -> str:
    """``lastProbeTime`` to the millisecond: the rate divides by the time between two probes
    (about 2 s), which whole-second stamps would misstate by up to half (the rate read ~0.6x
    of a 150 KiB/s throttle, and the ETA as much too late)."""
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _stamp(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def remaining_text(seconds: float) -> str:
    """``1h2m``, ``3m4s``, ``5s``: short, like kubectl's ages."""
    s = max(0, round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60}m"
    if s >= 60:
        return f"{s // 60}m{s % 60}s"
    return f"{s}s"


#: The shortest time between two probes that makes a rate sample. A replica's size grows in
#: the mover's chunks (at least 64 KiB; 0.43 s at 150 KiB/s), so over a window of W seconds the
#: bytes seen are the rate times W give or take a chunk: at 0.3 s a sample reads 0 or twice the
#: rate; from 1 s on, one chunk misstates it by under half at such a rate.
MIN_RATE_SECONDS = 1.0
#: The figures of one probe: kept together while a probe too close to it makes no sample.
PROBE_FIGURES = (
    "bytesTotal", "bytesDone", "progress", "bytesPerSecond", "eta", "timeRemaining", "lastProbeTime",
)  # fmt: skip


def progress_fields(
    partitions: Sequence[Mapping[str, Any]],
    previous: Mapping[str, Any],
    measured: datetime.datetime,
) -> Obj:
    """Overall figures from the partitions and the previous status: bytes, percent, rate
    (bytes per second since the last probe, smoothed) and the ETA at that rate.

    ``measured`` is when the sizes were read (the DescribeLogDirs answer's arrival,
    ``ClusterView.described_at``), stamped as ``lastProbeTime``: the pass's start is not it,
    because Kubernetes reads, the broker connection and other calls come first and take
    uneven time on a loaded machine (two passes started 0.36 s apart had read sizes about a
    second apart: a rate of 3.6x the throttle). A pass measuring under ``MIN_RATE_SECONDS``
    after the last probe (the passes that the reconciler's own writes trigger come in quick
    succession) makes no sample: the last probe's figures (``PROBE_FIGURES``) stand as its
    baseline, so the next sample spans the whole time since, unless every partition is done
    (the final figures are written at once). A clock that went back restarts the baseline."""
    total = sum(int(p.get("bytesTotal") or 0) for p in partitions)
    done = sum(int(p.get("bytesDone") or 0) for p in partitions)
    finished = sum(1 for p in partitions if p.get("phase") == "Completed")
    out: Obj = {"partitionsTotal": len(partitions), "partitionsDone": finished}
    last = _parse_time(previous.get("lastProbeTime"))
    elapsed = None if last is None else (measured - last).total_seconds()
    if elapsed is not None and 0 <= elapsed < MIN_RATE_SECONDS and finished < len(partitions):
        return {**out, **{k: previous[k] for k in PROBE_FIGURES if k in previous}}
    out.update(
        bytesTotal=total,
        bytesDone=done,
        progress=f"{100 * done // total if total else (100 if finished == len(partitions) else 0)}%",
        lastProbeTime=probe_stamp(measured),
    )
    rate = float(previous.get("bytesPerSecond") or 0)
    if elapsed is not None and elapsed > 0:
        sample = max(0, done - int(previous.get("bytesDone") or 0)) / elapsed
        rate = sample if rate == 0 else 0.5 * rate + 0.5 * sample
    out["bytesPerSecond"] = round(rate)
    if rate > 0 and total > done:
        left = (total - done) / rate
        out["eta"] = _stamp(measured + datetime.timedelta(seconds=left))
        out["timeRemaining"] = remaining_text(left)
    return out
