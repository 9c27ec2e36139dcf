"""Request handlers: one method per API, turning a decoded request into a response body.

Kafka calls this ``KafkaApis``. Handlers are thin: they authorise, ask the controller (metadata)
or the log manager (data), and build the response as plain dicts keyed by the schema's field
names (:func:`spindle.broker.protocol.apis.build_message` turns them into wire objects). Errors
from the lower layers arrive as :class:`KafkaError` with Kafka's code and are returned per
partition or per resource, so one bad partition never fails a whole request.

The log manager's calls are synchronous (page-cache writes and reads); they run on the event
loop thread, which keeps the per-connection request order trivially and avoids a thread hop
per request. Moves and other long disk work run on the storage engine's own threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from spindle.broker.common.clock import Clock
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.controller.controller import ConfigChange, Controller
from spindle.broker.controller.model import (
    LOST_DIR,
    TopicState,
    kafka_uuid_str,
    parse_kafka_uuid,
)
from spindle.broker.protocol.apis import ApiKey, Request, api_versions_body
from spindle.broker.records.batch import iter_batches, parse_header
from spindle.broker.storage import Log, LogManager

from .authorizer import CLUSTER_NAME, Authorizer, Operation, RequestContext, ResourceType
from .config import BrokerSettings
from .producer_state import DuplicateBatch, ProducerStateTable
from .zerocopy import FileRegion, close_regions

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
CONFIG_SOURCE_TOPIC = 1
CONFIG_SOURCE_DYNAMIC_BROKER = 2
CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER = 3
CONFIG_SOURCE_STATIC_BROKER = 4
CONFIG_SOURCE_DEFAULT = 5
PRODUCER_ID_BLOCK = 1000
SENDFILE_MIN_BYTES = 65536
"""Record sets at least this large are sent from the segment file (see ``zerocopy``); smaller
ones are copied, which is cheaper than a descriptor and a ``sendfile`` call."""
THROTTLE_KEY = "replica.alter.log.dirs.io.max.bytes.per.second"


class AppendNotifier:
    """Wakes long-polling fetches when any partition gets new data (one event per append)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout_s: float) -> None:
        event = self._event
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=max(timeout_s, 0.0))


@dataclass(frozen=True)
class Endpoint:
    node_id: int
    host: str
    port: int
    rack: str | None


def _err(exc: BaseException) -> tuple[int, str]:
    if isinstance(exc, KafkaError):
        return int(exc.code), str(exc)
    log.exception("unexpected error in a request handler")
    return int(ErrorCode.UNKNOWN_SERVER_ERROR), f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def _errors_into(result: dict[str, Any], *, message: bool = True) -> Iterator[None]:
    """Answer an error raised for one item of a request in that item's ``error_code`` (and
    ``error_message``), so the other items of the request are still served."""
    try:
        yield
    except Exception as exc:
        code, msg = _err(exc)
        result["error_code"] = code
        if message:
            result["error_message"] = msg


def _topic_id(topic: TopicState | None) -> uuid.UUID:
    return parse_kafka_uuid(topic.topic_id) if topic else uuid.UUID(int=0)


class KafkaApis:
    """All request handlers of one broker. Runs on the event loop; not thread-safe."""

    def __init__(
        self,
        *,
        settings: BrokerSettings,
        endpoint: Endpoint,
        logs: LogManager,
        controller: Controller,
        authorizer: Authorizer,
        clock: Clock,
        static_configs: Mapping[str, str],
    ) -> None:
        self.settings = settings
        self.endpoint = endpoint
        self.logs = logs
        self.controller = controller
        self.authorizer = authorizer
        self.clock = clock
        self.static_configs = dict(static_configs)
        self.node_id = settings.node_id
        self.producers = ProducerStateTable()
        self.appends = AppendNotifier()
        self._producer_ids: tuple[int, int] = (0, 0)  # next, end of block
        self._handlers: dict[ApiKey, Callable[[RequestContext, Request], Any]] = {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.METADATA: self.metadata,
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.CREATE_PARTITIONS: self.create_partitions,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
            ApiKey.DESCRIBE_LOG_DIRS: self.describe_log_dirs,
            ApiKey.ALTER_REPLICA_LOG_DIRS: self.alter_replica_log_dirs,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self.list_partition_reassignments,
        }

    async def handle(self, ctx: RequestContext, request: Request) -> dict[str, Any] | None:
        """The response body for ``request``, or None when no response is sent (acks=0)."""
        handler = self._handlers[request.spec.key]
        result: dict[str, Any] | None = await handler(ctx, request)
        return result

    # --- helpers ---------------------------------------------------------------------------

    @property
    def _topics(self) -> dict[str, TopicState]:
        return self.controller.store.topics

    def _allowed(self, ctx: RequestContext, op: Operation, rt: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(ctx, op, rt, name)

    def _brokers(self) -> list[Endpoint]:
        """Registered brokers (this one as it listens now, the others as registered)."""
        others = [
            Endpoint(r.node_id, r.host, r.port, r.rack)
            for r in self.controller.store.brokers.values()
            if r.node_id != self.node_id
        ]
        return sorted([self.endpoint, *others], key=lambda e: e.node_id)

    def _hosted_log(self, tp: TopicPartition) -> Log:
        """The local replica of ``tp``; KafkaError if the topic/partition is unknown here."""
        topic = self._topics.get(tp.topic)
        if topic is None or tp.partition not in topic.partitions:
            raise KafkaError(f"unknown partition {tp}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        part = topic.partitions[tp.partition]
        if part.leader != self.node_id:
            raise KafkaError(
                f"broker {self.node_id} does not lead {tp}", ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        found = self.logs.get_log(tp)
        if found is None:
            # Assigned here but not created yet. It may have lived in a directory that is now
            # offline, so storage refuses (KAFKA_STORAGE_ERROR) while any directory is offline.
            found = self.logs.get_or_create_log(tp, is_new=False)
        return found

    async def create_local_logs(self, topic: TopicState, *, is_new: bool = True) -> None:
        """Create this broker's replicas of ``topic`` and report their directories.

        Placement follows Kafka: a directory preset by AlterReplicaLogDirs wins (storage keeps
        it), else the directory the metadata assigns if it is known and online, else storage's
        least-loaded rule. ``is_new=False`` at start-up: a missing replica may sit on an offline
        directory, and storage then refuses to create an empty one elsewhere.
        """
        ids = self.dir_ids()
        paths = {dir_id: path for path, dir_id in ids.items()}
        for p in topic.partitions.values():
            if self.node_id not in p.replicas:
                continue
            tp = TopicPartition(topic.name, p.partition)
            assigned = p.directories[p.replicas.index(self.node_id)]
            if self.logs.get_log(tp) is None and assigned in paths:
                # Remembered by storage for a replica it does not host yet.
                self.logs.change_replica_dir(tp, paths[assigned])
            try:
                created = self.logs.get_or_create_log(tp, is_new=is_new)
            except KafkaError as exc:
                log.warning("cannot create %s: %s", tp, exc)
                continue
            dir_id = ids.get(created.logdir_path)
            if dir_id:
                await self.controller.assign_replica_dir(tp, self.node_id, dir_id)

    def load_producer_state(
        self, tp: TopicPartition, partition_log: Log, *, tail_offsets: int = 20_000
    ) -> int:
        """Rebuild idempotent-producer state from the tail of a log (Kafka rebuilds it from
        snapshots and the log at start-up), so a producer retrying across a broker restart
        still gets its duplicates dropped and its gaps refused. Returns batches seen."""
        seen = 0
        offset = max(partition_log.log_start_offset, partition_log.log_end_offset - tail_offsets)
        end = partition_log.log_end_offset
        while offset < end:
            chunk = partition_log.read(offset, 4 << 20)
            if not chunk.records:
                break
            for h in iter_batches(chunk.records, check_crc=False):
                if h.producer_id >= 0 and not h.is_control:
                    self.producers.record(
                        tp,
                        h.producer_id,
                        h.producer_epoch,
                        h.base_sequence,
                        h.record_count,
                        h.base_offset,
                        h.last_offset,
                    )
                seen += 1
                offset = h.next_offset
        return seen

    def dir_ids(self) -> dict[str, str]:
        """Online log directory path -> directory id (Kafka Uuid text)."""
        return {
            d.path: kafka_uuid_str(d.directory_id)
            for d in self.logs.describe_dirs(topics=[])
            if d.directory_id and not int(d.error)
        }

    # --- ApiVersions, Metadata, DescribeCluster ---------------------------------------------

    async def api_versions(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        return api_versions_body(req)

    def _partition_metadata(self, topic: TopicState) -> list[dict[str, Any]]:
        out = []
        for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
            offline = [b for b, d in zip(p.replicas, p.directories, strict=False) if d == LOST_DIR]
            if (
                self.node_id in p.replicas
                and self.node_id not in offline
                and self.logs.is_partition_offline(TopicPartition(topic.name, p.partition))
            ):
                offline.append(self.node_id)
            out.append(
                {
                    "error_code": 0,
                    "partition_index": p.partition,
                    "leader_id": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replica_nodes": list(p.replicas),
                    "isr_nodes": [b for b in p.isr if b not in offline],
                    "offline_replicas": offline,
                }
            )
        return out

    def _topic_metadata(
        self, name: str, topic: TopicState | None, error: int = 0
    ) -> dict[str, Any]:
        if topic is None:
            return {
                "error_code": error or int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                "name": name,
                "topic_id": None,
                "is_internal": False,
                "partitions": [],
                "authorized_operations": None,
            }
        return {
            "error_code": error,
            "name": topic.name,
            "topic_id": _topic_id(topic),
            "is_internal": False,
            "partitions": self._partition_metadata(topic),
            "authorized_operations": None,
        }

    async def metadata(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        body = req.body
        topics_out = []
        requested = body.topics
        if requested is None or (req.version == 0 and not requested):
            names: Iterable[str] = sorted(self._topics)
            for name in names:
                topics_out.append(self._topic_metadata(name, self._topics[name]))
        else:
            by_id = {t.topic_id: t for t in self._topics.values()}
            allow_create = bool(body.allow_auto_topic_creation) if req.version >= 4 else True
            for t in requested:
                name = t.name
                if name is None and t.topic_id is not None:
                    found = by_id.get(kafka_uuid_str(t.topic_id))
                    if found is None:
                        topics_out.append(
                            {
                                **self._topic_metadata("", None, int(ErrorCode.UNKNOWN_TOPIC_ID)),
                                "name": None,
                                "topic_id": t.topic_id,
                            }
                        )
                        continue
                    name = found.name
                topic = self._topics.get(name)
                if (
                    topic is None
                    and allow_create
                    and self.settings.auto_create_topics_enable
                    and self._allowed(ctx, Operation.CREATE, ResourceType.TOPIC, name)
                ):
                    try:
                        topic = await self.controller.create_topic(
                            name,
                            self.settings.num_partitions,
                            self.settings.default_replication_factor,
                            None,
                            {},
                        )
                        await self.create_local_logs(topic)
                    except KafkaError as exc:
                        if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                            topics_out.append(self._topic_metadata(name, None, int(exc.code)))
                            continue
                        topic = self._topics.get(name)
                topics_out.append(self._topic_metadata(name, topic))
        return {
            "throttle_time_ms": 0,
            "brokers": [
                {"node_id": e.node_id, "host": e.host, "port": e.port, "rack": e.rack}
                for e in self._brokers()
            ],
            "cluster_id": self.controller.store.cluster_id,
            "controller_id": self.node_id,
            "topics": topics_out,
            "authorized_operations": None,
        }

    async def describe_cluster(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "endpoint_type": 1,
            "cluster_id": self.controller.store.cluster_id,
            "controller_id": self.node_id,
            "brokers": [
                {"broker_id": e.node_id, "host": e.host, "port": e.port, "rack": e.rack}
                for e in self._brokers()
            ],
            "authorized_operations": None,
        }

    # --- Produce, Fetch, ListOffsets -------------------------------------------------------

    async def produce(self, ctx: RequestContext, req: Request) -> dict[str, Any] | None:
        body = req.body
        acks = body.acks
        responses = []
        appended = False
        for td in body.topic_data:
            parts = []
            allowed = self._allowed(ctx, Operation.WRITE, ResourceType.TOPIC, td.name)
            for pd in td.partition_data:
                tp = TopicPartition(td.name, pd.index)
                base, start, code, msg = -1, -1, 0, None
                try:
                    if not allowed:
                        raise KafkaError(
                            f"not allowed to write {tp}", ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        )
                    if acks not in (-1, 0, 1):
                        raise KafkaError(
                            f"acks={acks} is not -1, 0 or 1", ErrorCode.INVALID_REQUIRED_ACKS
                        )
                    base, start = self._append(tp, pd.records)
                    appended = True
                except DuplicateBatch as dup:
                    base = dup.meta.base_offset
                except Exception as exc:
                    code, msg = _err(exc)
                parts.append(
                    {
                        "index": pd.index,
                        "error_code": code,
                        "base_offset": base,
                        "log_append_time_ms": -1,
                        "log_start_offset": start,
                        "record_errors": [],
                        "error_message": msg,
                    }
                )
            responses.append({"name": td.name, "partition_responses": parts})
        if appended:
            self.appends.notify()
        if acks == 0:
            return None
        return {"responses": responses, "throttle_time_ms": 0}

    def _append(self, tp: TopicPartition, records: bytes | None) -> tuple[int, int]:
        if not records:
            raise KafkaError(f"produce to {tp} carries no records", ErrorCode.CORRUPT_MESSAGE)
        partition_log = self._hosted_log(tp)
        header = parse_header(records, 0)
        if header.size != len(records):
            raise KafkaError(
                f"produce to {tp} must carry exactly one record batch (v2), got more bytes "
                f"({len(records)}) than its first batch ({header.size})",
                ErrorCode.CORRUPT_MESSAGE,
            )
        pid = header.producer_id
        if pid >= 0:
            self.producers.check(
                tp, pid, header.producer_epoch, header.base_sequence, header.record_count
            )
        result = partition_log.append(records)
        # One replica: the high watermark is the log end offset once the append returns.
        partition_log.high_watermark = partition_log.log_end_offset
        if pid >= 0:
            self.producers.record(
                tp,
                pid,
                header.producer_epoch,
                header.base_sequence,
                header.record_count,
                result.base_offset,
                result.last_offset,
            )
        return int(result.base_offset), int(getattr(result, "log_start_offset", 0))

    async def fetch(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        body = req.body
        deadline = self.clock.monotonic() + body.max_wait_ms / 1000.0
        min_bytes = max(body.min_bytes, 0)
        while True:
            responses, total, any_error = self._read_fetch(ctx, body)
            remaining = deadline - self.clock.monotonic()
            if total >= min_bytes or any_error or remaining <= 0 or min_bytes == 0:
                break
            _close_fetch_regions(responses)
            await self.appends.wait(remaining)
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "session_id": 0,
            "responses": responses,
        }

    def _read_fetch(self, ctx: RequestContext, body: Any) -> tuple[list[dict[str, Any]], int, bool]:
        budget = body.max_bytes if body.max_bytes is not None and body.max_bytes > 0 else 52428800
        responses = []
        total = 0
        any_error = False
        for t in body.topics:
            allowed = self._allowed(ctx, Operation.READ, ResourceType.TOPIC, t.topic)
            parts = []
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                out: dict[str, Any] = {
                    "partition_index": p.partition,
                    "error_code": 0,
                    "high_watermark": -1,
                    "last_stable_offset": -1,
                    "log_start_offset": -1,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": b"",
                }
                try:
                    if not allowed:
                        raise KafkaError(
                            f"not allowed to read {tp}", ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        )
                    partition_log = self._hosted_log(tp)
                    hw = partition_log.high_watermark
                    # KIP-74: storage returns at least one whole batch for a positive limit, so
                    # the first non-empty partition answers even if its batch exceeds the limits.
                    limit = max(min(p.partition_max_bytes, budget), 0)
                    got = partition_log.read(
                        p.fetch_offset,
                        limit,
                        max_offset=hw,
                        file_range_min_bytes=SENDFILE_MIN_BYTES,
                    )
                    out.update(
                        high_watermark=got.high_watermark,
                        last_stable_offset=got.high_watermark,
                        log_start_offset=got.log_start_offset,
                        records=got.records if got.file is None else FileRegion(got.file),
                    )
                    total += got.size
                    budget -= got.size
                except Exception as exc:
                    code, _ = _err(exc)
                    out["error_code"] = code
                    any_error = True
                parts.append(out)
            responses.append({"topic": t.topic, "partitions": parts})
        return responses, total, any_error

    async def list_offsets(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        topics = []
        for t in req.body.topics:
            allowed = self._allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, t.name)
            parts = []
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                out = {
                    "partition_index": p.partition_index,
                    "error_code": 0,
                    "timestamp": -1,
                    "offset": -1,
                    "leader_epoch": -1,
                }
                with _errors_into(out, message=False):
                    if not allowed:
                        raise KafkaError(
                            f"not allowed to describe {tp}", ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        )
                    partition_log = self._hosted_log(tp)
                    leader_epoch = self._topics[tp.topic].partitions[tp.partition].leader_epoch
                    if p.timestamp == EARLIEST_TIMESTAMP:
                        offset = partition_log.log_start_offset
                    elif p.timestamp == LATEST_TIMESTAMP:
                        offset = partition_log.high_watermark
                    elif p.timestamp == MAX_TIMESTAMP:
                        raise KafkaError(
                            "ListOffsets MAX_TIMESTAMP (-3) is not served",
                            ErrorCode.UNSUPPORTED_VERSION,
                        )
                    else:
                        found = partition_log.offset_for_timestamp(p.timestamp)
                        offset = -1 if found is None else found
                        if found is not None:
                            out["timestamp"] = p.timestamp
                    out.update(offset=offset, leader_epoch=leader_epoch)
                parts.append(out)
            topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    # --- Topics -----------------------------------------------------------------------------

    async def create_topics(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        body = req.body
        out = []
        for t in body.topics:
            res: dict[str, Any] = {
                "name": t.name,
                "topic_id": None,
                "error_code": 0,
                "error_message": None,
                "topic_config_error_code": 0,
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": [],
            }
            with _errors_into(res):
                if not self._allowed(ctx, Operation.CREATE, ResourceType.TOPIC, t.name):
                    raise KafkaError(
                        f"not allowed to create {t.name}", ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    )
                assignments = (
                    [
                        list(a.broker_ids)
                        for a in sorted(t.assignments, key=lambda a: a.partition_index)
                    ]
                    if t.assignments
                    else None
                )
                if assignments and (t.num_partitions != -1 or t.replication_factor != -1):
                    raise KafkaError(
                        "both assignments and a partition count or replication factor were given",
                        ErrorCode.INVALID_REQUEST,
                    )
                n = t.num_partitions if t.num_partitions != -1 else self.settings.num_partitions
                rf = (
                    t.replication_factor
                    if t.replication_factor != -1
                    else self.settings.default_replication_factor
                )
                configs = {c.name: c.value for c in t.configs or []}
                topic = await self.controller.create_topic(
                    t.name, n, rf, assignments, configs, validate_only=bool(body.validate_only)
                )
                res.update(
                    topic_id=_topic_id(topic),
                    num_partitions=len(topic.partitions),
                    replication_factor=len(next(iter(topic.partitions.values())).replicas),
                    configs=[
                        {
                            "name": k,
                            "value": v,
                            "read_only": False,
                            "config_source": CONFIG_SOURCE_TOPIC,
                            "is_sensitive": False,
                        }
                        for k, v in sorted(topic.configs.items())
                    ],
                )
                if not body.validate_only:
                    await self.create_local_logs(topic)
            out.append(res)
        return {"throttle_time_ms": 0, "topics": out}

    async def delete_topics(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        body = req.body
        if req.version >= 6:
            wanted = [(t.name, t.topic_id) for t in body.topics]
        else:
            wanted = [(n, None) for n in body.topic_names]
        by_id = {t.topic_id: t.name for t in self._topics.values()}
        out = []
        for name, tid in wanted:
            res: dict[str, Any] = {
                "name": name,
                "topic_id": tid,
                "error_code": 0,
                "error_message": None,
            }
            with _errors_into(res):
                if name is None and tid is not None:
                    name = by_id.get(kafka_uuid_str(tid))
                    if name is None:
                        raise KafkaError(f"no topic has id {tid}", ErrorCode.UNKNOWN_TOPIC_ID)
                    res["name"] = name
                if not self._allowed(ctx, Operation.DELETE, ResourceType.TOPIC, name):
                    raise KafkaError(
                        f"not allowed to delete {name}", ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    )
                topic = await self.controller.delete_topic(name)
                res["topic_id"] = _topic_id(topic)
                for p in topic.partitions:
                    tp = TopicPartition(name, p)
                    self.producers.forget_partition(tp)
                    try:
                        self.logs.delete_log(tp)
                    except KafkaError as exc:
                        log.warning("deleting %s: %s", tp, exc)
            out.append(res)
        return {"throttle_time_ms": 0, "responses": out}

    async def create_partitions(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        body = req.body
        out = []
        for t in body.topics:
            res: dict[str, Any] = {"name": t.name, "error_code": 0, "error_message": None}
            with _errors_into(res):
                if not self._allowed(ctx, Operation.ALTER, ResourceType.TOPIC, t.name):
                    raise KafkaError(
                        f"not allowed to alter {t.name}", ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    )
                assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
                await self.controller.create_partitions(
                    t.name, t.count, assignments, validate_only=bool(body.validate_only)
                )
                if not body.validate_only:
                    await self.create_local_logs(self._topics[t.name])
            out.append(res)
        return {"throttle_time_ms": 0, "results": out}

    async def init_producer_id(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        body = req.body
        res = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
        if body.transactional_id is not None:
            res["error_code"] = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return res
        if req.version >= 3 and body.producer_id is not None and body.producer_id >= 0:
            # KIP-360: an idempotent producer bumps its own epoch after an error.
            epoch = body.producer_epoch + 1
            if epoch > 32767:
                res["producer_id"] = await self._next_producer_id()
                res["producer_epoch"] = 0
            else:
                res["producer_id"], res["producer_epoch"] = body.producer_id, epoch
            return res
        with _errors_into(res, message=False):
            res["producer_id"] = await self._next_producer_id()
            res["producer_epoch"] = 0
        return res

    async def _next_producer_id(self) -> int:
        nxt, end = self._producer_ids
        if nxt >= end:
            nxt = await self.controller.allocate_producer_ids(PRODUCER_ID_BLOCK)
            end = nxt + PRODUCER_ID_BLOCK
        self._producer_ids = (nxt + 1, end)
        return nxt

    # --- Configs ----------------------------------------------------------------------------

    def _broker_config_entries(self, scope: str, keys: set[str] | None) -> list[dict[str, Any]]:
        store = self.controller.store.broker_configs
        default_dyn = store.get("", {})
        own_dyn = store.get(str(self.node_id), {}) if scope != "" else {}
        merged: dict[str, tuple[str, int]] = {}
        for k, v in self.static_configs.items():
            merged[k] = (v, CONFIG_SOURCE_STATIC_BROKER)
        for k, v in default_dyn.items():
            merged[k] = (v, CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER)
        for k, v in own_dyn.items():
            merged[k] = (v, CONFIG_SOURCE_DYNAMIC_BROKER)
        out = []
        for k in sorted(merged):
            if keys is not None and k not in keys:
                continue
            v, src = merged[k]
            out.append(
                {
                    "name": k,
                    "value": v,
                    "read_only": src == CONFIG_SOURCE_STATIC_BROKER,
                    "config_source": src,
                    "is_default": False,
                    "is_sensitive": False,
                    "synonyms": [],
                    "config_type": 0,
                    "documentation": None,
                }
            )
        return out

    def _config_resource(self, ctx: RequestContext, op: Operation, r: Any) -> int:
        """The type of a DescribeConfigs/IncrementalAlterConfigs resource once ``op`` on it is
        allowed: a topic, or this broker (``""`` = the cluster default); else KafkaError."""
        if r.resource_type == RESOURCE_TOPIC:
            if not self._allowed(ctx, op, ResourceType.TOPIC, r.resource_name):
                raise KafkaError("not allowed", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif r.resource_type == RESOURCE_BROKER:
            if not self._allowed(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME):
                raise KafkaError("not allowed", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            if r.resource_name not in ("", str(self.node_id)):
                raise KafkaError(
                    f"broker {r.resource_name} is not this broker ({self.node_id})",
                    ErrorCode.INVALID_REQUEST,
                )
        else:
            raise KafkaError(
                f"resource type {r.resource_type} is not served", ErrorCode.INVALID_REQUEST
            )
        return int(r.resource_type)

    async def describe_configs(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        results = []
        for r in req.body.resources:
            keys = set(r.configuration_keys) if r.configuration_keys is not None else None
            res: dict[str, Any] = {
                "error_code": 0,
                "error_message": None,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "configs": [],
            }
            with _errors_into(res):
                if self._config_resource(ctx, Operation.DESCRIBE_CONFIGS, r) == RESOURCE_TOPIC:
                    topic = self._topics.get(r.resource_name)
                    if topic is None:
                        raise KafkaError(
                            f"topic {r.resource_name!r} does not exist",
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        )
                    res["configs"] = [
                        {
                            "name": k,
                            "value": v,
                            "read_only": False,
                            "config_source": CONFIG_SOURCE_TOPIC,
                            "is_default": False,
                            "is_sensitive": False,
                            "synonyms": [],
                            "config_type": 0,
                            "documentation": None,
                        }
                        for k, v in sorted(topic.configs.items())
                        if keys is None or k in keys
                    ]
                else:
                    res["configs"] = self._broker_config_entries(r.resource_name, keys)
            results.append(res)
        return {"throttle_time_ms": 0, "results": results}

    async def incremental_alter_configs(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        body = req.body
        out = []
        for r in body.resources:
            res: dict[str, Any] = {
                "error_code": 0,
                "error_message": None,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
            }
            changes = [ConfigChange(c.name, c.config_operation, c.value) for c in r.configs]
            with _errors_into(res):
                if self._config_resource(ctx, Operation.ALTER_CONFIGS, r) == RESOURCE_TOPIC:
                    await self.controller.alter_topic_configs(
                        r.resource_name, changes, validate_only=bool(body.validate_only)
                    )
                else:
                    await self.controller.alter_broker_configs(
                        r.resource_name, changes, validate_only=bool(body.validate_only)
                    )
                    if not body.validate_only:
                        self.apply_dynamic_broker_configs()
            out.append(res)
        return {"throttle_time_ms": 0, "responses": out}

    def apply_dynamic_broker_configs(self) -> None:
        """Push the effective dynamic configs (own > cluster default > static) into storage."""
        store = self.controller.store.broker_configs
        value = store.get(str(self.node_id), {}).get(THROTTLE_KEY) or store.get("", {}).get(
            THROTTLE_KEY
        )
        if value is None:
            value = self.static_configs.get(THROTTLE_KEY, str((1 << 63) - 1))
        self.logs.set_alter_log_dirs_throttle(int(value))

    # --- JBOD: DescribeLogDirs, AlterReplicaLogDirs ------------------------------------------

    async def describe_log_dirs(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        if not self._allowed(ctx, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return {
                "throttle_time_ms": 0,
                "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                "results": [],
            }
        wanted: dict[str, list[int]] | None = None
        if req.body.topics is not None:
            wanted = {t.topic: list(t.partitions) for t in req.body.topics}
        selection = None
        if wanted is not None:
            selection = [TopicPartition(t, p) for t, ps in wanted.items() for p in ps]
        results = []
        for d in self.logs.describe_dirs(topics=selection):
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for p in d.partitions:
                by_topic.setdefault(p.tp.topic, []).append(
                    {
                        "partition_index": p.tp.partition,
                        "partition_size": p.size,
                        "offset_lag": p.offset_lag,
                        "is_future_key": p.is_future,
                    }
                )
            results.append(
                {
                    "error_code": int(d.error),
                    "log_dir": d.path,
                    "topics": [{"name": n, "partitions": ps} for n, ps in sorted(by_topic.items())],
                    "total_bytes": d.total_bytes,
                    "usable_bytes": d.usable_bytes,
                }
            )
        return {"throttle_time_ms": 0, "error_code": 0, "results": results}

    async def alter_replica_log_dirs(self, ctx: RequestContext, req: Request) -> dict[str, Any]:
        allowed = self._allowed(ctx, Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
        results: dict[str, list[dict[str, Any]]] = {}
        for d in req.body.dirs:
            for t in d.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p)
                    if not allowed:
                        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                    else:
                        try:
                            # Storage remembers the destination of a replica it does not host
                            # yet, so a topic created later is placed there (Kafka does the same).
                            code = self.logs.change_replica_dir(tp, d.path)
                        except Exception as exc:
                            code = ErrorCode(_err(exc)[0])
                        if t.name not in self._topics and code is ErrorCode.REPLICA_NOT_AVAILABLE:
                            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    results.setdefault(t.name, []).append(
                        {"partition_index": p, "error_code": int(code)}
                    )
        return {
            "throttle_time_ms": 0,
            "results": [{"topic_name": n, "partitions": ps} for n, ps in results.items()],
        }

    # --- Reassignments (KIP-455, one broker) -------------------------------------------------

    async def alter_partition_reassignments(
        self, ctx: RequestContext, req: Request
    ) -> dict[str, Any]:
        if not self._allowed(ctx, Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            return {
                "throttle_time_ms": 0,
                "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                "error_message": "not allowed",
                "responses": [],
            }
        responses = []
        for t in req.body.topics:
            parts = []
            for p in t.partitions:
                code, msg = 0, None
                try:
                    target = list(p.replicas) if p.replicas is not None else None
                    await self.controller.alter_reassignment(
                        TopicPartition(t.name, p.partition_index), target
                    )
                except Exception as exc:
                    code, msg = _err(exc)
                parts.append(
                    {"partition_index": p.partition_index, "error_code": code, "error_message": msg}
                )
            responses.append({"name": t.name, "partitions": parts})
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "responses": responses,
        }

    async def list_partition_reassignments(
        self, ctx: RequestContext, req: Request
    ) -> dict[str, Any]:
        topics = []
        wanted = (
            {t.name: set(t.partition_indexes) for t in req.body.topics}
            if req.body.topics is not None
            else None
        )
        for name, topic in sorted(self._topics.items()):
            if wanted is not None and name not in wanted:
                continue
            parts = [
                {
                    "partition_index": p.partition,
                    "replicas": list(p.replicas),
                    "adding_replicas": list(p.adding),
                    "removing_replicas": list(p.removing),
                }
                for p in topic.partitions.values()
                if (p.adding or p.removing) and (wanted is None or p.partition in wanted[name])
            ]
            if parts:
                topics.append({"name": name, "partitions": parts})
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": topics}


def _close_fetch_regions(responses: list[dict[str, Any]]) -> None:
    """Release the file ranges of a fetch answer that will not be sent (long poll retries)."""
    for t in responses:
        close_regions(p["records"] for p in t["partitions"])
