"""Every advertised version of the JBOD and reassignment APIs answered by a live broker."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from spindle.broker.common.errors import ErrorCode

from .conftest import Broker
from .wire import Wire, create_topic


@pytest.fixture(scope="module")
def topic(module_broker: Broker) -> str:
    with Wire(module_broker.port) as wire:
        create_topic(wire, "matrix", partitions=2)
    return "matrix"


@pytest.mark.parametrize("version", range(5))
def test_describe_log_dirs_every_version(module_broker: Broker, topic: str, version: int) -> None:
    req = DescribeLogDirsRequest[version](
        topics=[DescribeLogDirsRequest.DescribableLogDirTopic(topic=topic, partitions=[0, 1])]
    )
    with Wire(module_broker.port) as wire:
        resp = wire.call(req, DescribeLogDirsResponse)
    assert sorted(r.log_dir for r in resp.results) == sorted(module_broker.log_dirs)
    found = sorted(p.partition_index for r in resp.results for t in r.topics for p in t.partitions)
    assert found == [0, 1]
    if version >= 4:
        assert all(r.total_bytes > 0 and r.usable_bytes > 0 for r in resp.results)


@pytest.mark.parametrize("version", range(3))
def test_alter_replica_log_dirs_every_version(
    module_broker: Broker, topic: str, version: int
) -> None:
    req = AlterReplicaLogDirsRequest[version](
        dirs=[
            AlterReplicaLogDirsRequest.AlterReplicaLogDir(
                path="/nowhere",
                topics=[
                    AlterReplicaLogDirsRequest.AlterReplicaLogDir.AlterReplicaLogDirTopic(
                        name=topic, partitions=[0]
                    )
                ],
            )
        ]
    )
    with Wire(module_broker.port) as wire:
        resp = wire.call(req, AlterReplicaLogDirsResponse)
    assert resp.results[0].topic_name == topic
    assert resp.results[0].partitions[0].error_code == ErrorCode.LOG_DIR_NOT_FOUND


def test_single_broker_reassignments(module_broker: Broker, topic: str) -> None:
    P = AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition
    req = AlterPartitionReassignmentsRequest[0](
        timeout_ms=5000,
        topics=[
            AlterPartitionReassignmentsRequest.ReassignableTopic(
                name=topic,
                partitions=[
                    P(partition_index=0, replicas=[module_broker.node_id]),
                    P(partition_index=1, replicas=None),
                ],
            ),
            AlterPartitionReassignmentsRequest.ReassignableTopic(
                name=topic, partitions=[P(partition_index=0, replicas=[module_broker.node_id, 42])]
            ),
        ],
    )
    with Wire(module_broker.port) as wire:
        resp = wire.call(req, AlterPartitionReassignmentsResponse)
        codes = [[p.error_code for p in t.partitions] for t in resp.responses]
        assert codes == [
            [0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS],
            [ErrorCode.INVALID_REPLICA_ASSIGNMENT],
        ]
        listed = wire.call(
            ListPartitionReassignmentsRequest[0](timeout_ms=5000, topics=None),
            ListPartitionReassignmentsResponse,
        )
        assert listed.error_code == 0
        assert listed.topics == []
