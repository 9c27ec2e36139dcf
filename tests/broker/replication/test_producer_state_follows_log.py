"""A replica's idempotent-producer state follows its log, leader or follower (Kafka's
``ProducerStateManager``: followers update it from replicated batches, a truncation rebuilds
it), and an acks=all wait ends with NOT_LEADER_OR_FOLLOWER when the broker stops leading.

Real storage (a LogManager on a temporary directory) and the real fetcher path (a fetch
response handed to the follower's ``_apply``); the metadata is a plain object the test
changes, as the etcd watch would, so the order of leadership changes is exact: a follower
that sees its partition leaderless before it is elected never passes through "follower
becomes leader" -- the only moment the broker used to read producer state back from the
log, so such a leader accepted a retry of a batch it had replicated as new data.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace

import pytest
from spindle.broker.common.errors import ErrorCode
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch
from spindle.broker.replication.producer_state import DuplicateBatch
from spindle.broker.replication.replica_manager import ReplicaManager
from spindle.broker.storage import LogManager, StorageSettings

from .fake_metadata import Assigner, Metadata, Part, Topic

TP = TopicPartition("t", 0)
PID = 7
ME, OTHER = 2, 1


def _batch(seq: int, value: bytes, *, offset: int = 0, epoch: int = 0) -> bytes:
    return build_batch(
        [value],
        base_offset=offset,
        producer_id=PID,
        producer_epoch=0,
        base_sequence=seq,
        partition_leader_epoch=epoch,
    )


def _response(
    records: bytes = b"", hw: int = 0, diverging: tuple[int, int] | None = None
) -> SimpleNamespace:
    part = SimpleNamespace(
        partition_index=0,
        error_code=0,
        records=records,
        high_watermark=hw,
        diverging_epoch=(
            None
            if diverging is None
            else SimpleNamespace(epoch=diverging[0], end_offset=diverging[1])
        ),
    )
    return SimpleNamespace(responses=[SimpleNamespace(topic="t", partitions=[part])])


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    settings = StorageSettings.model_validate({"log.dirs": [str(tmp_path / "d0")]})
    manager = LogManager.open(settings, cluster_id="c", node_id=ME, background=False)
    try:
        yield manager
    finally:
        manager.close()


def _metadata(leader: int, epoch: int) -> Metadata:
    part = Part(0, [OTHER, ME], ["", ""], leader, epoch, [OTHER, ME])
    return Metadata({"t": Topic("t", {0: part})})


async def _lead_after_leaderless_spell(replicas: ReplicaManager, md: Metadata, epoch: int) -> None:
    """The partition loses its leader (both replicas fenced, say), then this broker is
    elected: two metadata changes, applied in order."""
    part = md.topics["t"].partitions[0]
    part.leader, part.leader_epoch = -1, epoch
    await replicas.apply_metadata()
    part.leader, part.leader_epoch = ME, epoch + 1
    await replicas.apply_metadata()
    assert TP in replicas.roles.leaders


async def test_a_new_leader_answers_a_retry_of_a_batch_it_replicated_as_a_duplicate(
    logs: LogManager,
) -> None:
    md = _metadata(leader=OTHER, epoch=0)
    replicas = ReplicaManager(
        node_id=ME, logs=logs, metadata=md, assigner=Assigner(), static_configs={}
    )
    await replicas.start()
    try:
        batch = _batch(0, b"first")
        replicas.fetchers.fetchers[OTHER]._apply(_response(batch, hw=1))
        replica = logs.get_log(TP)
        assert replica is not None
        assert replica.log_end_offset == 1

        await _lead_after_leaderless_spell(replicas, md, epoch=1)
        with pytest.raises(DuplicateBatch) as dup:
            replicas.append(TP, batch)  # the producer's retry, now sent to this broker
        assert (dup.value.meta.base_offset, dup.value.meta.last_offset) == (0, 0)
        assert replica.log_end_offset == 1
        # The next batch follows on, in sequence.
        base, _ = replicas.append(TP, _batch(1, b"second"))
        assert base == 1
    finally:
        await replicas.close()


async def test_a_truncated_follower_forgets_the_batches_it_cut(logs: LogManager) -> None:
    # This broker led epoch 0 and wrote sequences 0 and 1; only sequence 0 was committed.
    replica = logs.get_or_create_log(TP)
    replica.append(_batch(0, b"kept"), leader_epoch=0)
    replica.append(_batch(1, b"lost"), leader_epoch=0)
    replica.high_watermark = 1
    md = _metadata(leader=OTHER, epoch=1)
    replicas = ReplicaManager(
        node_id=ME, logs=logs, metadata=md, assigner=Assigner(), static_configs={}
    )
    await replicas.start()
    try:
        # The new leader ended epoch 0 at offset 1: the follower cuts sequence 1 away.
        replicas.fetchers.fetchers[OTHER]._apply(_response(diverging=(0, 1)))
        assert replica.log_end_offset == 1

        await _lead_after_leaderless_spell(replicas, md, epoch=2)
        # The producer never had sequence 1 acknowledged and sends it again: it is new data
        # here, not a duplicate of offset 1 (which no longer holds it).
        base, _ = replicas.append(TP, _batch(1, b"lost, sent again"))
        assert base == 1
        assert replica.log_end_offset == 2
    finally:
        await replicas.close()


async def test_an_acks_all_wait_ends_with_not_leader_when_the_broker_stops_leading(
    logs: LogManager,
) -> None:
    md = _metadata(leader=ME, epoch=0)
    replicas = ReplicaManager(
        node_id=ME, logs=logs, metadata=md, assigner=Assigner(), static_configs={}
    )
    await replicas.start()
    try:
        replicas.append(TP, _batch(0, b"uncommitted"))  # the follower never fetches it
        wait = asyncio.create_task(replicas.wait_committed({TP: 1}, timeout_s=60))
        await asyncio.sleep(0.05)
        assert not wait.done()
        part = md.topics["t"].partitions[0]
        part.leader, part.leader_epoch = OTHER, 1  # leadership moved away
        await replicas.apply_metadata()
        failed = await asyncio.wait_for(wait, 10)
        assert failed[TP].code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        await replicas.close()


class SlowAssigner(Assigner):
    """AssignReplicasToDirs that waits until the test lets it through (etcd slow to answer)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.called = asyncio.Event()

    async def assign_replica_dirs(
        self, node_id: int, assignments: Mapping[TopicPartition, str]
    ) -> None:
        self.called.set()
        await self.release.wait()


async def test_a_new_replica_is_led_before_its_directory_is_reported(logs: LogManager) -> None:
    """While the report of a new replica's directory waits on etcd, a produce finds the
    broker leading it: the record waits for the follower (the high watermark stays put)
    instead of being committed as if alone in the ISR and then answered
    NOT_LEADER_OR_FOLLOWER (a CreateTopics answered, then a produce failing, under load).
    The watch is the one path that creates replicas; the broker that created the topic
    answers CreateTopics once its watch has applied it (it used to create them itself, in
    the handler: the same rule held there)."""
    md = Metadata({})
    assigner = SlowAssigner()
    replicas = ReplicaManager(
        node_id=ME, logs=logs, metadata=md, assigner=assigner, static_configs={}
    )
    await replicas.start()
    md.topics["t"] = Topic("t", {0: Part(0, [ME, OTHER], ["", ""], ME, 0, [ME, OTHER])})
    report = asyncio.create_task(replicas.apply_metadata({"t"}))  # the watch brings it
    try:
        await asyncio.wait_for(assigner.called.wait(), 10)
        assert TP in replicas.roles.leaders
        base, _ = replicas.append(TP, _batch(0, b"new"))
        replica = logs.get_log(TP)
        assert replica is not None
        assert (base, replica.log_end_offset, replica.high_watermark) == (0, 1, 0)
        failed = await replicas.wait_committed({TP: 1}, timeout_s=0.2)
        assert failed[TP].code == ErrorCode.REQUEST_TIMED_OUT  # not NOT_LEADER_OR_FOLLOWER
    finally:
        assigner.release.set()
        await asyncio.wait_for(report, 10)
        await replicas.close()


async def test_an_append_to_a_replica_led_without_its_role_takes_the_role_first(
    logs: LogManager,
) -> None:
    """Whatever left the role behind the metadata, the append takes it before writing: the
    record then waits for the follower instead of counting as committed at once."""
    md = _metadata(leader=ME, epoch=0)
    replicas = ReplicaManager(
        node_id=ME, logs=logs, metadata=md, assigner=Assigner(), static_configs={}
    )
    await replicas.start()
    try:
        del replicas.roles.leaders[TP]  # the role lost, the metadata unchanged
        replicas.append(TP, _batch(0, b"new"))
        replica = logs.get_log(TP)
        assert replica is not None
        assert TP in replicas.roles.leaders
        assert (replica.log_end_offset, replica.high_watermark) == (1, 0)
    finally:
        await replicas.close()


async def test_a_metadata_change_that_missed_the_roles_is_taken_by_the_next_report_round(
    logs: LogManager,
) -> None:
    """A leadership the metadata gives but no listener applied (the metadata changed under the
    roles) is taken by :meth:`ReplicaManager.check_roles`, the report loop's first step, and
    named; once in step it finds nothing. Both directions: a follower made leader, and back."""
    md = _metadata(leader=OTHER, epoch=0)
    replicas = ReplicaManager(
        node_id=ME, logs=logs, metadata=md, assigner=Assigner(), static_configs={}
    )
    await replicas.start()
    try:
        assert replicas.check_roles() == []
        md.topics["t"] = _metadata(leader=ME, epoch=1).topics["t"]  # no apply_metadata
        assert TP not in replicas.roles.leaders
        assert replicas.check_roles() == [TP]
        assert replicas.roles.leaders[TP].leader_epoch == 1
        assert replicas.check_roles() == []
        md.topics["t"] = _metadata(leader=OTHER, epoch=2).topics["t"]
        assert replicas.check_roles() == [TP]
        assert TP not in replicas.roles.leaders
        assert replicas.check_roles() == []
    finally:
        await replicas.close()


async def test_a_role_the_metadata_no_longer_gives_is_dropped_by_the_next_report_round(
    logs: LogManager,
) -> None:
    """The other way out of step: a leadership kept after the metadata took it away without
    giving it to anyone (leader -1), or a fetch kept for a replica no longer assigned here.
    Either would go on asking the controller for ISR changes, or fetching, for nothing."""
    md = _metadata(leader=ME, epoch=0)
    replicas = ReplicaManager(
        node_id=ME, logs=logs, metadata=md, assigner=Assigner(), static_configs={}
    )
    await replicas.start()
    try:
        assert TP in replicas.roles.leaders
        md.topics["t"].partitions[0].leader = -1  # no apply_metadata
        assert replicas.check_roles() == [TP]
        assert TP not in replicas.roles.leaders
        assert replicas.check_roles() == []
        md.topics["t"] = _metadata(leader=OTHER, epoch=1).topics["t"]
        assert replicas.check_roles() == [TP]
        assert replicas.roles.out_of_step({}) == [TP]  # the fetch kept, the replica unassigned
    finally:
        await replicas.close()


async def test_a_restarted_leader_answers_a_retry_sent_before_its_start_up_ends_as_a_duplicate(
    logs: LogManager,
) -> None:
    """A broker restarted (SIGKILL) serves requests while its start-up still waits on etcd
    (the report of its replicas' directories), and the metadata it loaded may still name it
    leader. A producer retrying a batch this log holds is answered as a duplicate then too:
    the producer state is read from the log before anything waits (Kafka loads it with the
    log), not after -- a retry taken on empty state was written a second time."""
    replica = logs.get_or_create_log(TP)
    batch = _batch(0, b"first")
    replica.append(batch, assign_offsets=False)  # replicated before the restart
    md = _metadata(leader=ME, epoch=1)
    assigner = SlowAssigner()
    replicas = ReplicaManager(
        node_id=ME, logs=logs, metadata=md, assigner=assigner, static_configs={}
    )
    start = asyncio.create_task(replicas.start())
    try:
        await asyncio.wait_for(assigner.called.wait(), 10)
        with pytest.raises(DuplicateBatch) as dup:
            replicas.append(TP, batch)  # the producer's retry, sent to the restarted leader
        assert (dup.value.meta.base_offset, dup.value.meta.last_offset) == (0, 0)
        assert replica.log_end_offset == 1
    finally:
        assigner.release.set()
        await asyncio.wait_for(start, 10)
        await replicas.close()


async def test_a_leader_restarted_after_a_crash_answers_a_retry_of_a_replicated_batch_as_a_duplicate(
    tmp_path: Path,
) -> None:
    """SIGKILL: no flush, no checkpoints, no clean-shutdown marker. The log recovered at the
    next start holds what the follower replicated, and so does the producer state read from
    it: a retry sent to the broker once it leads is a duplicate, the next batch follows on."""
    settings = StorageSettings.model_validate({"log.dirs": [str(tmp_path / "d0")]})
    before = LogManager.open(settings, cluster_id="c", node_id=ME, background=False)
    first, second = _batch(0, b"first"), _batch(1, b"second", offset=1)
    replica = before.get_or_create_log(TP)
    for batch in (first, second):
        replica.append(batch, assign_offsets=False)
    before._abort()  # the crash
    before._closed = True
    logs = LogManager.open(settings, cluster_id="c", node_id=ME, background=False)
    replicas = ReplicaManager(
        node_id=ME,
        logs=logs,
        metadata=_metadata(leader=ME, epoch=1),
        assigner=Assigner(),
        static_configs={},
    )
    try:
        await replicas.start()
        with pytest.raises(DuplicateBatch) as dup:
            replicas.append(TP, _batch(1, b"second"))
        assert dup.value.meta.base_offset == 1
        base, _ = replicas.append(TP, _batch(2, b"third"))
        assert base == 2
    finally:
        await replicas.close()
        logs.close()
