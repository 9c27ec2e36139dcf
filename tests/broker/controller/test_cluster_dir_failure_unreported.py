"""KIP-858's last resort: a broker whose log directory fails while etcd (the controller's
store) is unreachable cannot have the controller move leadership off that directory's
partitions, so after ``log.dir.failure.timeout.ms`` it shuts itself down (exit code 1), which
the controller then sees as a lost session."""

from __future__ import annotations

import os
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest
from controlplane.volumes import remount_read_only
from kafka.protocol.producer import ProduceResponse
from spindle.broker.common.errors import ErrorCode

from ..conftest import Etcd, make_broker
from ..wire import Wire, create_topic, produce_request
from .conftest import OwnEtcd
from .test_cluster_dir_failure import _tmpfs

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="mounts tmpfs and remounts it read-only: needs root (CI runs as root)",
    ),
]


def test_unreported_dir_failure_shuts_the_broker_down(tmp_path: Path, own_etcd: OwnEtcd) -> None:
    assert own_etcd.proc is not None
    etcd = Etcd(own_etcd.url, own_etcd.proc)
    with ExitStack() as stack:
        dir_a = stack.enter_context(_tmpfs(tmp_path / "a"))
        dir_b = stack.enter_context(_tmpfs(tmp_path / "b"))
        broker = make_broker(
            tmp_path / "broker",
            etcd,
            log_dirs=[dir_a, dir_b],
            extra={
                "spindle.etcd.prefix": f"/test/{uuid.uuid4().hex}",
                "spindle.controller.mode": "elected",
                "spindle.controller.lease.ms": "2000",
                "broker.session.timeout.ms": "3000",
                "broker.heartbeat.interval.ms": "500",
                "log.dir.failure.timeout.ms": "2000",
            },
        )
        stack.callback(broker.kill)
        broker.start()
        deadline = time.monotonic() + 30
        with Wire(broker.port) as wire:
            while True:  # the broker accepts topics once it has unfenced itself
                try:
                    create_topic(wire, "led", partitions=2)
                    break
                except AssertionError:
                    assert time.monotonic() < deadline, "the topic was never created"
                    time.sleep(0.2)
        in_b = [p for p in (0, 1) if (Path(dir_b) / f"led-{p}").is_dir()]
        assert len(in_b) == 1
        own_etcd.kill()  # the controller cannot be told anything from now on
        remount_read_only(dir_b)
        with Wire(broker.port) as wire:
            part = (
                wire.call(produce_request("led", in_b[0], [b"x"]), ProduceResponse)
                .responses[0]
                .partition_responses[0]
            )
        assert part.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert broker.proc is not None
        code = broker.proc.wait(timeout=60)
        assert code == 1
        assert "within log.dir.failure.timeout.ms (2000)" in broker.log_text()
