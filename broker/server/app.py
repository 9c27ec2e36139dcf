"""The broker process: wires settings, etcd metadata, storage and the listener together.

Start-up order: metadata first (the cluster id must be known before log directories are
checked against it), then storage (``LogManager.open``: meta.properties, recovery), then this
broker's registration with its directory ids, then local replicas for every partition assigned
here (the replica manager), then following the metadata through etcd's watch, and only then
the listeners serve (one acceptor each), so no client ever sees a half-started broker. ``stop()`` reverses it: stop
accepting, let in-flight requests finish (bounded), close connections, close storage cleanly
(clean-shutdown marker), close the etcd client.

``spindle.controller.mode=elected`` makes the broker one of N: it registers with a session
(:mod:`spindle.broker.controller.session`), stays fenced until its replicas and their
directories are known to the metadata, reports offline directories on its session, and
campaigns for the controller role (:class:`~spindle.broker.controller.cluster.ClusterController`).
The default ``single`` keeps the one-broker controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl

from spindle.broker.common.clock import Clock, SystemClock
from spindle.broker.common.errors import KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.common.kafka_uuid import to_kafka_str
from spindle.broker.controller.cluster import ClusterController
from spindle.broker.controller.controller import SingleBrokerController
from spindle.broker.controller.etcd import EtcdClient, EtcdError
from spindle.broker.controller.model import BrokerRegistration
from spindle.broker.controller.session import BrokerLifecycle
from spindle.broker.controller.store import MetadataDelta, MetadataStore
from spindle.broker.group.coordinator import GroupCoordinator
from spindle.broker.group.store import OFFSETS_TOPIC, PartitionLogs
from spindle.broker.peer import PeerSecurity
from spindle.broker.replication.replica_manager import ReplicaManager
from spindle.broker.storage import LogManager
from spindle.broker.storage.settings import StorageSettings

from .apis import ApiContext, Endpoint, KafkaApis, build_registry
from .apis.groups import led_offsets_partitions
from .compaction import CompactionScheduler
from .config import BrokerSettings, ConfigError
from .connection import KafkaConnection
from .frame_pool import FramePool
from .metrics import MetricsServer
from .quotas import QUOTA_RECORDS
from .security.acls import ACL_RECORDS, StandardAuthorizer, acls_from_records
from .security.authenticator import Authenticator, authenticator_for
from .security.authorizer import AllowAll, Authorizer
from .security.listeners import TLS_PROTOCOLS, ListenerSpec, check_served
from .security.tls import (
    TlsConfigError,
    client_context,
    is_dynamic_tls_key,
    peer_distinguished_name,
    tls_settings,
)
from .security.tls_reload import ListenerTls
from .throttles import ClientQuotaManager

log = logging.getLogger(__name__)

DIR_REPORT_INTERVAL_S = 1.0
GROUP_TICK_S = 0.1
"""How often the group coordinator's timers run (sessions, join and sync deadlines)."""


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
        self.authorizer: Authorizer = authorizer or (
            StandardAuthorizer(settings.authorizer_settings)
            if settings.acls_enabled
            else AllowAll()
        )
        self.client_quotas = ClientQuotaManager(self.clock)
        self._listeners = check_served(settings.served_listeners)  # config refused the rest
        self._inter_broker = settings.inter_broker_listener
        self._tls: dict[str, ListenerTls] = {}
        """Each TLS listener's contexts, by listener name (reloaded as its stores change)."""
        self._peer_tls: ssl.SSLContext | None = None
        try:
            for spec in self._listeners:
                if spec.protocol in TLS_PROTOCOLS:
                    self._tls[spec.name] = ListenerTls(settings.tls_for(spec.name))
            self._peer_tls = self._peer_context()
        except TlsConfigError as exc:
            raise ConfigError(str(exc)) from None
        self.peer_security = PeerSecurity(tls=lambda: self._peer_tls)
        """How this broker dials others: as its inter-broker listener is secured."""
        self.etcd = EtcdClient([e.strip() for e in settings.etcd_endpoints.split(",") if e.strip()])
        self.store = MetadataStore(self.etcd, prefix=settings.etcd_prefix)
        self.controller: SingleBrokerController
        self.cluster: ClusterController | None = None
        if settings.controller_mode == "elected":
            self.cluster = ClusterController(
                self.store,
                self.etcd,
                node_id=settings.node_id,
                prefix=settings.etcd_prefix,
                lease_ttl_s=max(2, settings.controller_lease_ms // 1000),
                auto_leader_rebalance=settings.auto_leader_rebalance_enable,
                imbalance_threshold=settings.leader_imbalance_per_broker_percentage / 100,
                imbalance_check_interval_s=settings.leader_imbalance_check_interval_seconds,
                session_timeout_ms=settings.broker_session_timeout_ms,
                heartbeat_interval_ms=settings.broker_heartbeat_interval_ms,
                peer_security=self.peer_security,
            )
            self.controller = self.cluster
        else:
            self.controller = SingleBrokerController(self.store, node_id=settings.node_id)
        self.lifecycle: BrokerLifecycle | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.logs: LogManager | None = None
        self.apis: KafkaApis | None = None
        self.replicas: ReplicaManager | None = None
        self._servers: dict[str, asyncio.Server] = {}
        """One acceptor per listener, by listener name (Kafka's ``SocketServer``)."""
        self.ports: dict[str, int] = {}
        """The port each listener is bound to, by name."""
        self._connections: set[asyncio.Task[None]] = set()
        self._frame_pool = FramePool()  # large request frames' buffers, for all connections
        self._reporter: asyncio.Task[None] | None = None
        self._background: list[asyncio.Task[None]] = []
        self.groups: GroupCoordinator | None = None
        self.metrics: MetricsServer | None = None
        self.port: int | None = None
        self._stopped = False
        self.fatal = asyncio.Event()
        """Set when the broker must exit: every log directory is offline (KIP-112)."""
        self.fatal_reason = ""

    async def start(self) -> None:
        """Start in the order of the module docstring, one named step each."""
        registry = build_registry()  # refuses an advertised API without a handler
        cluster_id = await self._load_metadata()
        self.logs = await asyncio.to_thread(
            LogManager.open,
            self.storage_settings,
            cluster_id=cluster_id,
            node_id=self.settings.node_id,
            clock=self.clock,
        )
        endpoints = await self._listen()
        await self._register(endpoints, self.logs)
        context = self._wire_services(endpoints, self.logs)
        self.apis = KafkaApis(context, registry)
        for server in self._servers.values():  # bound by _listen above
            await server.start_serving()
        await self._bring_up_replicas(context, self.logs)
        self._watch_directories(self.logs)
        await self._start_metrics(self.logs)
        log.info(
            "broker %d started: cluster %s, listening on %s, log dirs %s",
            self.settings.node_id,
            cluster_id,
            ", ".join(
                f"{spec.name}://{spec.host}:{self.ports[spec.name]} ({spec.protocol.value})"
                for spec in self._listeners
            ),
            ",".join(self.storage_settings.log_dirs),
        )

    async def _load_metadata(self) -> str:
        """Load the metadata and this cluster's id (created by the first broker)."""
        await self.store.load()
        cluster_id = await self.store.ensure_cluster_id(self.settings.cluster_id)
        await self.store.claim_controller_mode(self.settings.controller_mode, self.settings.node_id)
        self._apply_security()
        return cluster_id

    def _apply_security(self) -> None:
        """The authorizer decides by the ACL records the metadata store holds now, and the
        client quotas are those it holds."""
        if isinstance(self.authorizer, StandardAuthorizer):
            self.authorizer.acls = acls_from_records(self.store.security.get(ACL_RECORDS, {}))
        self.client_quotas.set_quotas(self.store.security.get(QUOTA_RECORDS, {}))

    async def _listen(self) -> dict[str, Endpoint]:
        """Bind every listener, so the ports are known to register with, without accepting
        yet (connections are refused, as Kafka's acceptors are until its request handlers
        start; ``start`` starts serving once the handlers exist). Returns this broker's
        advertised endpoint on each advertised listener, by name (port 0 advertises the port
        bound)."""
        s = self.settings
        loop = asyncio.get_running_loop()
        for spec in self._listeners:
            tls = self._tls.get(spec.name)
            server = await loop.create_server(
                functools.partial(self._new_connection, spec),
                host=spec.host or "0.0.0.0",
                port=spec.port,
                start_serving=False,
                ssl=tls.bound if tls is not None else None,
                ssl_handshake_timeout=s.ssl_handshake_timeout_ms / 1000 if tls else None,
            )
            self._servers[spec.name] = server
            self.ports[spec.name] = server.sockets[0].getsockname()[1]
        self.port = self.ports[self._listeners[0].name]
        return {
            adv.name: Endpoint(
                s.node_id, adv.host or "127.0.0.1", adv.port or self.ports[adv.name], s.broker_rack
            )
            for adv in s.advertised_listener_list
        }

    async def _register(self, endpoints: dict[str, Endpoint], logs: LogManager) -> None:
        """Register with this broker's directory ids and advertised listeners (``host`` and
        ``port`` the inter-broker listener's): a session when elected, else directly."""
        s = self.settings
        endpoint = endpoints[self._inter_broker.name]
        paths = {
            to_kafka_str(d.directory_id): d.path
            for d in logs.describe_dirs(topics=[])
            if d.directory_id
        }
        registration = BrokerRegistration(
            s.node_id,
            endpoint.host,
            endpoint.port,
            s.broker_rack,
            list(paths),
            paths,
            listeners={name: f"{e.host}:{e.port}" for name, e in endpoints.items()},
        )
        if self.cluster is None:
            await self.controller.register(registration)
            return
        self.lifecycle = BrokerLifecycle(
            self.etcd,
            prefix=s.etcd_prefix,
            registration=registration,
            session_timeout_ms=s.broker_session_timeout_ms,
            heartbeat_interval_ms=s.broker_heartbeat_interval_ms,
        )
        await self.lifecycle.register_when_free()

    def _wire_services(self, endpoints: dict[str, Endpoint], logs: LogManager) -> ApiContext:
        """The replica manager, the group coordinator and the handlers' view of them."""
        s = self.settings
        endpoint = endpoints[self._inter_broker.name]
        self.replicas = replicas = ReplicaManager(
            node_id=s.node_id,
            logs=logs,
            metadata=self.store,
            assigner=self.controller,
            static_configs=self.static_configs,
            clock=self.clock,
            isr_writer=self.controller,
            endpoints=self._endpoint_of,
            replica_lag_time_max_ms=s.replica_lag_time_max_ms,
            peer_security=self.peer_security,
        )

        def append_offsets(partition: int, batch: bytes) -> None:
            replicas.append(TopicPartition(OFFSETS_TOPIC, partition), batch)
            replicas.appended()

        self.groups = GroupCoordinator(
            settings=s,
            clock=self.clock,
            store=PartitionLogs(
                lambda p: replicas.hosted_log(TopicPartition(OFFSETS_TOPIC, p)),
                append_offsets,
                clock=self.clock,
            ),
        )
        return ApiContext(
            settings=s,
            endpoint=endpoint,
            logs=logs,
            controller=self.controller,
            replicas=replicas,
            authorizer=self.authorizer,
            clock=self.clock,
            static_configs=self.static_configs,
            groups=self.groups,
            client_quotas=self.client_quotas,
            listener_endpoints=endpoints,
        )

    async def _bring_up_replicas(self, context: ApiContext, logs: LogManager) -> None:
        """Local replicas and coordination first, then background work, following the
        metadata, and (elected) unfencing and campaigning."""
        assert self.replicas is not None
        assert self.groups is not None
        await self.replicas.start()
        self.replicas.mark_applied(self.store.revision)  # the metadata loaded at start-up
        self.groups.sync_leadership(led_offsets_partitions(context))
        compaction = CompactionScheduler(
            logs,
            lambda name: t.configs if (t := self.store.topics.get(name)) is not None else None,
            settings=self.storage_settings,
            clock=self.clock,
        )
        self._background = [
            asyncio.create_task(self._run_groups(context)),
            asyncio.create_task(compaction.run_forever()),
        ]
        if self._tls:
            self._background.append(asyncio.create_task(self._watch_keystores()))
        self.store.add_listener(self._on_metadata)
        self._tasks.append(asyncio.create_task(self.store.follow()))
        if self.lifecycle is not None and self.cluster is not None:
            await self._report_cordoned()
            # Every hosted replica exists and its directory is recorded: ready to lead.
            await self.lifecycle.set_fenced(False)
            self._tasks.append(asyncio.create_task(self.lifecycle.run()))
            await self.cluster.start()

    def _watch_directories(self, logs: LogManager) -> None:
        """React to offline directories (those found at start-up too) and report replica
        directories to the controller every ``DIR_REPORT_INTERVAL_S``."""
        assert self.replicas is not None
        loop = asyncio.get_running_loop()

        def offline_listener(path: str) -> None:  # failure handler thread -> event loop
            loop.call_soon_threadsafe(self._on_dir_offline, path)

        logs.add_offline_listener(offline_listener)
        for path in logs.offline_dirs:
            self._on_dir_offline(path)
        self._reporter = asyncio.create_task(self.replicas.report_loop(DIR_REPORT_INTERVAL_S))

    async def _start_metrics(self, logs: LogManager) -> None:
        if self.settings.metrics_listener:
            host, _, mport = self.settings.metrics_listener.rpartition(":")
            self.metrics = MetricsServer(logs, node_id=self.settings.node_id)
            await self.metrics.start(host or "127.0.0.1", int(mport))

    async def _run_groups(self, context: ApiContext) -> None:
        """Drive the group coordinator: its timers every ``GROUP_TICK_S``, and once a second
        which ``__consumer_offsets`` partitions this broker leads (coordination follows)."""
        assert self.groups is not None
        ticks = 0
        while True:
            await asyncio.sleep(GROUP_TICK_S)
            try:
                self.groups.tick()
                ticks += 1
                if ticks % int(DIR_REPORT_INTERVAL_S / GROUP_TICK_S) == 0:
                    self.groups.sync_leadership(led_offsets_partitions(context))
            except Exception:
                log.exception("group coordinator timers failed")

    def _endpoint_of(self, node_id: int) -> tuple[str, int] | None:
        """Where to fetch from broker ``node_id`` (its inter-broker listener), if it is live."""
        reg = self.store.brokers.get(node_id)
        if reg is None or (self.cluster is not None and node_id not in self.store.sessions):
            return None
        return reg.endpoint(self._inter_broker.name)

    async def _on_metadata(self, delta: MetadataDelta) -> None:
        """The watch applied a change: create or delete local replicas as it says; a dynamic
        broker config changed through any broker (throttles, cordons) applies here too. Then
        the change counts as applied here: handlers waiting for a write of theirs answer."""
        if delta.full or delta.security:
            self._apply_security()
        if self.replicas is None:
            return
        try:
            if delta.full or delta.configs:
                self.replicas.apply_dynamic_broker_configs()
                self._apply_dynamic_tls()
                await self._report_cordoned()
            if delta.full or delta.topics:
                await self.replicas.apply_metadata(None if delta.full else delta.topics)
        finally:
            self.replicas.mark_applied(delta.revision)

    async def _report_cordoned(self) -> None:
        """KIP-1066: put the ids of the directories ``cordoned.log.dirs`` names on this
        broker's session, so the controller places no new replica on a broker whose every
        directory is cordoned (storage's own placement skips cordoned directories here)."""
        if self.lifecycle is None or self.logs is None:
            return
        cordoned = self.logs.cordoned_dirs  # configured paths, as describe_dirs names them
        ids = [
            to_kafka_str(d.directory_id)
            for d in self.logs.describe_dirs(topics=[])
            if d.directory_id and d.path in cordoned
        ]
        try:
            await self.lifecycle.report_cordoned_dirs(ids)
        except (EtcdError, KafkaError) as exc:
            log.warning("could not report cordoned directories to the controller: %s", exc)

    async def _report_offline_dir(self, path: str) -> None:
        """KIP-858: put the failed directory's id on this broker's session (every later
        heartbeat carries it), so the controller moves leadership off its partitions. If
        that cannot be done within ``log.dir.failure.timeout.ms`` while this broker still
        leads partitions in the directory, shut down: only then is a new leader elected."""
        assert self.logs is not None
        assert self.lifecycle is not None
        dir_ids = [
            to_kafka_str(d.directory_id)
            for d in self.logs.describe_dirs(topics=[])
            if d.path == path and d.directory_id
        ]
        timeout_s = self.settings.log_dir_failure_timeout_ms / 1000
        deadline = self.clock.monotonic() + timeout_s
        while True:
            try:
                await self.lifecycle.report_offline_dirs(dir_ids)
                return
            except (EtcdError, KafkaError) as exc:
                log.error("could not report offline directory %s to the controller: %s", path, exc)
            if self.clock.monotonic() >= deadline:
                break
            await asyncio.sleep(min(1.0, timeout_s / 10))
        led = self._led_in(set(dir_ids))
        if led and not self.fatal.is_set():
            self.fatal_reason = (
                f"the failure of log directory {path} could not be reported to the controller "
                f"within log.dir.failure.timeout.ms ({self.settings.log_dir_failure_timeout_ms}) "
                f"and this broker leads {len(led)} partition(s) in it: shutting down"
            )
            log.error("%s", self.fatal_reason)
            self.fatal.set()

    def _led_in(self, dir_ids: set[str]) -> list[TopicPartition]:
        """Partitions this broker leads whose replica here the metadata places in ``dir_ids``."""
        node = self.settings.node_id
        return [
            TopicPartition(t.name, p.partition)
            for t in self.store.topics.values()
            for p in t.partitions.values()
            if p.leader == node and p.directories[p.replicas.index(node)] in dir_ids
        ]

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
        if self.lifecycle is not None:
            self._tasks.append(asyncio.create_task(self._report_offline_dir(path)))
        if not online and not self.fatal.is_set():
            self.fatal_reason = (
                f"all log directories are offline ({', '.join(self.logs.offline_dirs)}): "
                "shutting down"
            )
            log.error("%s", self.fatal_reason)
            self.fatal.set()

    def _new_connection(self, listener: ListenerSpec) -> KafkaConnection:
        assert self.apis is not None
        return KafkaConnection(
            self.apis,
            max_request_bytes=self.settings.socket_request_max_bytes,
            listener=listener.name,
            authenticate=functools.partial(self._authenticate, listener),
            send_buffer_bytes=self.settings.socket_send_buffer_bytes,
            max_idle_s=self.settings.connections_max_idle_ms / 1000,
            on_task=self._track_connection,
            frame_pool=self._frame_pool,
        )

    def _authenticate(
        self, listener: ListenerSpec, transport: asyncio.BaseTransport
    ) -> Authenticator:
        """The authenticator of a connection whose transport is up: on TLS, the client
        certificate's name (if one was presented) and the listener's mapping rules."""
        tls = self._tls.get(listener.name)
        if tls is None:
            return authenticator_for(listener)
        return authenticator_for(
            listener, peer_name=peer_distinguished_name(transport), mapper=tls.mapper
        )

    def _peer_context(self) -> ssl.SSLContext | None:
        """The client context for other brokers' inter-broker listener, if it is TLS."""
        name = self._inter_broker.name
        if name not in self._tls:
            return None
        return client_context(self.settings.tls_for(name, server=False))

    async def _watch_keystores(self) -> None:
        """Every ``spindle.ssl.keystore.reload.interval.ms``: rebuild a TLS listener's context
        whose store files changed (:mod:`.security.tls_reload`); a failed reload is logged and
        the old certificate keeps serving."""
        interval_s = self.settings.ssl_keystore_reload_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            for name, tls in self._tls.items():
                try:
                    if tls.reload_if_changed():
                        self._reloaded(name)
                except (TlsConfigError, OSError, ssl.SSLError) as exc:
                    log.error("listener %s: keeping the old certificate: %s", name, exc)

    def _reloaded(self, name: str) -> None:
        log.info("listener %s: TLS stores reloaded; new connections use them", name)
        if name == self._inter_broker.name:
            self._peer_tls = self._peer_context()

    def _apply_dynamic_tls(self) -> None:
        """A dynamic ``listener.name.X.ssl.*`` change (through any broker): rebuild listener
        X's context with the static keys overlaid by the dynamic ones (Kafka's precedence)."""
        if not self._tls or self.replicas is None:
            return
        effective = self.replicas.lifecycle.effective_broker_configs()
        configs = {
            **self.settings.ssl_configs,
            **{k: v for k, v in effective.items() if is_dynamic_tls_key(k)},
        }
        for name, tls in self._tls.items():
            try:
                wanted = tls_settings(configs, name)
                if dict(wanted.values) != dict(tls.settings.values):
                    tls.update(wanted)
                    self._reloaded(name)
            except (TlsConfigError, OSError, ssl.SSLError) as exc:
                log.error("listener %s: dynamic TLS config not applied: %s", name, exc)

    def _track_connection(self, task: asyncio.Task[None]) -> None:
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def stop(self) -> None:
        """Stop in reverse: leave the cluster, stop background work, stop serving, close
        storage cleanly, close etcd. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self.cluster is not None:
            await self.cluster.stop()  # resign: a successor need not wait for the lease
        if self.lifecycle is not None:
            await self.lifecycle.close()  # end the session: leadership moves away now
        await self._cancel_tasks()
        if self.replicas is not None:
            await self.replicas.close()
        if self.metrics is not None:
            await self.metrics.stop()
        await self._close_connections()
        if self.logs is not None:
            await asyncio.to_thread(self.logs.close)
        await self.etcd.close()
        log.info("broker %d stopped cleanly", self.settings.node_id)

    async def _cancel_tasks(self) -> None:
        for task in [self._reporter, *self._background, *self._tasks]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _close_connections(self) -> None:
        """Stop accepting, let in-flight requests finish (bounded), close the rest."""
        for server in self._servers.values():
            server.close()
        if self._connections:
            _done, pending = await asyncio.wait(
                set(self._connections), timeout=min(self.settings.shutdown_timeout_ms / 1000, 1.0)
            )
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for server in self._servers.values():
            await server.wait_closed()
