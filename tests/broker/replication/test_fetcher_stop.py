"""A follower fetcher that was told to stop appends nothing more: Python 3.11's ``wait_for``
can hand back a fetch response that arrived together with the cancellation, and its records
must not reach a replica that has become leader meanwhile (its idempotent-producer state was
rebuilt from the log without them, so a producer's retry of that batch would be appended a
second time)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch
from spindle.broker.replication.fetcher import FetcherManager, ReplicaFetcher
from spindle.broker.storage import LogManager, StorageSettings

TP = TopicPartition("t", 0)


def _response(records: bytes) -> SimpleNamespace:
    part = SimpleNamespace(partition_index=0, error_code=0, records=records, high_watermark=1)
    return SimpleNamespace(responses=[SimpleNamespace(topic="t", partitions=[part])])


async def test_stopped_fetcher_drops_a_response_that_arrives_after_the_stop(
    tmp_path: Path,
) -> None:
    settings = StorageSettings.model_validate({"log.dirs": [str(tmp_path / "d0")]})
    logs = LogManager.open(settings, cluster_id="c", node_id=2, background=False)
    try:
        replica = logs.get_or_create_log(TP)
        batch = build_batch([b"a"], producer_id=7, producer_epoch=0, base_sequence=0)
        manager = FetcherManager(node_id=2, endpoint=lambda _b: None, logs=logs)
        manager.assign({TP: 3})
        fetcher: ReplicaFetcher = manager.fetchers[3]
        fetcher._apply(_response(batch))  # following: appended
        assert replica.log_end_offset == 1
        manager.assign({})  # this broker leads now: the fetcher stops
        fetcher._apply(_response(batch))  # a response that slipped past the cancellation
        assert replica.log_end_offset == 1
        await manager.close()
    finally:
        logs.close()
