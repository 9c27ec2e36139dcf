"""Synthetic clusters skewed like real ones, for tests and benchmarks.

Why these shapes: a planner looks good on uniform data and fails on real clusters, where a
few topics hold most bytes (Zipf-distributed topic sizes, plus "hot" topics several times
larger still), partitions of one topic differ in size, disks of one broker differ in size
(JBOD grown over time), Kafka placed replicas by count (round robin across racks, fewest
partitions per directory) not by bytes, some brokers joined late and are nearly empty, and a
few directories are Offline or being drained. Deterministic for a seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from spindle.rebalance.model import ACTIVE, DRAINING, OFFLINE, Cluster


@dataclass(frozen=True, kw_only=True)
class Shape:
    """Knobs of a synthetic cluster; defaults give a moderately unbalanced cluster."""

    brokers: int = 6
    disks: int = 2  # per broker
    replicas: int = 300  # approximate; rounded to whole partitions
    replication: int = 3
    racks: int = 3
    zipf: float = 1.1  # topic size exponent
    hot_topics: int = 2
    hot_factor: float = 4.0
    new_brokers: int = 0  # brokers added recently: they hold almost nothing
    offline_dirs: int = 0
    draining_dirs: int = 0
    disk_sizes: tuple[float, ...] = (1.0, 1.5, 2.0)  # relative sizes of JBOD disks
    target_utilisation: float = 0.5  # cluster mean
    external: float = 0.01  # up to this fraction of a disk used by other files
    seed: int = 0


def generate(shape: Shape) -> Cluster:
    """Build a cluster of the given shape."""
    rng = np.random.default_rng(shape.seed)
    n_b = shape.brokers
    if n_b < 1 or shape.disks < 1:
        raise ValueError("need at least one broker and one disk")
    rf = min(shape.replication, n_b)
    n_racks = max(1, min(shape.racks, n_b))
    broker_ids = np.arange(1, n_b + 1, dtype=np.int64)
    broker_rack = (np.arange(n_b) % n_racks).astype(np.int32)
    n_topics, topic_of, part_num, part_bytes = _topics(shape, rng, max(1, shape.replicas // rf))
    n_parts = len(topic_of)
    brokers = _kafka_brokers(shape, rng, n_topics, topic_of, part_num, broker_rack, rf)
    flat_b = brokers.reshape(-1)
    flat_dir = _kafka_dirs(flat_b, n_b, shape.disks)
    n_d = n_b * shape.disks
    rep_size, dir_total, dir_usable = _sizes(shape, rng, part_bytes, flat_dir, rf)
    state = np.full(n_d, ACTIVE, np.int8)
    pick = rng.permutation(n_d)
    state[pick[: shape.offline_dirs]] = OFFLINE
    state[pick[shape.offline_dirs : shape.offline_dirs + shape.draining_dirs]] = DRAINING
    part_start = np.arange(0, n_parts * rf + 1, rf, dtype=np.int64)
    lead_pos = np.where(rng.random(n_parts) < 0.9, 0, rng.integers(0, rf, n_parts))
    part_leader = brokers[np.arange(n_parts), lead_pos].astype(np.int32)
    rep_part = np.repeat(np.arange(n_parts, dtype=np.int32), rf)
    rep_broker = flat_b.astype(np.int32)
    return Cluster(
        broker_ids=broker_ids,
        broker_rack=broker_rack,
        racks=[f"rack-{r}" for r in range(n_racks)],
        dir_broker=np.repeat(np.arange(n_b, dtype=np.int32), shape.disks),
        dir_path=[f"/var/lib/spindle/data-{d % shape.disks}" for d in range(n_d)],
        dir_state=state,
        dir_total=dir_total,
        dir_usable=dir_usable,
        part_topic=[f"topic-{t:05d}" for t in topic_of.tolist()],
        part_num=part_num,
        part_start=part_start,
        part_leader=part_leader,
        rep_part=rep_part,
        rep_broker=rep_broker,
        rep_dir=flat_dir.astype(np.int32),
        rep_size=rep_size,
        rep_leader=rep_broker == part_leader[rep_part],
    )


def _topics(
    shape: Shape, rng: np.random.Generator, n_parts: int
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """How many topics, each partition's topic and number, and its relative size: Zipf-sized topics, a few
    hot ones, partitions of a topic differing in size."""
    n_topics = max(1, n_parts // 24)
    ranks = rng.permutation(n_topics) + 1
    topic_bytes = 1.0 / ranks**shape.zipf
    hot = np.argsort(ranks)[: shape.hot_topics]
    topic_bytes[hot] *= shape.hot_factor
    # Big topics get more partitions (operators size them so), but less than proportionally.
    weights = topic_bytes**0.6 * rng.lognormal(0.0, 0.3, n_topics)
    per_topic = np.maximum(1, np.round(weights * n_parts / weights.sum())).astype(np.int64)
    per_topic[-1] = max(1, per_topic[-1] + n_parts - int(per_topic.sum()))
    while per_topic.sum() > n_parts and per_topic.max() > 1:
        per_topic[int(np.argmax(per_topic))] -= 1
    n_parts = int(per_topic.sum())
    topic_of = np.repeat(np.arange(n_topics), per_topic)
    part_num = np.concatenate([np.arange(k) for k in per_topic]).astype(np.int64)
    part_bytes = topic_bytes[topic_of] / per_topic[topic_of]
    part_bytes *= rng.lognormal(0.0, 0.5, n_parts)
    return n_topics, topic_of, part_num, part_bytes


def _kafka_brokers(
    shape: Shape,
    rng: np.random.Generator,
    n_topics: int,
    topic_of: np.ndarray,
    part_num: np.ndarray,
    broker_rack: np.ndarray,
    rf: int,
) -> np.ndarray:
    """Kafka-style placement (partitions x replicas, broker indices): brokers interleaved by
    rack, round robin per topic from a random start, followers shifted; recently added
    brokers get nothing."""
    n_b, n_parts = shape.brokers, len(topic_of)
    n_racks = max(1, min(shape.racks, n_b))
    old = max(rf, n_b - shape.new_brokers)
    by_rack = [[b for b in range(old) if b % n_racks == r] for r in range(n_racks)]
    seq: list[int] = []
    while any(by_rack):  # r0, r1, r2, r0, r1, r2, ...
        for lst in by_rack:
            if lst:
                seq.append(lst.pop(0))
    ring = np.asarray(seq, np.int64)
    starts = rng.integers(0, old, n_topics)
    first = (starts[topic_of] + part_num) % old
    spread = max(old // n_racks, 1)
    shift = (part_num // old) % spread
    pos = np.empty((n_parts, rf), np.int64)
    pos[:, 0] = first
    for j in range(1, rf):
        pos[:, j] = (first + j + n_racks * shift) % old
    brokers = ring[pos]
    _repair(brokers, broker_rack, n_racks, old, rng)
    return np.asarray(brokers)


def _kafka_dirs(flat_b: np.ndarray, n_b: int, disks: int) -> np.ndarray:
    """Each replica's directory: Kafka puts a new replica on the broker's directory with the
    fewest partitions."""
    order = np.argsort(flat_b, kind="stable")
    counts = np.bincount(flat_b, minlength=n_b)
    starts_b = np.zeros(n_b + 1, np.int64)
    np.cumsum(counts, out=starts_b[1:])
    rank = np.empty(len(flat_b), np.int64)
    rank[order] = np.arange(len(flat_b)) - starts_b[flat_b[order]]
    local_dir = rank % disks
    return np.asarray(flat_b * disks + local_dir)


def _sizes(
    shape: Shape, rng: np.random.Generator, part_bytes: np.ndarray, flat_dir: np.ndarray, rf: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Replica sizes, directory sizes (JBOD disks of mixed sizes at the target utilisation)
    and usable bytes (less other files), as whole synthetic units."""
    n_d = shape.brokers * shape.disks
    rel = rng.choice(np.asarray(shape.disk_sizes), n_d)
    rep_bytes = np.repeat(part_bytes, rf)
    dir_rep = np.bincount(flat_dir, weights=rep_bytes, minlength=n_d)
    scale = dir_rep.sum() / (shape.target_utilisation * rel.sum())
    total = rel * scale
    # A disk the data overflows in this synthetic world is simply a bigger disk.
    total = np.maximum(total, dir_rep / 0.95)
    unit = 1 << 20  # bytes per synthetic unit: sizes are integers
    norm = (1 << 40) / max(float(total.max()), 1e-9)
    sizes = np.maximum(np.round(part_bytes * norm / unit) * unit, unit).astype(np.int64)
    dir_total = np.round(total * norm).astype(np.int64)
    rep_size = np.repeat(sizes, rf)
    dir_rep_i = np.bincount(flat_dir, weights=rep_size, minlength=n_d).astype(np.int64)
    dir_total = np.maximum(dir_total, (dir_rep_i * 1.06).astype(np.int64) + unit)
    ext = (rng.random(n_d) * shape.external * dir_total).astype(np.int64)
    dir_usable = np.maximum(dir_total - dir_rep_i - ext, 0)
    return rep_size, dir_total, dir_usable


def _repair(
    brokers: np.ndarray, rack: np.ndarray, n_racks: int, n_old: int, rng: np.random.Generator
) -> None:
    """Fix the few rows where the shifted round robin put two replicas on one rack (racks of
    unequal size): replace the later replica by a random broker on a rack with room."""
    rf = brokers.shape[1]
    limit = max(1, -(-rf // n_racks))
    racks = rack[brokers]
    bad = np.zeros(len(brokers), bool)
    for j in range(rf):
        for k in range(j + 1, rf):
            bad |= racks[:, j] == racks[:, k]
    for i in np.flatnonzero(bad).tolist():
        row = brokers[i]
        for j in range(1, rf):
            used = list(row[:j])
            counts = np.bincount(rack[used], minlength=n_racks)
            if counts[rack[row[j]]] < limit and row[j] not in used:
                continue
            base = int(rng.integers(0, n_old))
            for step in range(n_old):
                cand = (base + step) % n_old
                if cand not in row[:j] and cand not in row[j + 1 :] and counts[rack[cand]] < limit:
                    row[j] = cand
                    break


def small_shape(seed: int) -> Shape:
    """4 brokers x 2 disks on 2 racks, 48 replicas (RF 2), every other one with a new broker:
    small enough for the exact (MIP) planner, so tests and the sweep benchmark compare against
    the optimum on it."""
    return Shape(
        brokers=4,
        disks=2,
        replicas=48,
        replication=2,
        racks=2,
        hot_topics=1,
        disk_sizes=(1.0, 1.5),
        new_brokers=seed % 2,
        target_utilisation=0.45,
        seed=seed,
    )


def mid_shape(seed: int) -> Shape:
    """8-16 brokers, 2-4 disks, 500-3000 replicas on 3 racks, some new brokers and Offline or
    Draining dirs: the sizes where the count goals are hardest for the greedy (bands a few
    replicas wide, racks of unequal size), used by the sweep benchmark and exchange tests."""
    return Shape(
        brokers=8 + seed % 9,
        disks=2 + seed % 3,
        replicas=500 * (1 + seed % 6),
        racks=3,
        new_brokers=seed % 3,
        offline_dirs=seed % 2,
        draining_dirs=(seed // 2) % 2,
        seed=seed,
    )
