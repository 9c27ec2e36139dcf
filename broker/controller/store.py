"""The cluster metadata held in etcd, with an in-memory copy for the request path.

Layout under the cluster prefix ``P`` (one JSON value per key)::

    P/cluster_id               the cluster id (Kafka Uuid text), written once
    P/brokers/<node id>        BrokerRegistration (written by that broker, persistent)
    P/sessions/<node id>       BrokerSession (that broker's session lease; gone = broker lost)
    P/controller               the active controller's node id and epoch (its lease)
    P/controller_epoch         the last controller epoch handed out
    P/topics/<name>            TopicState (partitions, directories, leader/ISR, reassignment)
    P/configs/broker/<id|->    dynamic broker configs ("-" = cluster-wide default)
    P/producer_ids/next        next producer id not handed out yet
    P/security/<kind>/<id>     security records, opaque to the store: ``acls/<id>`` one ACL
                               binding each (its id a hash of the binding, so creating it twice
                               is one record), SCRAM credentials likewise

Every write is a transaction that compares the key's ``mod_revision`` with the one this store
last saw (0 for "must not exist"), the seeds' conditional update. A failed compare means another
writer wrote in between: the store reloads and the caller gets NOT_CONTROLLER, so a stale writer
can never overwrite newer metadata. When the store belongs to an elected controller, ``fence``
holds that controller's term (:class:`~.election.ControllerTerm`) and every write also compares
the controller key's create revision: once the term is over, writes fail with
:class:`ControllerFenced` and ``on_fenced`` tells the controller to step down. Task-safe for one
asyncio loop (writes are serialised by a lock).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.kafka_uuid import to_kafka_str

from .etcd import (
    AnyCompare,
    Compare,
    CompareCreate,
    Delete,
    EtcdClient,
    EtcdError,
    Get,
    KeyValue,
    Put,
)
from .model import (
    BrokerRegistration,
    BrokerSession,
    TopicState,
    parse_controller,
)
from .modes import mode_value, refusal
from .watch import PrefixWatcher, WatchBatch, WatchCompacted

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MetadataDelta:
    """What one batch of changes touched (``full``: everything may have changed, a reload)."""

    revision: int
    topics: frozenset[str] = frozenset()
    brokers: frozenset[int] = frozenset()
    sessions: frozenset[int] = frozenset()
    controller: bool = False
    configs: bool = False
    security: frozenset[str] = frozenset()
    """The kinds of security record (``acls``, ...) that changed."""
    full: bool = False


MetadataListener = Callable[[MetadataDelta], Awaitable[None]]


class MetadataConflict(KafkaError):
    """Another writer changed the metadata first; the store has reloaded."""

    code = ErrorCode.NOT_CONTROLLER


class ControllerFenced(MetadataConflict):
    """This store's controller term is over (lease ended or a successor elected): its write
    was refused by etcd. The caller is no longer the controller."""


class MetadataStore:
    """Cached, conditionally-updated cluster metadata (see module docstring)."""

    def __init__(self, client: EtcdClient, *, prefix: str) -> None:
        self._client = client
        self._prefix = prefix.rstrip("/")
        self._revs: dict[bytes, int] = {}
        self._seen: dict[bytes, int] = {}
        """Last revision applied per key, deletions included (a watch event at or below it is
        this store's own write coming back, or older)."""
        self.revision = 0
        """The etcd revision this view reflects: the metadata offset."""
        self._listeners: list[MetadataListener] = []
        self.topics: dict[str, TopicState] = {}
        self.brokers: dict[int, BrokerRegistration] = {}
        self.broker_configs: dict[str, dict[str, str]] = {}
        self.sessions: dict[int, BrokerSession] = {}
        self.security: dict[str, dict[str, bytes]] = {}
        """Security records by kind and id (``security["acls"]``), as written: the store keeps
        them and says when they change; the security layer gives them meaning."""
        self.session_leases: dict[int, int] = {}
        """The etcd lease of each live session (the controller may end it: :mod:`.liveness`)."""
        self.controller: tuple[int, int] | None = None
        """The active controller's (node id, epoch), None while there is none."""
        self.cluster_id: str | None = None
        self.controller_mode: str | None = None
        """This prefix's recorded controller mode marker (:mod:`.modes`), None until claimed."""
        self._lock = asyncio.Lock()
        self.fence: CompareCreate | None = None
        """Set while this store writes for an elected controller (see module docstring)."""
        self.on_fenced: Callable[[], None] | None = None

    def _key(self, *parts: str) -> bytes:
        return "/".join((self._prefix, *parts)).encode()

    async def load(self) -> None:
        """Read everything under the prefix into memory.

        Serialised with writes: a reload that overtook an in-flight write would otherwise
        replace the cache with a state that lacks it.
        """
        async with self._lock:
            await self._load_unlocked()

    async def _load_unlocked(self) -> None:
        kvs, rev = await self._client.get_prefix(self._key(""))
        self._revs, self._seen = {}, {}
        self.topics, self.brokers, self.broker_configs = {}, {}, {}
        self.sessions, self.controller = {}, None
        self.security = {}
        self.session_leases = {}
        self.cluster_id = None
        self.controller_mode = None
        for kv in kvs:
            self._apply(kv)
        self.revision = rev

    def _rel(self, key: bytes) -> str:
        return key.decode()[len(self._prefix) + 1 :]

    def _apply(self, kv: KeyValue) -> None:
        self._revs[kv.key] = kv.mod_revision
        self._seen[kv.key] = kv.mod_revision
        rel = self._rel(kv.key)
        if rel == "cluster_id":
            self.cluster_id = kv.value.decode()
        elif rel == "controller_mode":
            self.controller_mode = kv.value.decode()
        elif rel.startswith("topics/"):
            topic = TopicState.from_json(kv.value)
            self.topics[topic.name] = topic
        elif rel.startswith("brokers/"):
            reg = BrokerRegistration.from_json(kv.value)
            self.brokers[reg.node_id] = reg
        elif rel.startswith("configs/broker/"):
            self.broker_configs[rel.rsplit("/", 1)[1]] = json.loads(kv.value)
        elif rel.startswith("sessions/"):
            session = BrokerSession.from_json(kv.value, epoch=kv.create_revision)
            self.sessions[session.node_id] = session
            self.session_leases[session.node_id] = kv.lease
        elif rel == "controller":
            self.controller = parse_controller(kv.value)
        elif rel.startswith("security/"):
            _, kind, record_id = rel.split("/", 2)
            self.security.setdefault(kind, {})[record_id] = kv.value

    def _remove(self, key: bytes, revision: int) -> None:
        self._revs.pop(key, None)
        self._seen[key] = revision
        rel = self._rel(key)
        last = rel.rsplit("/", 1)[-1]
        if rel == "cluster_id":
            self.cluster_id = None
        elif rel == "controller_mode":
            self.controller_mode = None
        elif rel.startswith("topics/"):
            self.topics.pop(last, None)
        elif rel.startswith("brokers/"):
            self.brokers.pop(int(last), None)
        elif rel.startswith("configs/broker/"):
            self.broker_configs.pop(last, None)
        elif rel.startswith("sessions/"):
            self.sessions.pop(int(last), None)
            self.session_leases.pop(int(last), None)
        elif rel == "controller":
            self.controller = None
        elif rel.startswith("security/"):
            _, kind, record_id = rel.split("/", 2)
            self.security.get(kind, {}).pop(record_id, None)

    def apply_batch(self, batch: WatchBatch) -> MetadataDelta:
        """Apply one watch batch (skipping what this store already applied); say what changed."""
        topics: set[str] = set()
        brokers: set[int] = set()
        sessions: set[int] = set()
        controller = configs = False
        security: set[str] = set()
        for event in batch.events:
            kv = event.kv
            # At or below the last revision applied: this store's own write coming back (its
            # cache has it already), or older. Listeners still hear of it: the write may have
            # come from another component of this broker than the one listening.
            if kv.mod_revision > self._seen.get(kv.key, 0):
                if event.deleted:
                    self._remove(kv.key, kv.mod_revision)
                else:
                    self._apply(kv)
            rel = self._rel(kv.key)
            kind, _, name = rel.partition("/")
            if kind == "topics":
                topics.add(name)
            elif kind == "brokers":
                brokers.add(int(name))
            elif kind == "sessions":
                sessions.add(int(name))
            elif kind == "controller":
                controller = True
            elif kind == "configs":
                configs = True
            elif kind == "security":
                security.add(name.split("/", 1)[0])
        self.revision = max(self.revision, batch.revision)
        return MetadataDelta(
            self.revision,
            frozenset(topics),
            frozenset(brokers),
            frozenset(sessions),
            controller,
            configs,
            frozenset(security),
        )

    def topic_revision(self, name: str) -> int:
        """The revision of the last change to topic ``name`` this view holds, a deletion
        included: this store's own write, or one its watch applied (0 if none). A broker
        whose watch has applied that revision has acted on the change."""
        return self._seen.get(self._key("topics", name), 0)

    def add_listener(self, listener: MetadataListener) -> None:
        """Call ``listener`` after every change :meth:`follow` applies (in order, awaited)."""
        self._listeners.append(listener)

    async def follow(self) -> None:
        """Keep this view current from etcd's watch, forever (run it as a task).

        Starts after :attr:`revision` (call :meth:`load` first), resumes across reconnects, and
        reloads everything if etcd compacted the revisions it needed. Listeners see each
        change once, in revision order; a listener's error is logged, not fatal.
        """
        while True:
            watcher = PrefixWatcher(self._client, self._key(""), start_revision=self.revision + 1)
            try:
                async for batch in watcher:
                    async with self._lock:
                        delta = self.apply_batch(batch)
                    await self._notify(delta)
                continue
            except WatchCompacted as exc:
                log.warning("metadata watch: %s; reloading", exc)
            except Exception:
                # A task that died here would leave this broker deaf to the metadata for good
                # (its cache still moves when its own writes reload it, so it would answer on
                # a leadership it never took): start over from a full reload instead.
                log.exception("metadata watch failed; reloading and following again")
                await asyncio.sleep(1.0)
            await self._reload_until_done()
            await self._notify(MetadataDelta(self.revision, full=True))

    async def _reload_until_done(self) -> None:
        while True:
            try:
                await self.load()
                return
            except EtcdError as exc:
                log.warning("metadata reload failed (%s); retrying", exc)
                await asyncio.sleep(1.0)

    async def _notify(self, delta: MetadataDelta) -> None:
        for listener in list(self._listeners):
            try:
                await listener(delta)
            except Exception:
                log.exception("metadata listener failed on revision %d", delta.revision)

    async def _write(self, key: bytes, value: bytes | None) -> None:
        expected = self._revs.get(key, 0)
        op: Put | Delete = Put(key, value) if value is not None else Delete(key)
        fence = self.fence
        compares: list[AnyCompare] = [Compare(key, expected)]
        if fence is not None:
            compares.append(fence)
        result = await self._client.transact(
            compares, [op], [Get(fence.key)] if fence is not None else []
        )
        ok, revision = result.succeeded, result.revision
        if not ok:
            await self._load_unlocked()
            if fence is not None:
                holder = result.reads[0]
                if holder is None or holder.create_revision != fence.create_revision:
                    if self.on_fenced is not None:
                        self.on_fenced()
                    raise ControllerFenced(
                        f"write of {key.decode()} refused: this controller's term "
                        f"(controller key created at revision {fence.create_revision}) is over"
                    )
            raise MetadataConflict(f"metadata key {key.decode()} was changed by another writer")
        if value is None:
            self._revs.pop(key, None)
        else:
            self._revs[key] = revision
        self._seen[key] = revision

    async def ensure_cluster_id(self, expected: str | None) -> str:
        """Create the cluster id on first start; refuse a broker configured for another cluster.

        Brokers of a new cluster start together: all may find no id and race to write one.
        The loser's write is refused and its cache reloaded, so it adopts the winner's id
        (and the check below still refuses a broker configured with a different one)."""
        async with self._lock:
            if self.cluster_id is None:
                new = expected or to_kafka_str(uuid.uuid4())
                try:
                    await self._write(self._key("cluster_id"), new.encode())
                    self.cluster_id = new
                except MetadataConflict:
                    if self.cluster_id is None:  # not a racing first write: report it
                        raise
            if expected is not None and expected != self.cluster_id:
                raise KafkaError(
                    f"cluster.id {expected} does not match the id {self.cluster_id} stored in "
                    f"etcd under {self._prefix}",
                    ErrorCode.INVALID_REQUEST,
                )
            return self.cluster_id

    async def put_topic(self, topic: TopicState, *, base: TopicState | None = None) -> None:
        """Write ``topic``. ``base`` is the state the caller derived it from: if the cache has
        moved on since (a watch event or another task's write landed while the caller waited
        for the lock), the write is refused with MetadataConflict instead of overwriting the
        newer state with one computed from the older -- the compare on the key's revision alone
        cannot tell, since it uses the revision the cache has now."""
        async with self._lock:
            if base is not None and self.topics.get(topic.name) is not base:
                raise MetadataConflict(
                    f"topic {topic.name} changed after the update to it was computed"
                )
            await self._write(self._key("topics", topic.name), topic.to_json())
            self.topics[topic.name] = topic

    async def delete_topic(self, name: str) -> None:
        async with self._lock:
            await self._write(self._key("topics", name), None)
            self.topics.pop(name, None)

    async def claim_controller_mode(self, mode: str, node_id: int) -> None:
        """Record this prefix's controller mode, or refuse a broker that does not fit it
        (:mod:`.modes`). Two brokers racing to record it: the loser's write is refused, the
        store reloads, and the check runs again against the winner's marker.

        The marker is read from the loaded store (:meth:`load` first): a write made against a
        stale copy is refused by its revision compare and reloads, so no read of its own."""
        key = self._key("controller_mode")
        want = mode_value(mode, node_id)
        async with self._lock:
            for _ in range(3):
                recorded = self.controller_mode
                why = refusal(mode, node_id, recorded, self.brokers, self._prefix)
                if why is not None:
                    raise KafkaError(why, ErrorCode.INVALID_REQUEST)
                if recorded == want:
                    return
                try:
                    await self._write(key, want.encode())
                    self.controller_mode = want
                    return
                except MetadataConflict:
                    continue
            raise MetadataConflict(f"{key.decode()} kept changing while this broker started")

    async def register_broker(self, reg: BrokerRegistration) -> None:
        async with self._lock:
            await self._write(self._key("brokers", str(reg.node_id)), reg.to_json())
            self.brokers[reg.node_id] = reg

    async def put_broker_configs(self, scope: str, configs: dict[str, str]) -> None:
        async with self._lock:
            key = self._key("configs", "broker", scope)
            await self._write(
                key, json.dumps(configs, sort_keys=True).encode() if configs else None
            )
            if configs:
                self.broker_configs[scope] = dict(configs)
            else:
                self.broker_configs.pop(scope, None)

    async def put_security_records(
        self, kind: str, puts: dict[str, bytes], deletes: frozenset[str] = frozenset()
    ) -> int:
        """Write and delete security records of ``kind`` (e.g. ACLs) in one transaction;
        return its revision (0 if nothing changed). A record already held with the same value
        is not rewritten and one already gone is not deleted, so a retried CreateAcls or
        DeleteAcls is a no-op rather than a conflict."""
        async with self._lock:
            held = self.security.get(kind, {})
            ops: list[Put | Delete] = []
            compares: list[AnyCompare] = []
            for record_id, value in sorted(puts.items()):
                if held.get(record_id) != value:
                    key = self._key("security", kind, record_id)
                    compares.append(Compare(key, self._revs.get(key, 0)))
                    ops.append(Put(key, value))
            for record_id in sorted(deletes - puts.keys()):
                if record_id in held:
                    key = self._key("security", kind, record_id)
                    compares.append(Compare(key, self._revs.get(key, 0)))
                    ops.append(Delete(key))
            if not ops:
                return 0
            result = await self._client.transact(compares, ops, [])
            if not result.succeeded:
                await self._load_unlocked()
                raise MetadataConflict(f"{kind} records were changed by another writer")
            for op in ops:
                self._seen[op.key] = result.revision
                record_id = self._rel(op.key).split("/", 2)[2]
                if isinstance(op, Put):
                    self._revs[op.key] = result.revision
                    self.security.setdefault(kind, {})[record_id] = op.value
                else:
                    self._revs.pop(op.key, None)
                    self.security.get(kind, {}).pop(record_id, None)
            return result.revision

    async def allocate_producer_ids(self, block_size: int) -> int:
        """Reserve ``block_size`` producer ids; return the first (Kafka hands out blocks too)."""
        async with self._lock:
            key = self._key("producer_ids", "next")
            current = await self._client.get(key)
            start = int(current.value) if current else 0
            expected = current.mod_revision if current else 0
            ok, _ = await self._client.txn(
                [Compare(key, expected)], [Put(key, str(start + block_size).encode())]
            )
            if not ok:
                raise MetadataConflict("producer id block was taken by another writer")
            return start
