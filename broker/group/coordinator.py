"""The group coordinator: which groups this broker coordinates, their offsets, and the admin
operations on groups (list, describe, delete, delete offsets).

Ownership follows leadership of ``__consumer_offsets``: :meth:`GroupCoordinator.sync_leadership`
is told which partitions this broker leads; a newly led partition is loaded (its groups answer
COORDINATOR_LOAD_IN_PROGRESS meanwhile) and a partition no longer led is unloaded (its groups
answer NOT_COORDINATOR, waiting requests included). Loading replays the partition: the last
record per key wins, tombstones delete; a group with members comes back Stable with fresh
session timers, one without members Empty, offsets without group metadata make an Empty group
with no protocol type (a group that only commits, like ``kafka-consumer-groups`` resets).

Committed offsets are written to the log before the cache changes and before the client is
answered, so an acknowledged commit survives a crash; the cache is rebuilt from the log on load.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from spindle.broker.common.clock import Clock
from spindle.broker.common.errors import ErrorCode, KafkaError

from .membership import Membership
from .model import Group, GroupState, Member, OffsetAndMetadata
from .records import (
    GroupRecord,
    MemberRecord,
    OffsetRecord,
    RecordFormatError,
    decode,
    encode_group,
    encode_offset,
)
from .settings import GroupSettings
from .store import OffsetsLog, Record, store_error

log = logging.getLogger(__name__)

LOADING = "loading"
LOADED = "loaded"


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit overflow), as Kafka hashes ids."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True, slots=True)
class CommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


def _replay(
    partition: int, records: list[tuple[bytes | None, bytes | None]]
) -> tuple[dict[str, dict[tuple[str, int], OffsetRecord]], dict[str, GroupRecord]]:
    """The state a partition's records leave: the last record per key wins, a tombstone
    deletes; unreadable records are skipped with a warning (Kafka does the same)."""
    offsets: dict[str, dict[tuple[str, int], OffsetRecord]] = {}
    metas: dict[str, GroupRecord] = {}
    for key, value in records:
        if key is None:
            continue
        try:
            rec = decode(key, value)
        except RecordFormatError as exc:
            log.warning("skipping a record of __consumer_offsets-%d: %s", partition, exc)
            continue
        if isinstance(rec, OffsetRecord):
            per = offsets.setdefault(rec.group, {})
            if rec.offset is None:
                per.pop((rec.topic, rec.partition), None)
            else:
                per[(rec.topic, rec.partition)] = rec
        elif rec.generation is None:
            metas.pop(rec.group, None)
        else:
            metas[rec.group] = rec
    return offsets, metas


class GroupCoordinator(Membership):
    """All groups this broker coordinates (see module docstring). Event loop only."""

    def __init__(self, *, settings: GroupSettings, clock: Clock, store: OffsetsLog) -> None:
        super().__init__(settings=settings, clock=clock)
        self.store = store
        self.partitions: dict[int, str] = {}
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._next_expiry = 0.0

    # --- ownership --------------------------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.settings.offsets_topic_num_partitions)

    def check_coordinator(self, group_id: str) -> None:
        state = self.partitions.get(self.partition_of(group_id))
        if state is None:
            raise KafkaError(f"not the coordinator of {group_id!r}", ErrorCode.NOT_COORDINATOR)
        if state == LOADING:
            raise KafkaError(
                f"group {group_id!r} is loading", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            )

    def sync_leadership(self, led: Iterable[int]) -> None:
        """Load partitions newly led here (in the background), unload the ones no longer led."""
        wanted = set(led)
        for p in sorted(set(self.partitions) - wanted):
            self.unload(p)
        for p in sorted(wanted - set(self.partitions)):
            self.partitions[p] = LOADING
            self._loads[p] = asyncio.create_task(self.load(p))

    async def load(self, partition: int) -> None:
        """Replay one partition into groups; on failure give the partition up (the next
        leadership sync retries)."""
        self.partitions[partition] = LOADING
        try:
            records = await asyncio.to_thread(self.store.read_all, partition)
        except Exception as exc:
            log.error("cannot load __consumer_offsets-%d: %s", partition, exc)
            self.partitions.pop(partition, None)
            return
        finally:
            self._loads.pop(partition, None)
        if self.partitions.get(partition) != LOADING:
            return  # unloaded meanwhile
        self._install(partition, records)
        self.partitions[partition] = LOADED

    def _install(self, partition: int, records: list[tuple[bytes | None, bytes | None]]) -> None:
        offsets, metas = _replay(partition, records)
        now = self._now()
        for group_id in set(offsets) | set(metas):
            if self.partition_of(group_id) != partition:
                continue
            group = self._group_from(metas.get(group_id), group_id, now)
            for (topic, p), r in offsets.get(group_id, {}).items():
                assert r.offset is not None
                group.offsets[(topic, p)] = OffsetAndMetadata(
                    r.offset, r.leader_epoch, r.metadata, r.commit_timestamp
                )
            if group.members or group.offsets or group.generation > 0:
                self.groups[group_id] = group
        log.log(
            logging.INFO if records else logging.DEBUG,
            "loaded __consumer_offsets-%d: %d records, %d groups",
            partition,
            len(records),
            sum(1 for g in self.groups if self.partition_of(g) == partition),
        )

    def _group_from(self, meta: GroupRecord | None, group_id: str, now: float) -> Group:
        group = Group(group_id)
        if meta is None:
            group.protocol_type = ""
            return group
        group.generation = meta.generation or 0
        group.protocol_type = meta.protocol_type
        group.protocol = meta.protocol
        group.leader_id = meta.leader
        group.state_timestamp = meta.state_timestamp
        for m in meta.members:
            member = Member(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                meta.protocol_type,
                [(meta.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            member.session_deadline = now + m.session_timeout_ms / 1000
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group

    def unload(self, partition: int) -> None:
        self.partitions.pop(partition, None)
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        for group in [
            g for g in self.groups.values() if self.partition_of(g.group_id) == partition
        ]:
            self.drop_group(group, ErrorCode.NOT_COORDINATOR)
        log.info("unloaded __consumer_offsets-%d", partition)

    # --- persistence ------------------------------------------------------------------------

    def _append(self, group_id: str, records: list[Record], *, for_commit: bool) -> ErrorCode:
        try:
            self.store.append(self.partition_of(group_id), records)
        except Exception as exc:
            code = store_error(exc, for_commit=for_commit)
            log.warning("writing group %s to __consumer_offsets failed: %s", group_id, exc)
            return code
        return ErrorCode.NONE

    def store_group(self, group: Group) -> ErrorCode:
        rec = GroupRecord(
            group.group_id,
            group.protocol_type or "",
            group.generation,
            group.protocol,
            group.leader_id,
            group.state_timestamp,
            tuple(
                MemberRecord(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata_for(group.protocol),
                    m.assignment,
                )
                for m in group.members.values()
            ),
        )
        return self._append(group.group_id, [encode_group(rec)], for_commit=False)

    # --- offsets ----------------------------------------------------------------------------

    def _commit_error(
        self, group: Group, member_id: str, instance: str | None, generation: int
    ) -> ErrorCode | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_(GroupState.EMPTY):
            return None  # not managed by the coordinator: admin tools, assign-mode consumers
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        if instance is not None and group.static_members.get(instance) not in (None, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        instance: str | None,
        generation: int,
        entries: list[CommitEntry],
    ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit: the error of every partition (NONE when committed)."""
        keys = [(e.topic, e.partition) for e in entries]
        try:
            self.check_coordinator(group_id)
        except KafkaError as exc:
            return dict.fromkeys(keys, exc.code)
        if not group_id:
            return dict.fromkeys(keys, ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return dict.fromkeys(keys, ErrorCode.ILLEGAL_GENERATION)
            group = self.groups[group_id] = Group(group_id, protocol_type="")
        bad = self._commit_error(group, member_id, instance, generation)
        if bad is not None:
            return dict.fromkeys(keys, bad)
        out = self._write_offsets(group, entries)
        member = group.members.get(member_id)
        if member is not None:
            self._touch(member)
        return out

    def _write_offsets(
        self, group: Group, entries: list[CommitEntry]
    ) -> dict[tuple[str, int], ErrorCode]:
        """Validate, write, then cache: the cache changes only once the log has the records."""
        group_id = group.group_id
        out: dict[tuple[str, int], ErrorCode] = {}
        now_ms = self.clock.wall_ms()
        valid: list[tuple[CommitEntry, OffsetAndMetadata]] = []
        for e in entries:
            meta = e.metadata or ""
            if len(meta.encode("utf-8")) > self.settings.offset_metadata_max_bytes:
                out[(e.topic, e.partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            valid.append((e, OffsetAndMetadata(e.offset, e.leader_epoch, meta, now_ms)))
        if valid:
            records = [
                encode_offset(
                    OffsetRecord(
                        group_id,
                        e.topic,
                        e.partition,
                        om.offset,
                        om.leader_epoch,
                        om.metadata,
                        now_ms,
                    )
                )
                for e, om in valid
            ]
            error = self._append(group_id, records, for_commit=True)
            for e, om in valid:
                out[(e.topic, e.partition)] = error
                if error is ErrorCode.NONE:
                    group.offsets[(e.topic, e.partition)] = om
        return out

    def fetch_offsets(
        self, group_id: str, wanted: list[tuple[str, int]] | None
    ) -> tuple[ErrorCode, dict[tuple[str, int], OffsetAndMetadata | None]]:
        """OffsetFetch: a group-level error, and the committed offset per partition (None when
        nothing is committed); ``wanted`` None = every committed partition."""
        try:
            self.check_coordinator(group_id)
        except KafkaError as exc:
            return exc.code, {}
        group = self.groups.get(group_id)
        committed = group.offsets if group is not None else {}
        if wanted is None:
            return ErrorCode.NONE, dict(committed)
        return ErrorCode.NONE, {tp: committed.get(tp) for tp in wanted}

    # --- admin ------------------------------------------------------------------------------

    def list_groups(self, states: set[str] | None) -> list[Group]:
        """Groups this broker coordinates (loaded partitions only), optionally by state."""
        wanted = {s.lower() for s in states} if states else None
        return sorted(
            (
                g
                for g in self.groups.values()
                if not g.is_(GroupState.DEAD)
                and self.partitions.get(self.partition_of(g.group_id)) == LOADED
                and (wanted is None or g.state.value.lower() in wanted)
            ),
            key=lambda g: g.group_id,
        )

    def describe_group(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        try:
            self.check_coordinator(group_id)
        except KafkaError as exc:
            return exc.code, None
        return ErrorCode.NONE, self.groups.get(group_id)

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        out: dict[str, ErrorCode] = {}
        for gid in group_ids:
            try:
                self.check_coordinator(gid)
            except KafkaError as exc:
                out[gid] = exc.code
                continue
            group = self.groups.get(gid)
            if group is None or group.is_(GroupState.DEAD):
                out[gid] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_(GroupState.EMPTY):
                out[gid] = ErrorCode.NON_EMPTY_GROUP
            else:
                records = [encode_offset(OffsetRecord(gid, t, p, None)) for (t, p) in group.offsets]
                records.append(encode_group(GroupRecord(gid)))
                out[gid] = self._append(gid, records, for_commit=False)
                if out[gid] is ErrorCode.NONE:
                    self.drop_group(group, ErrorCode.GROUP_ID_NOT_FOUND)
        return out

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """OffsetDelete: refused per partition for topics the group still consumes."""
        try:
            self.check_coordinator(group_id)
        except KafkaError as exc:
            return exc.code, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if not group.is_(GroupState.EMPTY):
            topics = group.subscribed_topics()
            if topics is None:
                return ErrorCode.NON_EMPTY_GROUP, {}
            subscribed = topics
        out: dict[tuple[str, int], ErrorCode] = {}
        deleting = []
        for tp in partitions:
            if tp[0] in subscribed:
                out[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                deleting.append(tp)
        if deleting:
            records = [encode_offset(OffsetRecord(group_id, t, p, None)) for t, p in deleting]
            error = self._append(group_id, records, for_commit=False)
            for tp in deleting:
                out[tp] = error
                if error is ErrorCode.NONE:
                    group.offsets.pop(tp, None)
        return ErrorCode.NONE, out

    # --- timers -----------------------------------------------------------------------------

    def tick(self) -> None:
        """Run due timers: sessions, join/sync deadlines, and offsets retention."""
        self.tick_groups()
        now = self._now()
        if now >= self._next_expiry:
            self._next_expiry = now + self.settings.offsets_retention_check_interval_ms / 1000
            self.expire_offsets()

    def expire_offsets(self) -> int:
        """Delete the offsets of empty groups older than ``offsets.retention.ms`` (Kafka
        counts from when the group became empty); a group left with nothing is removed."""
        now_ms = self.clock.wall_ms()
        removed = 0
        for group in list(self.groups.values()):
            if not group.is_(GroupState.EMPTY):
                continue
            if self.partitions.get(self.partition_of(group.group_id)) != LOADED:
                continue
            since = max(group.state_timestamp, 0)
            old = [
                tp
                for tp, om in group.offsets.items()
                if max(om.commit_timestamp, since) + self.settings.offsets_retention_ms <= now_ms
            ]
            if not old:
                continue
            records = [encode_offset(OffsetRecord(group.group_id, t, p, None)) for t, p in old]
            gone = len(old) == len(group.offsets)
            if gone:
                records.append(encode_group(GroupRecord(group.group_id)))
            if self._append(group.group_id, records, for_commit=False) is not ErrorCode.NONE:
                continue
            for tp in old:
                del group.offsets[tp]
            removed += len(old)
            if gone:
                self.drop_group(group, ErrorCode.GROUP_ID_NOT_FOUND)
        return removed
