"""A handler's unexpected exception fails its request only, as Kafka's
``KafkaApis.handleError``: the request is answered UNKNOWN_SERVER_ERROR (-1) -- per item where
the response has no top-level error code -- the traceback is logged once, and the connection
keeps serving. The broker side is the real connection and dispatcher on a loopback socket;
the client sends kafka-python's encoded requests over a raw socket."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from spindle.broker.common.errors import ErrorCode
from spindle.broker.protocol.apis import (
    SUPPORTED_APIS,
    ApiKey,
    Request,
    api_versions_body,
    decode_request,
    encode_response,
    error_response_body,
)
from spindle.broker.server.apis import KafkaApis
from spindle.broker.server.connection import KafkaConnection
from spindle.broker.server.security.authenticator import Unauthenticated
from spindle.broker.server.security.authorizer import RequestContext

from ..wire import Wire, fetch_request, produce_request

UNKNOWN = int(ErrorCode.UNKNOWN_SERVER_ERROR)


async def _boom(_broker: Any, _ctx: RequestContext, req: Request) -> dict[str, Any]:
    raise RuntimeError(f"a bug serving {req.spec.key.name}")


async def _api_versions(_broker: Any, _ctx: RequestContext, req: Request) -> dict[str, Any]:
    return api_versions_body(req)


@pytest.fixture
async def port() -> AsyncIterator[int]:
    """A listener whose Metadata, CreateTopics and Produce handlers raise; ApiVersions works."""
    registry = {
        ApiKey.API_VERSIONS: _api_versions,
        ApiKey.METADATA: _boom,
        ApiKey.CREATE_TOPICS: _boom,
        ApiKey.PRODUCE: _boom,
    }
    apis = KafkaApis(context=None, registry=registry)  # type: ignore[arg-type]
    tasks: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: KafkaConnection(
            apis,
            max_request_bytes=1 << 20,
            listener="PLAINTEXT",
            authenticate=lambda _transport: Unauthenticated(),
            on_task=tasks.add,
        ),
        "127.0.0.1",
        0,
    )
    yield server.sockets[0].getsockname()[1]
    server.close()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await server.wait_closed()


def _session(port: int) -> tuple[Any, Any, Any, bool]:
    with Wire(port, timeout=10) as wire:
        metadata = wire.call(
            MetadataRequest[9](topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in "ab"]),
            MetadataResponse[9],
            corr=7,
        )
        created = wire.call(
            CreateTopicsRequest[5](
                topics=[
                    CreateTopicsRequest.CreatableTopic(
                        name="t", num_partitions=1, replication_factor=1, assignments=[], configs=[]
                    )
                ],
                timeout_ms=1000,
            ),
            CreateTopicsResponse[5],
            corr=8,
        )
        versions = wire.call(ApiVersionsRequest[3](), ApiVersionsResponse[3], corr=9)
        # acks=0 cannot be answered: Kafka closes the connection instead.
        wire.send(ProduceRequest[9](acks=0, timeout_ms=1000, topic_data=[]), corr=10)
        closed = wire.is_closed_by_peer()
    return metadata, created, versions, closed


async def test_an_unexpected_error_answers_unknown_server_error_and_keeps_the_connection(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="spindle.broker.server.apis.registry"):
        metadata, created, versions, closed = await asyncio.to_thread(_session, port)
    assert [(t.name, t.error_code) for t in metadata.topics] == [("a", UNKNOWN), ("b", UNKNOWN)]
    assert metadata.header.correlation_id == 7
    assert [(t.name, t.error_code) for t in created.topics] == [("t", UNKNOWN)]
    # The same connection still serves.
    assert versions.error_code == 0
    assert versions.header.correlation_id == 9
    assert closed
    logged = [r for r in caplog.records if r.name == "spindle.broker.server.apis.registry"]
    assert [r.getMessage().split(" (")[0] for r in logged] == [
        "unexpected error serving METADATA v9",
        "unexpected error serving CREATE_TOPICS v5",
    ]
    assert all(r.exc_info is not None for r in logged)  # the traceback, once per request


def _request(msg: Any) -> Request:
    msg.with_header(correlation_id=3, client_id="c")
    return decode_request(bytes(msg.encode(header=True)))


def test_a_produce_error_answer_names_each_partition_with_kafkas_invalid_offsets() -> None:
    request = _request(produce_request("t", 2, [b"v"], acks=-1))
    answer = error_response_body(request, ErrorCode.UNKNOWN_SERVER_ERROR)
    decoded = ProduceResponse.decode(encode_response(request, answer), version=9, header=True)
    assert [
        (t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
        for t in decoded.responses
    ] == [("t", [(2, UNKNOWN, -1)])]


def test_a_response_with_a_top_level_error_code_carries_it_there() -> None:
    request = _request(fetch_request("t"))
    answer = error_response_body(request, ErrorCode.UNKNOWN_SERVER_ERROR)
    assert answer == {"error_code": UNKNOWN, "throttle_time_ms": 0}


@pytest.mark.parametrize("key", sorted(SUPPORTED_APIS), ids=lambda k: ApiKey(k).name)
def test_every_served_api_and_version_has_an_error_answer_that_encodes(key: int) -> None:
    spec = SUPPORTED_APIS[key]
    for version in range(spec.min_version, spec.max_version + 1):
        request = _request(spec.request_class[version]())
        answer = error_response_body(request, ErrorCode.UNKNOWN_SERVER_ERROR)
        assert encode_response(request, answer)[:4] == (3).to_bytes(4, "big")
