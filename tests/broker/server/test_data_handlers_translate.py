"""The Produce and Fetch handlers only translate: the topics a client may use go to the
replica manager as entries, the others are answered TOPIC_AUTHORIZATION_FAILED in request
order, and a refused topic ends a fetch's long poll at once (an error answers at once). The
topic handlers answer REQUEST_TIMED_OUT for a write the metadata watch has not applied in
time. The replica manager is a stand-in that records what it was asked."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from spindle.broker.common.clock import SystemClock
from spindle.broker.common.errors import ErrorCode
from spindle.broker.protocol.produce_request import (
    PartitionProduceData,
    ProduceRequestBody,
    TopicProduceData,
)
from spindle.broker.replication.requests import AppendEntry, FetchParams
from spindle.broker.server.apis import produce_fetch
from spindle.broker.server.apis.base import answer_when_applied
from spindle.broker.server.throttles import ClientQuotaManager


class Replicas:
    """Answers every produce entry with base offset 10 + partition; fetches read nothing."""

    def __init__(self) -> None:
        self.fetches: list[FetchParams] = []
        self.appends: list[tuple[list[AppendEntry], int, float]] = []
        self.applied_revision = 5

    async def append_records(self, entries: list[AppendEntry], acks: int, timeout_s: float) -> None:
        self.appends.append((list(entries), acks, timeout_s))
        for e in entries:
            e.base_offset, e.log_start_offset = 10 + e.tp.partition, 0

    async def fetch_records(self, params: FetchParams) -> None:
        self.fetches.append(params)


def _broker(replicas: Replicas, allowed: set[str]) -> Any:
    return SimpleNamespace(
        replicas=replicas,
        allowed=lambda _ctx, _op, _rt, name: name in allowed,
        allowed_on_cluster=lambda _ctx, _op: False,
        client_quotas=ClientQuotaManager(SystemClock()),  # no quotas set: never throttles
    )


async def test_produce_sends_the_allowed_topics_and_refuses_the_others_in_request_order() -> None:
    replicas = Replicas()
    body = ProduceRequestBody(
        None,
        -1,
        1500,
        [
            TopicProduceData("secret", [PartitionProduceData(0, memoryview(b"x"))]),
            TopicProduceData("t", [PartitionProduceData(1, memoryview(b"y"))]),
        ],
    )
    out = await produce_fetch.produce(_broker(replicas, {"t"}), None, SimpleNamespace(body=body))
    assert out is not None
    [(entries, acks, timeout)] = replicas.appends
    assert ([(e.tp.topic, e.tp.partition) for e in entries], acks, timeout) == ([("t", 1)], -1, 1.5)
    refused, written = (t["partition_responses"][0] for t in out["responses"])
    assert [t["name"] for t in out["responses"]] == ["secret", "t"]
    assert (refused["error_code"], refused["base_offset"]) == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        -1,
    )
    assert refused["error_message"] == "not allowed to write secret-0"
    assert (written["error_code"], written["base_offset"]) == (0, 11)


async def test_a_refused_topic_ends_the_fetch_long_poll_at_once() -> None:
    replicas = Replicas()

    def part(p: int) -> SimpleNamespace:
        return SimpleNamespace(partition=p, fetch_offset=3, partition_max_bytes=100)

    body = SimpleNamespace(
        max_wait_ms=30_000,
        min_bytes=1,
        max_bytes=0,  # no limit: Kafka's default fetch.max.bytes
        replica_id=-1,
        topics=[
            SimpleNamespace(topic="t", partitions=[part(0), part(1)]),
            SimpleNamespace(topic="secret", partitions=[part(0)]),
        ],
    )
    broker = _broker(replicas, {"t"})
    out = await produce_fetch.fetch(broker, None, SimpleNamespace(body=body))
    [params] = replicas.fetches
    assert params.max_wait_ms == 0
    assert params.max_bytes == produce_fetch.DEFAULT_FETCH_MAX_BYTES
    assert [(fp.tp.topic, fp.tp.partition, fp.fetch_offset) for fp in params.partitions] == [
        ("t", 0, 3),
        ("t", 1, 3),
    ]
    codes = [[p["error_code"] for p in t["partitions"]] for t in out["responses"]]
    assert codes == [[0, 0], [ErrorCode.TOPIC_AUTHORIZATION_FAILED]]
    # Without the refused topic the fetch may wait as asked.
    body.topics.pop()
    await produce_fetch.fetch(broker, None, SimpleNamespace(body=body))
    assert replicas.fetches[-1].max_wait_ms == 30_000


async def test_a_write_the_watch_has_not_applied_in_time_is_answered_request_timed_out() -> None:
    replicas = Replicas()  # applied up to revision 5

    async def wait_applied(revision: int, timeout_s: float) -> bool:
        return revision <= replicas.applied_revision

    broker = SimpleNamespace(replicas=replicas, wait_applied=wait_applied)
    applied: dict[str, Any] = {"error_code": 0, "error_message": None}
    late: dict[str, Any] = {"error_code": 0, "error_message": None}
    await answer_when_applied(broker, [(applied, 4), (late, 7)], 0.1)
    assert applied == {"error_code": 0, "error_message": None}
    assert late["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    assert "revision 7" in late["error_message"]
