"""The operator's one door to Kafka (its Kafka port): every admin call the operator makes.

The rest of the operator speaks Kubernetes (``spindle.operator.kube``) or is pure; only this
module imports a Kafka client (import-linter keeps it so), the way the operator talks to
brokers only through their wire protocol, never their internals. One port, two pieces:

* ``Admin``: every admin call, on one kafka-python connection -- Metadata,
  DescribeLogDirs and ListPartitionReassignments as one ``ClusterView``,
  AlterPartitionReassignments, AlterReplicaLogDirs, ElectLeaders, DescribeConfigs and
  IncrementalAlterConfigs (throttles, KIP-1066's ``cordoned.log.dirs``), Metadata as
  partition states, DescribeLogDirs as one broker's ``DirReport`` s. Each call is retried with
  backoff for what a broker restart or a controller move makes fail briefly, and a failure is
  a ``BrokerError`` naming the call and the cluster (it goes into a condition as is);
* ``AdminPool``: ``Admin`` connections kept per bootstrap list between passes (opening one
  costs a bootstrap round of Metadata and ApiVersions, too much to pay every two seconds),
  with the probe's short timeouts; a call that fails is retried on a new connection and
  reported as ``BrokerUnreachable``. The probe loop, cordons, directory moves, remediation's
  metadata and drains use it. ``cluster_admin`` opens one unpooled ``Admin`` with the longer
  request timeout for a Reassignment's or Rebalance's pass.

Why one module and not a ``ports/`` folder: the operator has exactly one Kafka port, and the
import-linter contracts name it (``spindle.operator.brokers``); the Kubernetes port is
``spindle.operator.kube``, the planner's is its facade.

The planner's snapshot: ``gather_snapshot`` asks the live cluster three things and hands the
answers to the pure builder in ``spindle.operator.snapshot``, which holds every rule about what
the answers mean. kafka-python's admin client blocks, so kopf handlers use
``gather_snapshot_async``, which runs it off the event loop. kafka-python (a maintained admin
client with all of these calls since 3.0) does the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, Unpack

# kafka-python loads its protocol schemas with importlib.resources.read_text, deprecated in
# Python 3.11 (a DeprecationWarning at import, an error under the tests' filterwarnings).
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartition, TopicPartitionReplica
    from kafka import errors as kafka_errors
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient
from spindle.operator.decisions.reassignment import TP, TPR, ClusterView, DirInfo
from spindle.operator.decisions.remediation import PartitionState
from spindle.operator.decisions.volume_state import BrokerUnreachable, DirReport
from spindle.operator.snapshot import (
    SnapshotOptions,
    brokers_from_admin,
    build_snapshot,
    partitions_from_admin,
)

T = TypeVar("T")


def gather_snapshot(
    bootstrap_servers: str | Sequence[str],
    *,
    client_config: Mapping[str, Any] | None = None,
    **options: Unpack[SnapshotOptions],
) -> dict[str, Any]:
    """Ask the live cluster and build its snapshot (``options``: see ``SnapshotOptions``).
    The three calls are not one atomic read: a topic created or a move finished between them
    may make the build fail with a message saying to snapshot again, never produce a snapshot
    that mixes two states silently."""
    servers = [bootstrap_servers] if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
    admin = KafkaAdminClient(bootstrap_servers=servers, **dict(client_config or {}))
    try:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics()
        broker_ids = sorted(int(b["broker_id"]) for b in cluster["brokers"])
        log_dirs = admin.describe_log_dirs(brokers=broker_ids)
    finally:
        admin.close()
    return build_snapshot(
        brokers_from_admin(cluster, log_dirs), partitions_from_admin(topics), **options
    )


async def gather_snapshot_async(
    bootstrap_servers: str | Sequence[str],
    *,
    client_config: Mapping[str, Any] | None = None,
    **options: Unpack[SnapshotOptions],
) -> dict[str, Any]:
    """``gather_snapshot`` off the event loop (kafka-python's admin client blocks)."""
    return await asyncio.to_thread(
        gather_snapshot, bootstrap_servers, client_config=client_config, **options
    )


class BrokerError(RuntimeError):
    """A Kafka admin call failed for good; the message is fit for a condition."""


#: Request timeout of every admin call, and the pauses between tries of a failed one.
REQUEST_TIMEOUT_MS = 15_000
BACKOFF_S = (0.5, 1.0, 2.0)


def _error_name(error: Any) -> str | None:
    """kafka-python answers per-partition errors as error classes (or None/NoError)."""
    if error is None or error is kafka_errors.NoError:
        return None
    return str(getattr(error, "__name__", error))


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


#: Request timeout of the probe's calls (``AdminPool``): a probe runs every few seconds, so a
#: broker that does not answer must not hold it up for kafka-python's default 30 s.
PROBE_TIMEOUT_MS = 3_000
#: Pauses between the tries of a failed pooled call (a broker restarting, a connection just
#: dropped), each on a new connection.
PROBE_BACKOFF_S = (0.2, 0.5)
CORDONED_KEY = "cordoned.log.dirs"  # KIP-1066


class Admin:
    """Every admin call the operator makes, on one connection (thread-confined: one pass, or
    one pooled call under its connection's lock, uses it). ``clock`` stamps the answers'
    ``described_at``. ``backoff``: the pauses between the tries of a failed call, each failure
    raised as ``BrokerError``; None for the pool's calls, which retry on a new connection
    instead and get the client's own errors."""

    def __init__(
        self,
        client: KafkaAdminClient,
        cluster: str,
        *,
        clock: Callable[[], datetime.datetime] = utc_now,
        backoff: Sequence[float] | None = BACKOFF_S,
    ) -> None:
        self._client = client
        self._cluster = cluster
        self._clock = clock
        self._backoff = backoff

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        if self._backoff is None:
            return fn()
        for attempt, pause in enumerate((*self._backoff, None)):
            try:
                return fn()
            except (kafka_errors.KafkaError, OSError) as exc:
                retriable = getattr(exc, "retriable", True) or isinstance(exc, OSError)
                if pause is None or not retriable:
                    raise BrokerError(
                        f"{what} on cluster {self._cluster} failed"
                        f"{f' after {attempt + 1} tries' if attempt else ''}: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                time.sleep(pause)
        raise AssertionError("unreachable")

    def view(self, topics: Sequence[str] | None = None) -> ClusterView:
        """Metadata, every broker's DescribeLogDirs and the reassignments in progress."""
        cluster = self._call("DescribeCluster", self._client.describe_cluster)
        brokers = sorted(int(b["broker_id"]) for b in cluster["brokers"])
        described = self._call(
            "Metadata", lambda: self._client.describe_topics(list(topics) if topics else None)
        )
        partitions: dict[TP, tuple[int, ...]] = {}
        for t in described:
            if int(t.get("error_code", 0)) != 0:
                continue  # an unknown topic: validation names it
            for p in t["partitions"]:
                partitions[(t["name"], int(p["partition_index"]))] = tuple(
                    int(b) for b in p["replica_nodes"]
                )
        log_dirs = self._call(
            "DescribeLogDirs", lambda: self._client.describe_log_dirs(brokers=brokers)
        )
        # The sizes' time is the answer's, not the pass's: before it come the Kubernetes
        # reads, the connection and two more calls, which a loaded machine stretches unevenly.
        described_at = self._clock()
        dirs: dict[int, dict[str, DirInfo]] = {}
        for entry in log_dirs:
            per_broker = dirs.setdefault(int(entry["broker"]), {})
            for d in entry["log_dirs"]:
                current: dict[TP, int] = {}
                future: dict[TP, int] = {}
                for t in d.get("topics") or ():
                    for p in t["partitions"]:
                        into = future if p.get("is_future_key") else current
                        into[(t["name"], int(p["partition_index"]))] = int(p["partition_size"])
                code = int(d["error_code"])
                error = None if code == 0 else _error_name(kafka_errors.for_code(code))
                total, usable = d.get("total_bytes"), d.get("usable_bytes")
                per_broker[d["log_dir"]] = DirInfo(
                    d["log_dir"],
                    error,
                    current,
                    future,
                    total_bytes=total if isinstance(total, int) and total >= 0 else None,
                    usable_bytes=usable if isinstance(usable, int) and usable >= 0 else None,
                )
        listed = self._call(
            "ListPartitionReassignments",
            lambda: self._client.list_partition_reassignments(timeout_ms=REQUEST_TIMEOUT_MS),
        )
        reassigning = frozenset((tp.topic, tp.partition) for tp in listed)
        return ClusterView(frozenset(brokers), partitions, dirs, reassigning, described_at)

    def alter_reassignments(self, changes: Mapping[TP, list[int] | None]) -> dict[TP, str]:
        """AlterPartitionReassignments (None = cancel); the partitions that failed, by error."""
        if not changes:
            return {}
        request = {TopicPartition(t, p): r for (t, p), r in changes.items()}
        answer = self._call(
            "AlterPartitionReassignments",
            lambda: self._client.alter_partition_reassignments(
                request, timeout_ms=REQUEST_TIMEOUT_MS
            ),
        )
        return {
            (tp.topic, tp.partition): name
            for tp, err in answer.items()
            if (name := _error_name(err)) is not None
        }

    def alter_log_dirs(self, moves: Mapping[TPR, str]) -> dict[TPR, str]:
        """AlterReplicaLogDirs; the replicas that failed, by error (REPLICA_NOT_AVAILABLE while
        a new replica does not exist yet)."""
        if not moves:
            return {}
        request = {TopicPartitionReplica(t, p, b): d for (t, p, b), d in moves.items()}
        answer = self._call(
            "AlterReplicaLogDirs", lambda: self._client.alter_replica_log_dirs(request)
        )
        return {
            (r.topic, r.partition, r.broker_id): name
            for r, err in answer.items()
            if (name := _error_name(err)) is not None
        }

    def elect_preferred(self, partitions: Sequence[TP]) -> dict[TP, str]:
        """ElectLeaders, preferred (``kafka-leader-election --election-type preferred``) for
        ``partitions``; those that did not get their preferred leader, by error.
        ELECTION_NOT_NEEDED (already led by it) counts as done, as Kafka's tool counts it."""
        if not partitions:
            return {}
        wanted: dict[str, list[int]] = {}
        for topic, partition in partitions:
            wanted.setdefault(topic, []).append(int(partition))
        answer = self._call(
            "ElectLeaders",
            lambda: self._client.elect_leaders(
                0, wanted, timeout_ms=REQUEST_TIMEOUT_MS, raise_errors=False
            ),
        )
        top = int(getattr(answer, "error_code", 0) or 0)
        if top != 0:
            whole = _error_name(kafka_errors.for_code(top)) or str(top)
            return {(t, p): whole for t, p in partitions}
        failed: dict[TP, str] = {}
        for result in answer.replica_election_results:
            for part in result.partition_result:
                err = kafka_errors.for_code(int(part.error_code))
                if err is kafka_errors.ElectionNotNeededError:
                    continue
                if (name := _error_name(err)) is not None:
                    failed[(result.topic, int(part.partition_id))] = name
        return failed

    def set_configs(
        self,
        brokers: Mapping[int, Mapping[str, str | None]],
        topics: Mapping[str, Mapping[str, str | None]],
    ) -> None:
        """IncrementalAlterConfigs: SET each value, DELETE each None."""
        resources = [
            ConfigResource(kind, name, {k: _op(v) for k, v in cfg.items()})
            for kind, items in (
                (ConfigResourceType.BROKER, {str(b): c for b, c in brokers.items()}),
                (ConfigResourceType.TOPIC, dict(topics)),
            )
            for name, cfg in items.items()
            if cfg
        ]
        if not resources:
            return
        answer = self._call(
            "IncrementalAlterConfigs",
            lambda: self._client.alter_configs(resources, raise_on_unknown=False, incremental=True),
        )
        failed = [
            f"{kind} {name}: {err}"
            for kind, by_name in answer.items()
            for name, err in by_name.items()
            if err != "OK"
        ]
        if failed:
            raise BrokerError(f"throttles on cluster {self._cluster}: " + "; ".join(failed))

    def cordoned_dirs(self, broker_id: int) -> list[str]:
        """The broker's effective ``cordoned.log.dirs`` (KIP-1066), from DescribeConfigs."""
        resource = ConfigResource(ConfigResourceType.BROKER, str(broker_id))
        answer = self._call("DescribeConfigs", lambda: self._client.describe_configs([resource]))
        entry = (answer.get("broker") or {}).get(str(broker_id)) or {}
        value = (entry.get(CORDONED_KEY) or {}).get("value") or ""
        return [p for p in str(value).split(",") if p.strip()]

    def set_cordoned(self, broker_id: int, paths: Sequence[str]) -> None:
        """IncrementalAlterConfigs of the broker's ``cordoned.log.dirs`` (DELETE when empty);
        a refusal raises ``BrokerUnreachable`` with the broker's reason."""
        op = (AlterConfigOp.SET, ",".join(paths)) if paths else (AlterConfigOp.DELETE, None)
        resource = ConfigResource(ConfigResourceType.BROKER, str(broker_id), {CORDONED_KEY: op})
        answer = self._call(
            "IncrementalAlterConfigs",
            lambda: self._client.alter_configs(
                [resource], raise_on_unknown=False, incremental=True
            ),
        )
        result = (answer.get("broker") or {}).get(str(broker_id))
        if result not in (None, "OK") and getattr(result, "errno", 0) not in (0, None):
            raise BrokerUnreachable(f"broker {broker_id} refused {CORDONED_KEY}: {result}")

    def partition_states(self) -> dict[TP, PartitionState]:
        """Metadata of every topic: each partition's replicas, ISR and offline replicas (those
        in a failed, LOST directory) -- what remediation judges safety and rebuilding by."""
        out: dict[TP, PartitionState] = {}
        for topic in self._call("Metadata", self._client.describe_topics):
            if int(topic.get("error_code") or 0) != 0:
                continue
            for p in topic.get("partitions") or ():
                out[(str(topic["name"]), int(p["partition_index"]))] = PartitionState(
                    replicas=tuple(int(b) for b in p.get("replica_nodes") or ()),
                    isr=tuple(int(b) for b in p.get("isr_nodes") or ()),
                    offline=tuple(int(b) for b in p.get("offline_replicas") or ()),
                )
        return out

    def log_dirs(self, broker_id: int) -> list[Mapping[str, Any]]:
        """DescribeLogDirs (all topics) sent to ``broker_id``: its directories as answered
        (``dir_reports`` reads them)."""
        answer = self._call(
            "DescribeLogDirs", lambda: self._client.describe_log_dirs(brokers=[broker_id])
        )
        return [d for entry in answer for d in entry["log_dirs"]]


def _op(value: str | None) -> tuple[AlterConfigOp, str | None]:
    return (AlterConfigOp.DELETE, None) if value is None else (AlterConfigOp.SET, value)


@contextlib.contextmanager
def cluster_admin(
    cluster: str,
    bootstrap_servers: str | Sequence[str],
    *,
    client_config: Mapping[str, Any] | None = None,
) -> Iterator[Admin]:
    """A pass's own ``Admin`` connection to ``cluster`` (the long request timeout, its calls
    retried in place); a cluster that cannot be reached is a ``BrokerError`` naming the
    addresses tried."""
    servers = [bootstrap_servers] if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
    try:
        client = KafkaAdminClient(
            bootstrap_servers=servers,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            **dict(client_config or {}),
        )
    except (kafka_errors.KafkaError, OSError) as exc:
        raise BrokerError(
            f"cluster {cluster} is not reachable at {', '.join(servers)}: {type(exc).__name__}"
        ) from exc
    try:
        yield Admin(client, cluster)
    finally:
        client.close()


class AdminPool:
    """``Admin`` connections kept per bootstrap list (see the module docstring), for the probe
    loop and the steps it feeds. One lock per connection: kopf's handler threads and the
    refresh loop share them. ``clock`` stamps each ``DirReport``'s ``described_at``."""

    def __init__(self, *, clock: Callable[[], datetime.datetime] = utc_now) -> None:
        self._clients: dict[str, tuple[threading.Lock, KafkaAdminClient]] = {}
        self._guard = threading.Lock()
        self._clock = clock

    def _client(self, servers: Sequence[str]) -> tuple[threading.Lock, KafkaAdminClient]:
        key = ",".join(servers)
        with self._guard:
            entry = self._clients.get(key)
            if entry is None:
                client = KafkaAdminClient(
                    bootstrap_servers=list(servers),
                    request_timeout_ms=PROBE_TIMEOUT_MS,
                    # kafka-python waits 30 s for a first connection by default: a broker
                    # not up yet (its Pod starting) would hold a probe worker that long.
                    bootstrap_timeout_ms=PROBE_TIMEOUT_MS,
                    client_id="spindle-operator",
                )
                entry = (threading.Lock(), client)
                self._clients[key] = entry
            return entry

    def _drop(self, servers: Sequence[str]) -> None:
        with self._guard:
            entry = self._clients.pop(",".join(servers), None)
        if entry is not None:
            with contextlib.suppress(Exception):
                entry[1].close()

    def close(self) -> None:
        with self._guard:
            entries = list(self._clients.values())
            self._clients.clear()
        for _, client in entries:
            with contextlib.suppress(Exception):
                client.close()

    def run(
        self,
        servers: Sequence[str],
        what: str,
        fn: Callable[[Admin], T],
        *,
        cluster: str = "",
        backoff: Sequence[float] | None = None,
    ) -> T:
        """``fn`` on the ``Admin`` of the kept connection to ``servers`` (``backoff``: its own
        in-place retries, none by default), retried with backoff on a new connection after a
        failure; ``BrokerUnreachable`` naming ``what`` when every try failed. A
        ``BrokerError`` (an ``Admin`` call done with its in-place retries) drops the
        connection too: a kept client's cluster metadata can be minutes old and miss a broker
        that restarted meanwhile (found on the node: every drain pass failed with
        UnknownBrokerIdError for a broker whose Pod had been replaced, until a new client)."""
        last: BaseException | None = None
        for pause in (*PROBE_BACKOFF_S, None):
            try:
                lock, client = self._client(servers)
                with lock:
                    return fn(Admin(client, cluster, clock=self._clock, backoff=backoff))
            except (kafka_errors.KafkaError, OSError, KeyError, ValueError, BrokerError) as exc:
                last = exc
                self._drop(servers)
                if pause is not None:
                    time.sleep(pause)
        raise BrokerUnreachable(
            f"{what} at {', '.join(servers)} failed after {len(PROBE_BACKOFF_S) + 1} tries: "
            f"{type(last).__name__}: {last}"
        )

    def cordoned_dirs(self, servers: Sequence[str], broker_id: int) -> list[str]:
        what = f"DescribeConfigs of broker {broker_id}"
        return self.run(servers, what, lambda admin: admin.cordoned_dirs(broker_id))

    def set_cordoned(self, servers: Sequence[str], broker_id: int, paths: Sequence[str]) -> None:
        what = f"IncrementalAlterConfigs of broker {broker_id}"
        self.run(servers, what, lambda admin: admin.set_cordoned(broker_id, paths))

    def move_replicas(
        self, servers: Sequence[str], broker_id: int, moves: Mapping[tuple[str, int], str]
    ) -> dict[tuple[str, int], str]:
        """AlterReplicaLogDirs on ``broker_id``: each (topic, partition) to a directory; the
        replicas the broker refused, by error name."""
        request = {(t, p, broker_id): d for (t, p), d in moves.items()}
        refused = self.run(
            servers,
            f"AlterReplicaLogDirs on broker {broker_id}",
            lambda admin: admin.alter_log_dirs(request),
        )
        return {(t, p): name for (t, p, _b), name in refused.items()}

    def cluster_view(
        self, servers: Sequence[str], cluster: str, topics: Sequence[str]
    ) -> ClusterView:
        """``Admin.view`` (Metadata, every broker's DescribeLogDirs, the reassignments in
        flight) on the kept connection, each call retried in place too;
        ``BrokerUnreachable`` when it cannot be had."""
        return self.run(
            servers,
            f"the view of cluster {cluster}",
            lambda admin: admin.view(topics or None),
            cluster=cluster,
            backoff=BACKOFF_S,
        )

    def partition_states(self, servers: Sequence[str]) -> dict[TP, PartitionState]:
        return self.run(servers, "Metadata", lambda admin: admin.partition_states())

    def describe_dirs(self, servers: Sequence[str], broker_id: int) -> list[DirReport]:
        """DescribeLogDirs (all topics) sent to ``broker_id``: each directory with its error,
        replica count, bytes used by replicas (future replicas excluded: they are copies in
        flight), from v4 the file system's total and usable bytes, and whether the broker's
        ``cordoned.log.dirs`` names it. ``BrokerUnreachable`` when it cannot be asked."""
        answer = self.run(
            servers,
            f"DescribeLogDirs to broker {broker_id}",
            lambda admin: admin.log_dirs(broker_id),
        )
        described_at = self._clock()  # before the cordoned.log.dirs read: the sizes' time
        cordoned = set(self.cordoned_dirs(servers, broker_id))
        return [_dir_report(d, cordoned, described_at) for d in answer]


def _dir_report(
    d: Mapping[str, Any], cordoned: set[str], described_at: datetime.datetime
) -> DirReport:
    code = int(d.get("error_code") or 0)
    error = None if code == 0 else str(kafka_errors.for_code(code).__name__)
    live: dict[tuple[str, int], int] = {}
    futures: dict[tuple[str, int], int] = {}
    for topic in d.get("topics") or ():
        for p in topic.get("partitions") or ():
            into = futures if p.get("is_future_key") else live
            into[(str(topic["name"]), int(p["partition_index"]))] = max(
                int(p.get("partition_size") or 0), 0
            )
    replicas, used = len(live), sum(live.values())
    total = d.get("total_bytes")
    usable = d.get("usable_bytes")
    return DirReport(
        path=str(d["log_dir"]),
        error=error,
        replicas=replicas,
        used_bytes=used,
        total_bytes=int(total) if isinstance(total, int) and total >= 0 else None,
        usable_bytes=int(usable) if isinstance(usable, int) and usable >= 0 else None,
        cordoned=str(d["log_dir"]) in cordoned,
        partitions=live,
        futures=futures,
        described_at=described_at,
    )
