"""Synthetic clusters skewed like real ones, for tests and benchmarks.

Why these shapes: a planner looks good on uniform data and fails on real clusters, where a
few topics hold most bytes (Zipf-distributed topic sizes, plus "hot" topics several times
larger still), partitions of one topic differ in size, disks of one broker differ in size
(JBOD grown over time), Kafka placed replicas by count (round robin across racks, fewest
partitions per directory) not by bytes, some brokers joined late and are nearly empty, and a
few directories are Offline or being drained. Deterministic for a seed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from spindle.rebalance.input.model import ACTIVE, DRAINING, OFFLINE, Cluster


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
    #: Relative rack sizes (brokers per rack); empty: brokers dealt to racks in turn.
    rack_weights: tuple[float, ...] = ()
    #: The first brokers, which alone held the older topics (the cluster grew later).
    aged_brokers: int = 0
    #: How much larger the older topics are (retention has had years to fill them).
    aged_factor: float = 1.0
    #: Replication factors topics pick from (each equally likely); empty: ``replication``.
    replication_mix: tuple[int, ...] = ()
    #: Fraction of partitions with two replicas on one rack before any plan (a past manual
    #: reassignment): a rule the full mode must repair.
    rack_violations: float = 0.0
    seed: int = 0


def generate(shape: Shape) -> Cluster:
    """Build a cluster of the given shape."""
    rng = np.random.default_rng(shape.seed)
    n_b = shape.brokers
    if n_b < 1 or shape.disks < 1:
        raise ValueError("need at least one broker and one disk")
    rf = min(max(shape.replication_mix or (shape.replication,)), n_b)
    n_racks = max(1, min(shape.racks, n_b))
    broker_ids = np.arange(1, n_b + 1, dtype=np.int64)
    broker_rack = _racks(shape, n_b, n_racks)
    mean_rf = float(np.mean(shape.replication_mix)) if shape.replication_mix else rf
    n_topics, topic_of, part_num, part_bytes = _topics(
        shape, rng, max(1, int(shape.replicas // mean_rf))
    )
    n_parts = len(topic_of)
    part_rf = _part_rf(shape, rng, n_topics, topic_of, n_b)
    brokers = _kafka_brokers(shape, rng, n_topics, topic_of, part_num, broker_rack, part_rf)
    if shape.rack_violations > 0:
        _violate_racks(shape, rng, brokers, broker_rack, part_rf)
    keep = np.arange(rf)[None, :] < part_rf[:, None]
    flat_b = brokers[keep]
    flat_dir = _kafka_dirs(flat_b, n_b, shape.disks)
    n_d = n_b * shape.disks
    rep_size, dir_total, dir_usable = _sizes(shape, rng, part_bytes, flat_dir, part_rf)
    state = np.full(n_d, ACTIVE, np.int8)
    pick = rng.permutation(n_d)
    state[pick[: shape.offline_dirs]] = OFFLINE
    state[pick[shape.offline_dirs : shape.offline_dirs + shape.draining_dirs]] = DRAINING
    part_start = np.zeros(n_parts + 1, np.int64)
    np.cumsum(part_rf, out=part_start[1:])
    lead_pos = np.where(rng.random(n_parts) < 0.9, 0, rng.integers(0, rf, n_parts) % part_rf)
    part_leader = brokers[np.arange(n_parts), lead_pos].astype(np.int32)
    rep_part = np.repeat(np.arange(n_parts, dtype=np.int32), part_rf)
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


def _racks(shape: Shape, n_b: int, n_racks: int) -> np.ndarray:
    """Each broker's rack: dealt in turn (equal racks), or in proportion to
    ``rack_weights``, still dealt in turn among the racks with places left, so brokers added
    last (the new ones) are spread over racks too."""
    if not shape.rack_weights:
        return (np.arange(n_b) % n_racks).astype(np.int32)
    w = np.resize(np.asarray(shape.rack_weights, np.float64), n_racks)
    places = np.maximum(1, np.floor(w / w.sum() * n_b)).astype(np.int64)
    while places.sum() < n_b:
        places[int(np.argmax(w / places))] += 1
    while places.sum() > n_b:
        places[int(np.argmax(places))] -= 1
    out: list[int] = []
    while len(out) < n_b:
        for r in range(n_racks):
            if places[r] > 0:
                out.append(r)
                places[r] -= 1
    return np.asarray(out[:n_b], np.int32)


def _part_rf(
    shape: Shape, rng: np.random.Generator, n_topics: int, topic_of: np.ndarray, n_b: int
) -> np.ndarray:
    """Each partition's replication factor: the topic's, from ``replication_mix``."""
    if not shape.replication_mix:
        return np.full(len(topic_of), min(shape.replication, n_b), np.int64)
    per_topic = rng.choice(np.asarray(shape.replication_mix, np.int64), n_topics)
    out: np.ndarray = np.minimum(per_topic[topic_of], n_b).astype(np.int64)
    return out


def _violate_racks(
    shape: Shape,
    rng: np.random.Generator,
    brokers: np.ndarray,
    broker_rack: np.ndarray,
    part_rf: np.ndarray,
) -> None:
    """Put a second replica of some partitions on the rack of their first (a rule broken
    before the planner ever ran), where that rack has another broker to take it."""
    n_parts = len(part_rf)
    cand = np.flatnonzero((part_rf >= 2) & (rng.random(n_parts) < shape.rack_violations))
    for p in cand.tolist():
        row = brokers[p, : part_rf[p]]
        mates = np.flatnonzero(broker_rack == broker_rack[row[0]])
        mates = mates[~np.isin(mates, row)]
        if len(mates):
            row[1] = int(mates[int(rng.integers(0, len(mates)))])


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
    if shape.aged_brokers:
        part_bytes[_old_topics(topic_of)] *= shape.aged_factor
    return n_topics, topic_of, part_num, part_bytes


def _old_topics(topic_of: np.ndarray) -> np.ndarray:
    """The partitions of the older topics (every other topic), which only the aged brokers
    hold."""
    return np.asarray(topic_of % 2 == 0)


def _kafka_brokers(
    shape: Shape,
    rng: np.random.Generator,
    n_topics: int,
    topic_of: np.ndarray,
    part_num: np.ndarray,
    broker_rack: np.ndarray,
    part_rf: np.ndarray,
) -> np.ndarray:
    """Kafka-style placement (partitions x replicas, broker indices; a partition's first
    ``part_rf`` columns count): brokers interleaved by rack, round robin per topic from a
    random start, followers shifted; recently added brokers get nothing, and the older
    topics (``aged_brokers``) sit on the first brokers only."""
    rf = int(part_rf.max(initial=1))
    n_b = shape.brokers
    old = max(rf, n_b - shape.new_brokers)
    starts = rng.integers(0, old, n_topics)
    if not shape.aged_brokers:
        return _ring(shape, rng, old, starts, topic_of, part_num, broker_rack, part_rf)
    aged = min(max(rf, shape.aged_brokers), old)
    brokers = _ring(shape, rng, old, starts, topic_of, part_num, broker_rack, part_rf)
    first = _old_topics(topic_of)
    brokers[first] = _ring(
        shape,
        rng,
        aged,
        starts % aged,
        topic_of[first],
        part_num[first],
        broker_rack,
        part_rf[first],
    )
    return brokers


def _ring(
    shape: Shape,
    rng: np.random.Generator,
    old: int,
    starts: np.ndarray,
    topic_of: np.ndarray,
    part_num: np.ndarray,
    broker_rack: np.ndarray,
    part_rf: np.ndarray,
) -> np.ndarray:
    """Kafka's round robin over the first ``old`` brokers, racks interleaved."""
    n_b, n_parts = shape.brokers, len(topic_of)
    rf = int(part_rf.max(initial=1))
    n_racks = max(1, min(shape.racks, n_b))
    by_rack = [[b for b in range(old) if broker_rack[b] == r] for r in range(n_racks)]
    seq: list[int] = []
    while any(by_rack):  # r0, r1, r2, r0, r1, r2, ...
        for lst in by_rack:
            if lst:
                seq.append(lst.pop(0))
    ring = np.asarray(seq, np.int64)
    first = (starts[topic_of] + part_num) % old
    spread = max(old // n_racks, 1)
    shift = (part_num // old) % spread
    pos = np.empty((n_parts, rf), np.int64)
    pos[:, 0] = first
    for j in range(1, rf):
        pos[:, j] = (first + j + n_racks * shift) % old
    brokers = ring[pos]
    for k in np.unique(part_rf).tolist():
        rows = np.flatnonzero(part_rf == k)
        if len(rows) == n_parts:
            _repair(brokers[:, :k], broker_rack, n_racks, old, rng)
        else:
            sub = brokers[rows, :k]
            _repair(sub, broker_rack, n_racks, old, rng)
            brokers[rows, :k] = sub
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
    shape: Shape,
    rng: np.random.Generator,
    part_bytes: np.ndarray,
    flat_dir: np.ndarray,
    rf: np.ndarray,
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
    # Python lists, not numpy scalars, in the per-row search (same draws, same result): at a
    # million replicas most rows of a lopsided rack layout need it.
    rack_l = rack.tolist()
    for i in np.flatnonzero(bad).tolist():
        row = brokers[i].tolist()
        for j in range(1, rf):
            used = row[:j]
            counts = [0] * n_racks
            for u in used:
                counts[rack_l[u]] += 1
            if counts[rack_l[row[j]]] < limit and row[j] not in used:
                continue
            base = int(rng.integers(0, n_old))
            for step in range(n_old):
                cand = (base + step) % n_old
                if (
                    cand not in row[:j]
                    and cand not in row[j + 1 :]
                    and counts[rack_l[cand]] < limit
                ):
                    row[j] = cand
                    break
        brokers[i] = row


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


#: Cluster shape families the planner is judged on (issue 15): each is one way real clusters
#: differ from a freshly generated one.
FAMILIES = (
    "uniform",
    "aged",
    "unequal-disks",
    "unequal-racks",
    "hot-topics",
    "new-brokers",
    "mixed-rf",
    "violations",
    "combined",
)


def family_shape(family: str, seed: int, replicas: int) -> Shape:
    """A cluster of ``family`` with about ``replicas`` replicas (brokers grow with it: 6 to
    15 at 2K replicas, about one per 500 at 20K), 2-4 disks, 3 racks of equal size and 45 %
    full unless the family says otherwise, so that every family can be planned: with
    replication 3 on 3 racks each rack holds a third of the bytes, so a small rack runs
    fuller (``unequal-racks`` and ``combined`` are emptier to leave it room).
    ``combined`` is the issue's example: unequal racks, aged brokers, unequal disks, mixed
    replication and a few rack violations at once."""
    brokers = 3 * (2 + seed % 4 + replicas // 2000)
    base = Shape(
        brokers=brokers,
        disks=2 + seed % 3,
        replicas=replicas,
        racks=3,
        hot_topics=1,
        target_utilisation=0.45,
        seed=seed,
    )
    aged: dict[str, object] = {"aged_brokers": brokers // 2, "aged_factor": 5.0}
    knobs: dict[str, dict[str, object]] = {
        "uniform": {"zipf": 0.0, "hot_topics": 0, "disk_sizes": (1.0,)},
        "aged": aged,
        "unequal-disks": {"disk_sizes": (0.5, 1.0, 2.0, 4.0)},
        "unequal-racks": {"rack_weights": (1.0, 2.0, 4.0), "target_utilisation": 0.3},
        "hot-topics": {"zipf": 1.3, "hot_topics": 4, "hot_factor": 20.0},
        "new-brokers": {"new_brokers": max(2, brokers // 4)},
        "mixed-rf": {"replication_mix": (1, 2, 3, 3)},
        "violations": {"rack_violations": 0.03, "offline_dirs": 1, "draining_dirs": 1},
        "combined": {
            **aged,
            "rack_weights": (1.0, 2.0, 3.0),
            "disk_sizes": (0.5, 1.0, 2.0, 4.0),
            "replication_mix": (2, 3, 3),
            "rack_violations": 0.01,
            "target_utilisation": 0.3,
        },
    }
    if family not in knobs:
        raise ValueError(f"unknown shape family {family!r}; known: {', '.join(FAMILIES)}")
    return replace(base, **knobs[family])  # type: ignore[arg-type]
