"""acks=all for a retried idempotent batch: a producer retries a batch whose first attempt the
leader appended but the ISR has not replicated yet (the answer was lost). The retry is a
duplicate -- not appended again -- yet it must not be acknowledged before the original is
committed, as Kafka's DelayedProduce waits on the duplicate's offsets: acked early, the batch
would be lost if the leader failed now. Two real brokers; the follower is held with SIGSTOP so
the high watermark cannot pass the batch."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.producer import ProduceResponse
from spindle.broker.common.errors import ErrorCode
from spindle.broker.records.batch import build_batch

from ..conftest import Etcd, make_broker
from ..wire import Wire, init_producer_id, produce_batch_request


def test_a_retried_duplicate_is_acked_only_once_committed(tmp_path: Path, etcd: Etcd) -> None:
    extra = {
        "spindle.etcd.prefix": f"/test/{uuid.uuid4().hex}",
        "spindle.controller.mode": "elected",
        "spindle.controller.lease.ms": "2000",
        "broker.session.timeout.ms": "20000",
        "broker.heartbeat.interval.ms": "500",
    }
    brokers = [make_broker(tmp_path / f"b{n}", etcd, node_id=n, extra=extra) for n in (1, 2)]
    for b in brokers:
        b.start()
    leader, follower = brokers
    try:
        deadline = time.monotonic() + 30
        while True:
            admin = KafkaAdminClient(bootstrap_servers=leader.bootstrap)
            try:
                admin.create_topics(
                    [
                        NewTopic(
                            "dup",
                            num_partitions=-1,
                            replication_factor=-1,
                            replica_assignments={0: [1, 2]},
                        )
                    ]
                )
                break
            except Exception:
                assert time.monotonic() < deadline, "the cluster never accepted the topic"
                time.sleep(0.2)
            finally:
                admin.close()
        with Wire(leader.port) as wire:
            init = init_producer_id(wire)
        batch = build_batch(
            [b"once"],
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            base_sequence=0,
        )

        def produce(acks: int) -> tuple[int, int]:
            with Wire(leader.port, timeout=30) as wire:
                req = produce_batch_request("dup", 0, batch, acks=acks)
                req.timeout_ms = 1500
                part = wire.call(req, ProduceResponse).responses[0].partition_responses[0]
            return int(part.error_code), int(part.base_offset)

        assert produce(-1) == (0, 0)  # both replicas in sync: committed
        assert follower.proc is not None
        follower.proc.send_signal(signal.SIGSTOP)
        try:
            batch = build_batch(
                [b"twice?"],
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                base_sequence=1,
            )
            assert produce(1) == (0, 1)  # appended on the leader only
            # The retry with acks=all is the same batch: not written again, not acked yet.
            code, _ = produce(-1)
            assert code == ErrorCode.REQUEST_TIMED_OUT
        finally:
            follower.proc.send_signal(signal.SIGCONT)
        # The follower catches up: now the retry is acknowledged with the original offset.
        deadline = time.monotonic() + 20
        while (result := produce(-1))[0] != 0:
            assert time.monotonic() < deadline, result
            time.sleep(0.2)
        assert result == (0, 1)
    finally:
        for b in brokers:
            b.stop()
