"""A log directory fails for real (tmpfs remounted read-only) under a live producer: the other
directory keeps accepting produce and fetch, partitions in the failed directory answer
KAFKA_STORAGE_ERROR, and DescribeLogDirs reports the directory offline."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from controlplane.volumes import remount_read_only
from kafka import KafkaConsumer, TopicPartition
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceResponse
from spindle.broker.common.errors import ErrorCode
from spindle.broker.common.kafka_uuid import LOST_DIR, UNASSIGNED_DIR

from .conftest import Etcd, free_port, make_broker
from .wire import TaggedProducer, Wire, create_topic, fetch_request, produce_request

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="mounts tmpfs and remounts it read-only: needs root (CI runs as root)",
    ),
]


@contextmanager
def _tmpfs(path: Path) -> Iterator[str]:
    path.mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256m,mode=0755", "tmpfs", str(path)], check=True
    )
    try:
        yield str(path)
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=False)


def _dirs_of(wire: Wire) -> dict[str, tuple[int, set[str]]]:
    resp = wire.call(DescribeLogDirsRequest[4](topics=None), DescribeLogDirsResponse)
    return {r.log_dir: (r.error_code, {t.name for t in r.topics}) for r in resp.results}


def _fetch(wire: Wire, topic: str) -> int:
    req = fetch_request(topic)
    return int(wire.call(req, FetchResponse).responses[0].partitions[0].error_code)


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
        return str(resp.read().decode())


def test_failed_dir_answers_storage_error_while_the_other_keeps_serving(
    tmp_path: Path, etcd: Etcd
) -> None:
    with _tmpfs(tmp_path / "a") as dir_a, _tmpfs(tmp_path / "b") as dir_b:
        metrics_port = free_port()
        broker = make_broker(
            tmp_path / "broker",
            etcd,
            log_dirs=[dir_a, dir_b],
            extra={"spindle.metrics.listener": f"127.0.0.1:{metrics_port}"},
        )
        broker.start()
        assert 'offlinelogdirectorycount{broker="1"} 0' in _get(metrics_port, "/metrics")
        try:
            with Wire(broker.port) as admin:
                create_topic(admin, "healthy")
                create_topic(admin, "victim")
                placed = {t: d for d, (_, topics) in _dirs_of(admin).items() for t in topics}
                assert placed["healthy"] != placed["victim"], placed
                failed_dir, good_dir = placed["victim"], placed["healthy"]
                assert (
                    admin.call(produce_request("victim", 0, [b"before"]), ProduceResponse)
                    .responses[0]
                    .partition_responses[0]
                    .error_code
                    == 0
                )

                producer = TaggedProducer(broker.port, "healthy", min_acked=300)
                producer.start()
                producer.wait_acked(100)
                remount_read_only(failed_dir)
                try:
                    codes = [
                        admin.call(
                            produce_request("victim", 0, [b"after"]), ProduceResponse, corr=1000 + i
                        )
                        .responses[0]
                        .partition_responses[0]
                        .error_code
                        for i in range(3)
                    ]
                    assert codes[-1] == ErrorCode.KAFKA_STORAGE_ERROR, codes
                    assert _fetch(admin, "victim") == ErrorCode.KAFKA_STORAGE_ERROR
                    dirs = _dirs_of(admin)
                    assert dirs[failed_dir] == (ErrorCode.KAFKA_STORAGE_ERROR, set())
                    assert dirs[good_dir][0] == 0
                    assert _fetch(admin, "healthy") == 0
                    metrics = _get(metrics_port, "/metrics")
                    assert 'offlinelogdirectorycount{broker="1"} 1' in metrics
                    assert f'logdirectoryoffline{{logDirectory="{failed_dir}"}} 1' in metrics
                    assert f'logdirectoryoffline{{logDirectory="{good_dir}"}} 0' in metrics
                    assert "1 of 2 log dirs online" in _get(metrics_port, "/health")
                    meta = admin.call(
                        MetadataRequest[12](topics=None, allow_auto_topic_creation=False),
                        MetadataResponse,
                    )
                    offline = {t.name: t.partitions[0].offline_replicas for t in meta.topics}
                    assert offline == {"healthy": [], "victim": [broker.node_id]}
                finally:
                    producer.stop()
                assert not producer.errors, producer.errors
                consumer = KafkaConsumer(
                    bootstrap_servers=broker.bootstrap,
                    enable_auto_commit=False,
                    consumer_timeout_ms=10_000,
                )
                tp = TopicPartition("healthy", 0)
                consumer.assign([tp])
                consumer.seek(tp, 0)
                got = []
                for msg in consumer:
                    got.append(int(msg.value))
                    if len(got) >= len(producer.acked):
                        break
                consumer.close()
                assert got == producer.acked
            assert "offline" in broker.log_text().lower()
            # The controller's metadata learns that the victim's replica directory is lost.
            deadline = time.monotonic() + 30
            while broker.metadata_dirs("victim") != [LOST_DIR]:
                assert time.monotonic() < deadline, broker.metadata_dirs("victim")
                time.sleep(0.2)
            assert broker.metadata_dirs("healthy") not in ([LOST_DIR], [UNASSIGNED_DIR])
        finally:
            broker.stop()
            subprocess.run(["mount", "-o", "remount,rw", dir_b], check=False)
            subprocess.run(["mount", "-o", "remount,rw", dir_a], check=False)


def test_broker_exits_when_its_last_log_dir_fails(tmp_path: Path, etcd: Etcd) -> None:
    with _tmpfs(tmp_path / "only") as only:
        broker = make_broker(tmp_path / "broker", etcd, log_dirs=[only])
        broker.start()
        try:
            with Wire(broker.port) as wire:
                create_topic(wire, "last")
                remount_read_only(only)
                code = (
                    wire.call(produce_request("last", 0, [b"x"]), ProduceResponse)
                    .responses[0]
                    .partition_responses[0]
                    .error_code
                )
                assert code == ErrorCode.KAFKA_STORAGE_ERROR
            assert broker.proc is not None
            assert broker.proc.wait(60) == 1
            assert "all log directories are offline" in broker.log_text()
        finally:
            broker.kill()
            subprocess.run(["mount", "-o", "remount,rw", only], check=False)
