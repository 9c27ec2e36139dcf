"""InitProducerId for idempotent producers (transactions are not served yet).

Producer ids come from the controller in blocks of ``PRODUCER_ID_BLOCK`` (Kafka's
``ProducerIdManager``), so most requests are answered without a metadata write.
"""

from __future__ import annotations

from typing import Any

from spindle.broker.common.errors import ErrorCode
from spindle.broker.protocol.apis import ApiKey, Request

from ..security.authorizer import Operation, RequestContext, ResourceType
from .base import ApiContext, Handlers, errors_into

PRODUCER_ID_BLOCK = 1000
"""Producer ids this broker takes from the controller at a time."""
MAX_PRODUCER_EPOCH = 32767
"""A producer epoch is an int16; past it the producer gets a new id (KIP-360)."""


async def _next_producer_id(broker: ApiContext) -> int:
    block = broker.producer_ids
    if block.next_id >= block.end:
        block.next_id = await broker.controller.allocate_producer_ids(PRODUCER_ID_BLOCK)
        block.end = block.next_id + PRODUCER_ID_BLOCK
    block.next_id += 1
    return block.next_id - 1


async def init_producer_id(broker: ApiContext, ctx: RequestContext, req: Request) -> dict[str, Any]:
    body = req.body
    res = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    if body.transactional_id is not None:
        res["error_code"] = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return res
    if not (
        broker.allowed_on_cluster(ctx, Operation.IDEMPOTENT_WRITE)
        or broker.authorizer.authorize_any(ctx, Operation.WRITE, ResourceType.TOPIC)
    ):
        # Kafka's rule (KIP-679): IdempotentWrite on the cluster, or Write on some topic
        res["error_code"] = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return res
    if req.version >= 3 and body.producer_id is not None and body.producer_id >= 0:
        # KIP-360: an idempotent producer bumps its own epoch after an error.
        epoch = body.producer_epoch + 1
        if epoch > MAX_PRODUCER_EPOCH:
            res["producer_id"] = await _next_producer_id(broker)
            res["producer_epoch"] = 0
        else:
            res["producer_id"], res["producer_epoch"] = body.producer_id, epoch
        return res
    with errors_into(res, message=False):
        res["producer_id"] = await _next_producer_id(broker)
        res["producer_epoch"] = 0
    return res


HANDLERS: Handlers = {ApiKey.INIT_PRODUCER_ID: init_producer_id}
