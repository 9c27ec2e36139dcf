"""The metadata store on a real etcd: conditional updates, reload, and the controller's rules."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from spindle.broker.common.errors import ErrorCode, KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.controller.controller import (
    TOPIC_CONFIGS,
    ConfigChange,
    SingleBrokerController,
    apply_config_changes,
)
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.model import UNASSIGNED_DIR, BrokerRegistration
from spindle.broker.controller.store import MetadataConflict, MetadataStore

from ..conftest import Etcd


async def _controller(etcd: Etcd, prefix: str) -> tuple[EtcdClient, SingleBrokerController]:
    client = EtcdClient([etcd.url])
    store = MetadataStore(client, prefix=prefix)
    await store.load()
    await store.ensure_cluster_id(None)
    ctl = SingleBrokerController(store, node_id=1)
    await ctl.register(BrokerRegistration(1, "127.0.0.1", 9092, None, ["dirA"]))
    return client, ctl


async def test_topics_survive_a_reload_with_the_same_id(etcd: Etcd) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    client, ctl = await _controller(etcd, prefix)
    topic = await ctl.create_topic("orders", 3, 1, None, {"retention.ms": "1000"})
    await ctl.assign_replica_dir(TopicPartition("orders", 1), 1, "dirA")
    other = MetadataStore(client, prefix=prefix)
    await other.load()
    loaded = other.topics["orders"]
    assert loaded.topic_id == topic.topic_id
    assert loaded.configs == {"retention.ms": "1000"}
    assert [p.directories for p in loaded.partitions.values()] == [
        [UNASSIGNED_DIR],
        ["dirA"],
        [UNASSIGNED_DIR],
    ]
    assert other.cluster_id == ctl.store.cluster_id
    await client.close()


async def test_brokers_starting_together_agree_on_one_cluster_id(etcd: Etcd) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    client = EtcdClient([etcd.url])
    stores = [MetadataStore(client, prefix=prefix) for _ in range(4)]
    for store in stores:
        await store.load()  # every one finds no id yet
    ids = await asyncio.gather(*(store.ensure_cluster_id(None) for store in stores))
    assert len(set(ids)) == 1
    assert all(store.cluster_id == ids[0] for store in stores)
    late = MetadataStore(client, prefix=prefix)
    await late.load()
    with pytest.raises(KafkaError, match="does not match"):
        await late.ensure_cluster_id("AAAAAAAAAAAAAAAAAAAAAA")
    await client.close()


async def test_a_stale_writer_is_refused_and_reloads(etcd: Etcd) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    client, ctl = await _controller(etcd, prefix)
    await ctl.create_topic("shared", 1, 1, None, {})
    stale = MetadataStore(client, prefix=prefix)
    await stale.load()
    await ctl.create_partitions("shared", 2, None)
    stale_ctl = SingleBrokerController(stale, node_id=1)
    with pytest.raises(MetadataConflict) as info:
        await stale_ctl.create_partitions("shared", 3, None)
    assert info.value.code == ErrorCode.NOT_CONTROLLER
    # After the refusal the stale store has reloaded and sees the newer state.
    assert len(stale.topics["shared"].partitions) == 2
    await client.close()


async def test_controller_applies_kafka_validation_rules(etcd: Etcd) -> None:
    client, ctl = await _controller(etcd, f"/t/{uuid.uuid4().hex}")
    cases = [
        (ctl.create_topic("bad name!", 1, 1, None, {}), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (ctl.create_topic("rf", 1, 2, None, {}), ErrorCode.INVALID_REPLICATION_FACTOR),
        (ctl.create_topic("parts", 0, 1, None, {}), ErrorCode.INVALID_PARTITIONS),
        (ctl.create_topic("cfg", 1, 1, None, {"no.such": "1"}), ErrorCode.INVALID_CONFIG),
        (ctl.create_topic("assign", 1, 1, [[1, 1]], {}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (
            ctl.alter_reassignment(TopicPartition("nope", 0), [1]),
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ),
    ]
    for coro, code in cases:
        with pytest.raises(KafkaError) as info:
            await coro
        assert info.value.code == code
    await ctl.create_topic("ok", 1, 1, None, {})
    with pytest.raises(KafkaError) as info:
        await ctl.alter_reassignment(TopicPartition("ok", 0), [1, 7])
    assert info.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    with pytest.raises(KafkaError) as info:
        await ctl.alter_reassignment(TopicPartition("ok", 0), None)
    assert info.value.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    await ctl.alter_reassignment(TopicPartition("ok", 0), [1])
    first = await ctl.allocate_producer_ids(1000)
    assert await ctl.allocate_producer_ids(1000) == first + 1000
    await client.close()


def test_config_changes_set_delete_append_subtract() -> None:
    key = "leader.replication.throttled.replicas"
    cfg = apply_config_changes({}, [ConfigChange(key, 0, "0:1")], allowed=TOPIC_CONFIGS)
    cfg = apply_config_changes(cfg, [ConfigChange(key, 2, "1:1,0:1")], allowed=TOPIC_CONFIGS)
    assert cfg == {key: "0:1,1:1"}
    cfg = apply_config_changes(cfg, [ConfigChange(key, 3, "0:1")], allowed=TOPIC_CONFIGS)
    assert cfg == {key: "1:1"}
    assert apply_config_changes(cfg, [ConfigChange(key, 1, None)], allowed=TOPIC_CONFIGS) == {}
    with pytest.raises(KafkaError, match="cannot be altered"):
        apply_config_changes({}, [ConfigChange("log.dirs", 0, "/x")], allowed=TOPIC_CONFIGS)


def test_a_registration_keeps_each_directorys_path_and_reads_a_newer_brokers_record() -> None:
    """``directory_paths`` (id -> path) survives the JSON round trip; a record with a field this
    version does not know (a newer broker's, mid rolling upgrade) still reads."""
    reg = BrokerRegistration(1, "h", 9092, "r", ["dirA"], {"dirA": "/var/lib/spindle/data-0"})
    assert BrokerRegistration.from_json(reg.to_json()) == reg
    newer = reg.to_json().replace(b'{"directories"', b'{"a_later_field": 1, "directories"')
    assert b"a_later_field" in newer
    assert BrokerRegistration.from_json(newer) == reg
    older = b'{"directories": ["dirA"], "host": "h", "node_id": 1, "port": 9092, "rack": null}'
    assert BrokerRegistration.from_json(older).directory_paths == {}
