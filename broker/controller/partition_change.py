"""How a partition's leader, ISR and replica set change: pure functions, no I/O.

This is Kafka's ``PartitionChangeBuilder`` and the parts of ``ReplicationControlManager`` that
decide (not store) changes, on :class:`~.model.PartitionState`:

* **Leader election** is clean unless the topic enables ``unclean.leader.election.enable``:
  a leader must be in the (target) ISR and *acceptable* -- its broker alive and unfenced and
  its replica's directory online (KIP-858: "only elect leaders whose dir is online"). An
  acceptable current leader is kept; otherwise replicas are tried in assignment order, so the
  preferred replica (the first) wins when it can. A PREFERRED election moves leadership to the
  first replica if it is acceptable and in the ISR. With no clean candidate the leader becomes
  -1 (NO_LEADER) -- or, for an unclean topic, the first acceptable replica, with the ISR reset
  to just it (possible data loss, as Kafka warns).
* **The ISR never becomes empty** by a removal: the last member stays (Kafka without ELR), so
  when its broker returns it can lead again without an unclean election.
* **Broker loss / fencing** and **directory failure** (KIP-112/858) remove that broker from the
  ISR and leadership of every affected partition -- all its partitions, or only those whose
  replica lives in a failed directory (or is recorded as LOST).
* **A replaced directory** (KIP-858): a directory id the metadata holds for a broker's
  replica but its registration no longer lists makes that replica LOST (directory ``LOST``,
  out of leadership and ISR); the broker re-creates it elsewhere and it catches up.
* **Reassignment** (KIP-455): adding = target - current, removing = current - target,
  replicas = target + removing; complete once the ISR holds every adding replica (or, with
  nothing to add, any non-removing replica), then replicas = target and the ISR loses the
  removing ones. Cancel (KIP-236) restores the original replicas (current - adding) and drops
  the adding ones from the ISR; if no original replica is in the ISR the revert is unclean.
* **Epochs**: every change bumps ``partition_epoch``; a new leader, or a replica set that
  lost a member, also bumps ``leader_epoch``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace
from enum import Enum

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.kafka_uuid import LOST_DIR, UNASSIGNED_DIR

from .model import PartitionState, TopicState

NO_LEADER = -1

Acceptable = Callable[[int], bool]
"""Whether a broker may lead this partition (alive, unfenced, its replica's dir online)."""


class Election(Enum):
    ONLINE = "online"
    """Keep an acceptable leader, else the first acceptable ISR member in replica order."""
    PREFERRED = "preferred"
    """Move leadership to the first replica if acceptable and in the ISR."""
    UNCLEAN = "unclean"
    """As ONLINE, then any acceptable replica even outside the ISR."""


def unclean_enabled(topic: TopicState, default: bool = False) -> bool:
    """The topic's ``unclean.leader.election.enable`` (broker default: false)."""
    value = topic.configs.get("unclean.leader.election.enable")
    return default if value is None else value.strip().lower() == "true"


def elect_leader(
    part: PartitionState,
    *,
    isr: list[int],
    replicas: list[int],
    acceptable: Acceptable,
    election: Election,
) -> tuple[int, bool]:
    """(new leader or NO_LEADER, whether the election was unclean)."""

    def valid(b: int) -> bool:
        return b in isr and acceptable(b)

    if election is Election.PREFERRED and replicas and valid(replicas[0]):
        return replicas[0], False
    if part.leader != NO_LEADER and part.leader in replicas and valid(part.leader):
        return part.leader, False
    for b in replicas:
        if valid(b):
            return b, False
    if election is Election.UNCLEAN:
        for b in replicas:
            if acceptable(b):
                return b, True
    return NO_LEADER, False


def _maybe_complete(
    replicas: list[int], isr: list[int], adding: list[int], removing: list[int]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """KIP-455 completion: (replicas, isr, adding, removing) after it, or unchanged."""
    if not adding and not removing:
        return replicas, isr, adding, removing
    if adding:
        if not all(b in isr for b in adding):
            return replicas, isr, adding, removing
    elif not any(b in isr and b not in removing for b in replicas):
        return replicas, isr, adding, removing
    new_isr = [b for b in isr if b not in removing]
    if not new_isr:
        return replicas, isr, adding, removing
    return [b for b in replicas if b not in removing], new_isr, [], []


def change_partition(
    part: PartitionState,
    *,
    acceptable: Acceptable,
    isr: list[int] | None = None,
    replicas: list[int] | None = None,
    adding: list[int] | None = None,
    removing: list[int] | None = None,
    election: Election = Election.ONLINE,
    directories: Mapping[int, str] | None = None,
) -> PartitionState | None:
    """Apply target ISR/replicas/reassignment to ``part``, elect, bump epochs; None if nothing
    changes (see module docstring). ``directories`` overrides replicas' directory ids."""
    t_replicas = list(part.replicas if replicas is None else replicas)
    t_isr = list(part.isr if isr is None else isr)
    t_adding = list(part.adding if adding is None else adding)
    t_removing = list(part.removing if removing is None else removing)
    t_replicas, t_isr, t_adding, t_removing = _maybe_complete(
        t_replicas, t_isr, t_adding, t_removing
    )
    leader, unclean = elect_leader(
        part, isr=t_isr, replicas=t_replicas, acceptable=acceptable, election=election
    )
    if unclean:
        t_isr = [leader]
    elif not t_isr:
        t_isr = list(part.isr)  # never empty the ISR by a removal: the last member stays
    old_dirs = dict(zip(part.replicas, part.directories, strict=True))
    old_dirs.update(directories or {})
    t_dirs = [old_dirs.get(b, UNASSIGNED_DIR) for b in t_replicas]
    unchanged = (
        leader == part.leader
        and t_isr == part.isr
        and t_replicas == part.replicas
        and t_adding == part.adding
        and t_removing == part.removing
        and t_dirs == part.directories
    )
    if unchanged:
        return None
    bump_leader = leader != part.leader or not set(part.replicas) <= set(t_replicas)
    return replace(
        part,
        replicas=t_replicas,
        directories=t_dirs,
        leader=leader,
        isr=t_isr,
        adding=t_adding,
        removing=t_removing,
        leader_epoch=part.leader_epoch + (1 if bump_leader else 0),
        partition_epoch=part.partition_epoch + 1,
    )


def replica_dir(part: PartitionState, broker: int) -> str:
    return part.directories[part.replicas.index(broker)]


def replica_online(
    part: PartitionState, broker: int, *, active: Collection[int], offline_dirs: Collection[str]
) -> bool:
    """A replica can lead or be in the ISR: its broker active, its directory not offline/LOST."""
    if broker not in active:
        return False
    d = replica_dir(part, broker)
    return d != LOST_DIR and d not in offline_dirs


def ineligible_joiners(
    part: PartitionState,
    isr: list[int],
    *,
    active: Collection[int],
    offline_dirs: Mapping[int, Collection[str]],
) -> list[int]:
    """The brokers an AlterPartition's ``isr`` adds to ``part``'s ISR that may not join it
    (Kafka's INELIGIBLE_REPLICA, KIP-841/858): fenced or gone, or their replica in an offline
    or LOST directory. The directory matters as much as the broker: a follower whose replica's
    directory failed is still live, and a leader that saw it fetch would re-add it to an ISR
    the directory-offline rule takes it out of again, write after write."""
    return [
        b
        for b in isr
        if b not in part.isr
        and not replica_online(part, b, active=active, offline_dirs=offline_dirs.get(b, ()))
    ]


def acceptable_for(
    part: PartitionState,
    *,
    active: Collection[int],
    offline_dirs: Mapping[int, Collection[str]],
    excluded: int = NO_LEADER,
) -> Acceptable:
    """The acceptable-leader predicate of one partition (``excluded`` never is)."""

    def ok(b: int) -> bool:
        return (
            b != excluded
            and b in part.replicas
            and replica_online(part, b, active=active, offline_dirs=offline_dirs.get(b, ()))
        )

    return ok


TopicChanges = dict[str, dict[int, PartitionState]]


def _remove_replica(
    topics: Iterable[TopicState],
    broker: int,
    affected: Callable[[PartitionState], bool],
    *,
    active: Collection[int],
    offline_dirs: Mapping[int, Collection[str]],
    lost: bool = False,
) -> TopicChanges:
    """``broker`` leaves leadership and ISR of every ``affected`` partition it holds. ``lost``:
    its replica's directory becomes LOST too, so a replica already out of the ISR changes."""
    out: TopicChanges = {}
    for topic in topics:
        election = Election.UNCLEAN if unclean_enabled(topic) else Election.ONLINE
        for part in topic.partitions.values():
            if broker not in part.replicas or not affected(part):
                continue
            if not lost and broker not in part.isr and part.leader != broker:
                continue
            new = change_partition(
                part,
                acceptable=acceptable_for(
                    part, active=active, offline_dirs=offline_dirs, excluded=broker
                ),
                isr=[b for b in part.isr if b != broker],
                election=election,
                directories={broker: LOST_DIR} if lost else None,
            )
            if new is not None:
                out.setdefault(topic.name, {})[part.partition] = new
    return out


def on_broker_fenced(
    topics: Iterable[TopicState],
    broker: int,
    *,
    active: Collection[int],
    offline_dirs: Mapping[int, Collection[str]],
) -> TopicChanges:
    """Broker lost (session expired, SIGKILL) or fenced: leave every leadership and ISR."""
    return _remove_replica(
        topics, broker, lambda _p: True, active=active, offline_dirs=offline_dirs
    )


def on_dirs_offline(
    topics: Iterable[TopicState],
    broker: int,
    dirs: Collection[str],
    *,
    active: Collection[int],
    offline_dirs: Mapping[int, Collection[str]],
) -> TopicChanges:
    """KIP-858 handleDirectoriesOffline: leave leadership and ISR of every partition whose
    replica on ``broker`` is in one of ``dirs`` or recorded as LOST."""
    bad = set(dirs) | {LOST_DIR}
    return _remove_replica(
        topics,
        broker,
        lambda p: replica_dir(p, broker) in bad,
        active=active,
        offline_dirs=offline_dirs,
    )


def lost_dirs(topics: Iterable[TopicState], broker: int, registered: Collection[str]) -> set[str]:
    """KIP-858: the directory ids the metadata places ``broker``'s replicas in that its
    current registration no longer lists (a replaced disk comes back with a new
    ``directory.id``; a directory dropped from ``log.dirs`` is gone). Empty when the
    registration lists no directories (nothing to compare with)."""
    if not registered:
        return set()
    known = {*registered, UNASSIGNED_DIR, LOST_DIR}
    return {
        replica_dir(p, broker)
        for t in topics
        for p in t.partitions.values()
        if broker in p.replicas and replica_dir(p, broker) not in known
    }


def on_dirs_lost(
    topics: Iterable[TopicState],
    broker: int,
    dirs: Collection[str],
    *,
    active: Collection[int],
    offline_dirs: Mapping[int, Collection[str]],
) -> TopicChanges:
    """KIP-858: ``broker``'s replicas in ``dirs`` (directories it no longer has) are LOST: their
    directory becomes ``LOST`` and they leave leadership and the ISR (the last ISR member
    stays, as everywhere here). The broker re-creates them empty in a live directory of its
    own and reports that directory; they rejoin the ISR once caught up with the leader."""
    return _remove_replica(
        topics,
        broker,
        lambda p: replica_dir(p, broker) in dirs,
        active=active,
        offline_dirs=offline_dirs,
        lost=True,
    )


def on_broker_unfenced(
    topics: Iterable[TopicState],
    broker: int,
    *,
    active: Collection[int],
    offline_dirs: Mapping[int, Collection[str]],
) -> TopicChanges:
    """A broker is back: leaderless partitions it can lead (clean: it is still in their ISR,
    the last member kept there) get it as leader."""
    out: TopicChanges = {}
    for topic in topics:
        for part in topic.partitions.values():
            if part.leader != NO_LEADER or broker not in part.replicas:
                continue
            new = change_partition(
                part, acceptable=acceptable_for(part, active=active, offline_dirs=offline_dirs)
            )
            if new is not None:
                out.setdefault(topic.name, {})[part.partition] = new
    return out


def start_reassignment(
    part: PartitionState, target: list[int], *, acceptable: Acceptable
) -> PartitionState | None:
    """KIP-455 AlterPartitionReassignments with a (validated) target; None if nothing changes.

    As Kafka, adding/removing are computed against the current replica list, which during an
    ongoing reassignment already holds its adding and removing replicas: a new target thus
    replaces the old one, and replicas only the old one added are removed again.
    """
    current = part.replicas
    adding = [b for b in target if b not in current]
    removing = [b for b in current if b not in target]
    return change_partition(
        part,
        acceptable=acceptable,
        replicas=list(target) + removing,
        adding=adding,
        removing=removing,
    )


def cancel_reassignment(
    part: PartitionState, *, acceptable: Acceptable, unclean_allowed: bool
) -> PartitionState | None:
    """KIP-236/455 cancel: back to the original replicas, adding replicas out of the ISR.
    NO_REASSIGNMENT_IN_PROGRESS if there is none; INVALID_REPLICA_ASSIGNMENT if the revert
    needs an unclean election the topic does not allow."""
    if not part.adding and not part.removing:
        raise KafkaError(
            f"no reassignment of partition {part.partition} is in progress",
            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        )
    original = [b for b in part.replicas if b not in part.adding]
    isr = [b for b in part.isr if b not in part.adding]
    unclean = not isr
    if unclean and not unclean_allowed:
        raise KafkaError(
            f"reverting the reassignment of partition {part.partition} would need an unclean "
            "leader election",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )
    return change_partition(
        part,
        acceptable=acceptable,
        replicas=original,
        isr=isr,
        adding=[],
        removing=[],
        election=Election.UNCLEAN if unclean else Election.ONLINE,
    )


def elect_preferred(part: PartitionState, *, acceptable: Acceptable) -> PartitionState:
    """ElectLeaders PREFERRED for one partition, with Kafka's per-partition errors."""
    preferred = part.replicas[0]
    if part.leader == preferred:
        raise KafkaError(
            "the preferred replica is already the leader", ErrorCode.ELECTION_NOT_NEEDED
        )
    if preferred not in part.isr or not acceptable(preferred):
        raise KafkaError(
            f"preferred replica {preferred} is not available or not in the ISR {part.isr}",
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        )
    new = change_partition(part, acceptable=acceptable, election=Election.PREFERRED)
    assert new is not None
    return new


def elect_unclean(part: PartitionState, *, acceptable: Acceptable) -> PartitionState:
    """ElectLeaders UNCLEAN: only for a leaderless partition; any acceptable replica."""
    if part.leader != NO_LEADER and acceptable(part.leader):
        raise KafkaError("the partition already has a leader", ErrorCode.ELECTION_NOT_NEEDED)
    new = change_partition(part, acceptable=acceptable, election=Election.UNCLEAN)
    if new is None or new.leader == NO_LEADER:
        raise KafkaError(
            "no replica of the partition is alive", ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        )
    return new


def leader_imbalance(topics: Iterable[TopicState]) -> dict[int, float]:
    """Kafka's auto.leader.rebalance check: per preferred broker, the share of the partitions
    it is preferred for that it does not lead (compare with
    ``leader.imbalance.per.broker.percentage`` / 100)."""
    preferred: dict[int, int] = {}
    not_leading: dict[int, int] = {}
    for topic in topics:
        for part in topic.partitions.values():
            if not part.replicas:
                continue
            b = part.replicas[0]
            preferred[b] = preferred.get(b, 0) + 1
            if part.leader != b:
                not_leading[b] = not_leading.get(b, 0) + 1
    return {b: not_leading.get(b, 0) / n for b, n in preferred.items()}


def preferred_leader_moves(
    topics: Iterable[TopicState],
    *,
    threshold: float,
    acceptable: Callable[[TopicState, PartitionState], Acceptable],
) -> list[tuple[str, int]]:
    """The auto leader rebalance (``auto.leader.rebalance.enable``): for every broker whose
    :func:`leader_imbalance` exceeds ``threshold`` (``leader.imbalance.per.broker.percentage``
    / 100), the partitions it is preferred for, does not lead, and could lead cleanly now
    (in the ISR and acceptable), with no reassignment in progress."""
    topics = list(topics)
    over = {b for b, ratio in leader_imbalance(topics).items() if ratio > threshold}
    out = []
    for topic in topics:
        for part in sorted(topic.partitions.values(), key=lambda p: p.partition):
            if not part.replicas or part.adding or part.removing:
                continue
            preferred = part.replicas[0]
            if preferred not in over or part.leader == preferred or preferred not in part.isr:
                continue
            if acceptable(topic, part)(preferred):
                out.append((topic.name, part.partition))
    return out
