"""The broker process: wires settings, etcd metadata, storage and the listener together.

Start-up order: metadata first (the cluster id must be known before log directories are
checked against it), then storage (``LogManager.open``: meta.properties, recovery), then this
broker's registration with its directory ids, then local replicas for every partition assigned
here, and only then the listener, so no client ever sees a half-started broker. ``stop()``
reverses it: stop accepting, let in-flight requests finish (bounded), close connections, close
storage cleanly (clean-shutdown marker), close the etcd client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from spindle.broker.common.clock import Clock, SystemClock
from spindle.broker.common.errors import KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.controller.controller import SingleBrokerController
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.model import LOST_DIR, BrokerRegistration, kafka_uuid_str
from spindle.broker.controller.store import MetadataStore
from spindle.broker.storage import LogManager
from spindle.broker.storage.settings import StorageSettings

from .authorizer import AllowAll, Authorizer
from .config import BrokerSettings
from .connection import serve_connection
from .handlers import Endpoint, KafkaApis
from .metrics import MetricsServer

log = logging.getLogger(__name__)

DIR_REPORT_INTERVAL_S = 1.0


class BrokerServer:
    """One broker. ``await start()``, then ``await stop()`` (idempotent)."""

    def __init__(
        self,
        settings: BrokerSettings,
        storage: StorageSettings,
        *,
        static_configs: dict[str, str] | None = None,
        clock: Clock | None = None,
        authorizer: Authorizer | None = None,
    ) -> None:
        self.settings = settings
        self.storage_settings = storage
        self.static_configs = dict(static_configs or {})
        self.clock: Clock = clock or SystemClock()
        self.authorizer: Authorizer = authorizer or AllowAll()
        self.etcd = EtcdClient([e.strip() for e in settings.etcd_endpoints.split(",") if e.strip()])
        self.store = MetadataStore(self.etcd, prefix=settings.etcd_prefix)
        self.controller = SingleBrokerController(self.store, node_id=settings.node_id)
        self.logs: LogManager | None = None
        self.apis: KafkaApis | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._reporter: asyncio.Task[None] | None = None
        self.metrics: MetricsServer | None = None
        self.port: int | None = None
        self._stopped = False
        self.fatal = asyncio.Event()
        """Set when the broker must exit: every log directory is offline (KIP-112)."""
        self.fatal_reason = ""

    async def start(self) -> None:
        s = self.settings
        await self.store.load()
        cluster_id = await self.store.ensure_cluster_id(s.cluster_id)
        self.logs = await asyncio.to_thread(
            LogManager.open,
            self.storage_settings,
            cluster_id=cluster_id,
            node_id=s.node_id,
            clock=self.clock,
        )
        listener = s.listener_list[0]
        self._server = await asyncio.start_server(
            self._on_connection, host=listener.host or "0.0.0.0", port=listener.port
        )
        self.port = self._server.sockets[0].getsockname()[1]
        adv = s.advertised_listener_list[0]
        endpoint = Endpoint(
            s.node_id, adv.host or "127.0.0.1", adv.port or self.port, s.broker_rack
        )
        dirs = [
            kafka_uuid_str(d.directory_id)
            for d in self.logs.describe_dirs(topics=[])
            if d.directory_id
        ]
        await self.controller.register(
            BrokerRegistration(s.node_id, endpoint.host, endpoint.port, s.broker_rack, dirs)
        )
        self.apis = KafkaApis(
            settings=s,
            endpoint=endpoint,
            logs=self.logs,
            controller=self.controller,
            authorizer=self.authorizer,
            clock=self.clock,
            static_configs=self.static_configs,
        )
        for topic in list(self.store.topics.values()):
            await self.apis.create_local_logs(topic, is_new=False)
        # This broker is the only replica of everything it hosts: every appended offset is
        # committed, so the high watermark is the log end (the checkpoint may lag after a crash).
        for tp, partition_log in self.logs.logs().items():
            partition_log.high_watermark = partition_log.log_end_offset
            try:
                self.apis.load_producer_state(tp, partition_log)
            except KafkaError as exc:
                log.warning("cannot rebuild producer state of %s: %s", tp, exc)
        self.apis.apply_dynamic_broker_configs()
        loop = asyncio.get_running_loop()

        def offline_listener(path: str) -> None:  # storage thread -> event loop
            loop.call_soon_threadsafe(self._on_dir_offline, path)

        self.logs.add_offline_listener(offline_listener)
        for path in self.logs.offline_dirs:
            self._on_dir_offline(path)
        self._reporter = asyncio.create_task(self._report_directories())
        if s.metrics_listener:
            host, _, mport = s.metrics_listener.rpartition(":")
            self.metrics = MetricsServer(self.logs, node_id=s.node_id)
            await self.metrics.start(host or "127.0.0.1", int(mport))
        log.info(
            "broker %d started: cluster %s, listening on %s:%d, log dirs %s",
            s.node_id,
            cluster_id,
            listener.host,
            self.port,
            ",".join(self.storage_settings.log_dirs),
        )

    def _on_dir_offline(self, path: str) -> None:
        """Called on the loop once per directory going offline (storage's failure handler has
        already stopped its moves and replicas). Kafka keeps serving from the other directories
        and shuts the broker down only when none is left."""
        assert self.logs is not None
        online = self.logs.online_dirs
        log.error(
            "log directory %s is offline; %d of %d directories still online",
            path,
            len(online),
            len(self.storage_settings.log_dirs),
        )
        if not online and not self.fatal.is_set():
            self.fatal_reason = (
                f"all log directories are offline ({', '.join(self.logs.offline_dirs)}): "
                "shutting down"
            )
            log.error("%s", self.fatal_reason)
            self.fatal.set()

    def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self.apis is not None
        task = asyncio.create_task(
            serve_connection(
                reader,
                writer,
                self.apis,
                max_request_bytes=self.settings.socket_request_max_bytes,
                listener=self.settings.listener_list[0].name,
            )
        )
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _report_directories(self) -> None:
        """Once a second: pick up metadata other brokers wrote (:meth:`_sync_metadata`), then
        keep the metadata's replica directories in step with storage (AssignReplicasToDirs):
        a finished move records its new directory; a replica in an offline dir becomes LOST."""
        while True:
            await asyncio.sleep(DIR_REPORT_INTERVAL_S)
            try:
                await self._sync_metadata()
                await self._report_once()
            except Exception:
                log.exception("synchronising with the controller's metadata failed")

    async def _sync_metadata(self) -> None:
        """Reload the metadata from etcd and act on what changed elsewhere: create local
        replicas of partitions newly assigned here, delete those of deleted topics.

        Until the multi-broker controller pushes changes (LeaderAndIsr/StopReplica), brokers
        sharing a cluster prefix converge by polling. Replicas are created with
        ``is_new=False``: while any directory is offline storage refuses, because the replica
        might be on it.
        """
        assert self.logs is not None
        assert self.apis is not None
        before = set(self.store.topics)
        await self.store.load()
        if self.store.cluster_id != self.logs.cluster_id:
            # The metadata was wiped or replaced: deleting replicas on its word would lose data.
            log.error(
                "cluster id in etcd is %s, this broker's is %s: ignoring the metadata",
                self.store.cluster_id,
                self.logs.cluster_id,
            )
            return
        after = self.store.topics
        for tp in [tp for tp in self.logs.logs() if tp.topic in before - set(after)]:
            log.info("topic %s was deleted: deleting local replica %s", tp.topic, tp)
            self.apis.producers.forget_partition(tp)
            self.logs.delete_log(tp)
        node = self.settings.node_id
        for topic in list(after.values()):
            missing = any(
                node in p.replicas
                and self.logs.get_log(TopicPartition(topic.name, p.partition)) is None
                and not self.logs.is_partition_offline(TopicPartition(topic.name, p.partition))
                for p in topic.partitions.values()
            )
            if missing:
                await self.apis.create_local_logs(topic, is_new=False)

    async def _report_once(self) -> None:
        if self.logs is None:
            return
        placement: dict[TopicPartition, str] = {}
        for d in self.logs.describe_dirs():
            dir_id = kafka_uuid_str(d.directory_id) if d.directory_id else None
            for p in d.partitions:
                if not p.is_future and dir_id:
                    placement[p.tp] = LOST_DIR if int(d.error) else dir_id
            if int(d.error) and dir_id:
                for topic in self.store.topics.values():
                    for part in topic.partitions.values():
                        if (
                            self.settings.node_id in part.replicas
                            and part.directories[part.replicas.index(self.settings.node_id)]
                            == dir_id
                        ):
                            placement[TopicPartition(topic.name, part.partition)] = LOST_DIR
        for tp, dir_id in placement.items():
            await self.controller.assign_replica_dir(tp, self.settings.node_id, dir_id)

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._reporter is not None:
            self._reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reporter
        if self.metrics is not None:
            await self.metrics.stop()
        if self._server is not None:
            self._server.close()
        if self._connections:
            _done, pending = await asyncio.wait(
                set(self._connections), timeout=min(self.settings.shutdown_timeout_ms / 1000, 1.0)
            )
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        if self.logs is not None:
            await asyncio.to_thread(self.logs.close)
        await self.etcd.close()
        log.info("broker %d stopped cleanly", self.settings.node_id)
