"""What every API family shares: the broker's services, the handler type, authorisation,
per-item error answers and config entries.

A handler is ``async def handler(broker: ApiContext, ctx: RequestContext, req: Request)`` and
returns the response body as a plain dict keyed by the schema's field names, or None when no
response is sent (Produce with acks=0). Family modules import only this module (and the lower
layers), never each other.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from spindle.broker.common.clock import Clock
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.kafka_uuid import from_kafka_str
from spindle.broker.controller.controller import Controller
from spindle.broker.controller.model import TopicState
from spindle.broker.group.coordinator import GroupCoordinator
from spindle.broker.protocol.apis import ApiKey, Request
from spindle.broker.protocol.constants import ConfigSource
from spindle.broker.replication.replica_manager import ReplicaManager
from spindle.broker.storage import LogManager

from ..config import BrokerSettings
from ..security.authorizer import CLUSTER_NAME, Authorizer, Operation, RequestContext, ResourceType
from ..throttles import ClientQuotaManager

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endpoint:
    """Where clients reach a broker."""

    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass
class ProducerIds:
    """This broker's block of producer ids, refilled from the controller when used up
    (InitProducerId, :mod:`.producer_ids`)."""

    next_id: int = 0
    end: int = 0


@dataclass
class ApiContext:
    """The broker's services, as the handlers see them. Event loop only; not thread-safe."""

    settings: BrokerSettings
    endpoint: Endpoint
    logs: LogManager
    controller: Controller
    replicas: ReplicaManager
    authorizer: Authorizer
    clock: Clock
    static_configs: Mapping[str, str]
    groups: GroupCoordinator
    client_quotas: ClientQuotaManager
    producer_ids: ProducerIds = field(default_factory=ProducerIds)
    listener_endpoints: Mapping[str, Endpoint] = field(default_factory=dict)
    """This broker's advertised endpoint on each listener, by name (``endpoint`` is the
    inter-broker listener's)."""

    @property
    def node_id(self) -> int:
        return self.settings.node_id

    @property
    def topics(self) -> dict[str, TopicState]:
        return self.controller.store.topics

    @property
    def multi_broker(self) -> bool:
        return self.settings.controller_mode == "elected"

    def brokers(self, listener: str | None = None) -> list[Endpoint]:
        """Live brokers as a client on ``listener`` reaches them (this one as it listens now,
        the others as registered; a broker without that listener is left out, as Kafka
        does); ``None``: as the inter-broker listener reaches them. With an elected
        controller only brokers with a live session count, as Kafka lists only
        unfenced-or-alive brokers: clients must not be sent to a dead one."""
        store = self.controller.store
        me = self.listener_endpoints.get(listener, self.endpoint) if listener else self.endpoint
        others = []
        for r in store.brokers.values():
            if r.node_id == self.node_id or (self.multi_broker and r.node_id not in store.sessions):
                continue
            where = r.endpoint(listener) if listener else (r.host, r.port)
            if where is not None:
                others.append(Endpoint(r.node_id, where[0], where[1], r.rack))
        return sorted([me, *others], key=lambda e: e.node_id)

    @property
    def controller_id(self) -> int:
        """The controller clients should send admin requests to: the elected one while it is
        known (any broker accepts them, see ``controller.cluster``), else this broker."""
        elected = self.controller.store.controller
        if self.multi_broker and elected is not None:
            return elected[0]
        return self.node_id

    def written_revision(self, topic: str) -> int:
        """The metadata revision of this broker's write to ``topic`` just made (read it right
        after the controller call returns), for :meth:`wait_applied`."""
        return self.controller.store.topic_revision(topic)

    async def wait_applied(self, revision: int, timeout_s: float) -> bool:
        """Wait until this broker's metadata watch has applied ``revision``: the local
        replicas the write creates or deletes then exist or are gone, with their roles.
        False if not within ``timeout_s``.

        Handlers never create or delete logs themselves: the watch is the one path that does
        (:mod:`spindle.broker.replication.lifecycle`). Waiting for it keeps what a client
        relies on -- a produce right after CreateTopics finds the partitions led here -- as
        Kafka's CreateTopics answers once the new metadata has reached the brokers."""
        return await self.replicas.wait_applied(revision, timeout_s)

    def allowed(self, ctx: RequestContext, op: Operation, rt: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(ctx, op, rt, name)

    def allowed_on_cluster(self, ctx: RequestContext, op: Operation) -> bool:
        return self.allowed(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME)

    def may_create_topic(self, ctx: RequestContext, name: str) -> bool:
        """Kafka's rule for CreateTopics and auto-creation: Create on the cluster, or on the
        topic itself."""
        return self.allowed_on_cluster(ctx, Operation.CREATE) or self.allowed(
            ctx, Operation.CREATE, ResourceType.TOPIC, name
        )

    def cluster_refusal(
        self, ctx: RequestContext, op: Operation, **empty: Any
    ) -> dict[str, Any] | None:
        """None if ``op`` on the cluster is allowed; else the answer refusing the whole
        request: CLUSTER_AUTHORIZATION_FAILED with the response's ``empty`` fields."""
        if self.allowed_on_cluster(ctx, op):
            return None
        code = authorization_failed(ResourceType.CLUSTER)
        return {"throttle_time_ms": 0, "error_code": int(code), **empty}

    def authorize(
        self, ctx: RequestContext, op: Operation, rt: ResourceType, name: str, what: str = ""
    ) -> None:
        """Raise the authorisation error of ``rt`` unless ``op`` on ``name`` is allowed."""
        if not self.allowed(ctx, op, rt, name):
            raise not_authorized(op, rt, what or name)


METADATA_WAIT_S = 10.0
"""How long a handler waits for the metadata watch to apply its write when the request names
no timeout (Metadata's auto-creation, FindCoordinator's ``__consumer_offsets``, a CreateTopics
sent with ``timeout_ms`` 0): shorter than clients' request timeouts (30 s by default)."""


def request_wait_s(timeout_ms: int) -> float:
    """How long to wait for the metadata watch on behalf of a request with ``timeout_ms``."""
    return timeout_ms / 1000 if timeout_ms > 0 else METADATA_WAIT_S


Handler = Callable[[ApiContext, RequestContext, Request], Awaitable[dict[str, Any] | None]]
Handlers = Mapping[ApiKey, Handler]

_VERBS = {
    Operation.DESCRIBE_CONFIGS: "describe the configs of",
    Operation.ALTER_CONFIGS: "alter the configs of",
    Operation.IDEMPOTENT_WRITE: "write idempotently to",
}


def authorization_failed(rt: ResourceType) -> ErrorCode:
    """Kafka's code for a refused operation on a resource of type ``rt``."""
    if rt is ResourceType.TOPIC:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if rt is ResourceType.GROUP:
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if rt is ResourceType.TRANSACTIONAL_ID:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def not_authorized(op: Operation, rt: ResourceType, what: str) -> KafkaError:
    verb = _VERBS.get(op, op.value.lower())
    return KafkaError(f"not allowed to {verb} {what}", authorization_failed(rt))


def error_of(exc: BaseException) -> tuple[int, str]:
    """Kafka's code and a message for an error raised while serving one item."""
    if isinstance(exc, KafkaError):
        return int(exc.code), str(exc)
    log.exception("unexpected error in a request handler")
    return int(ErrorCode.UNKNOWN_SERVER_ERROR), f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def errors_into(result: dict[str, Any], *, message: bool = True) -> Iterator[None]:
    """Answer an error raised for one item of a request in that item's ``error_code`` (and
    ``error_message``), so the other items of the request are still served."""
    try:
        yield
    except Exception as exc:
        code, msg = error_of(exc)
        result["error_code"] = code
        if message:
            result["error_message"] = msg


async def answer_when_applied(
    broker: ApiContext, written: list[tuple[dict[str, Any], int]], timeout_s: float
) -> None:
    """Wait, with one deadline, until the metadata watch has applied every write of a
    request -- ``written``: each item's answer and its write's revision -- and answer
    REQUEST_TIMED_OUT for the items whose write it has not applied in time (the change
    itself stands, as in Kafka)."""
    if not written or await broker.wait_applied(max(r for _, r in written), timeout_s):
        return
    applied = broker.replicas.applied_revision
    for res, revision in written:
        if revision > applied:
            res["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
            res["error_message"] = (
                f"the change was recorded (metadata revision {revision}), but this broker had "
                f"applied only revision {applied} after {timeout_s:g} s"
            )


def topic_id(topic: TopicState | None) -> uuid.UUID:
    """A topic's id as the schemas carry it (the zero UUID for an unknown topic)."""
    return from_kafka_str(topic.topic_id) if topic else uuid.UUID(int=0)


SENSITIVE_SUFFIXES = (".password", "ssl.keystore.key", "sasl.jaas.config")
"""Kafka's PASSWORD-type configs (also listener-prefixed): described without their value."""
PASSWORD_TYPE = 9
"""DescribeConfigs' ``config_type`` PASSWORD."""


def config_entry(name: str, value: str, source: ConfigSource) -> dict[str, Any]:
    """One config as DescribeConfigs (and, in part, CreateTopics) answers it. Static broker
    configs are read-only; passwords and private keys are sensitive, answered without their
    value as Kafka does; no synonyms are listed."""
    if name.endswith(SENSITIVE_SUFFIXES):
        return {
            "name": name,
            "value": None,
            "read_only": source is ConfigSource.STATIC_BROKER_CONFIG,
            "config_source": int(source),
            "is_default": False,
            "is_sensitive": True,
            "synonyms": [],
            "config_type": PASSWORD_TYPE,
            "documentation": None,
        }
    return {
        "name": name,
        "value": value,
        "read_only": source is ConfigSource.STATIC_BROKER_CONFIG,
        "config_source": int(source),
        "is_default": False,
        "is_sensitive": False,
        "synonyms": [],
        "config_type": 0,
        "documentation": None,
    }
