"""Consumer groups with real clients against a real broker: kafka-python, aiokafka and
confluent-kafka (librdkafka) members, each in its own process. Three members share a
6-partition topic; one leaves cleanly, one is SIGKILLed (its partitions move after the session
timeout); every message is consumed; committed offsets resume exactly after a broker restart
and after a broker SIGKILL; a static member (``group.instance.id``) restarting within its session
timeout gets its partitions back without a rebalance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from .conftest import Broker, Etcd, make_broker

pytestmark = pytest.mark.slow

MEMBER = str(Path(__file__).with_name("group_member.py"))
PARTITIONS = 6
GROUP_SETTINGS = {
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
}


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory, etcd: Etcd) -> Iterator[Broker]:
    broker = make_broker(tmp_path_factory.mktemp("groups"), etcd, dirs=2, extra=GROUP_SETTINGS)
    broker.start()
    yield broker
    broker.stop()


class Member:
    """A ``group_member.py`` process and what it printed."""

    def __init__(
        self,
        client: str,
        broker: Broker,
        group: str,
        topic: str,
        instance: str = "",
        strategy: str = "",
    ):
        argv = [sys.executable, "-P", MEMBER, client, broker.bootstrap, group, topic]
        env = {**os.environ, "GROUP_ASSIGNMENT_STRATEGY": strategy}
        self.proc = subprocess.Popen(
            [*argv, instance] if instance else argv,
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
            env=env,
        )
        self.assignments: list[list[int]] = []
        self.messages: list[tuple[int, int, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            if "assigned" in event:
                self.assignments.append(event["assigned"])
            elif "msg" in event:
                p, o, v = event["msg"]
                self.messages.append((p, o, v))

    @property
    def assigned(self) -> list[int]:
        return self.assignments[-1] if self.assignments else []

    def stop(self) -> None:
        """SIGTERM: the member closes its consumer (LeaveGroup) and exits."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def wait_for(what: str, check: Callable[[], bool], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def produce(broker: Broker, topic: str, start: int, count: int) -> set[str]:
    values = {f"m{i}" for i in range(start, start + count)}
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(start, start + count):
        producer.send(topic, f"m{i}".encode(), partition=i % PARTITIONS)
    producer.flush()
    producer.close()
    return values


def committed(broker: Broker, group: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets.items()}


def covers(members: list[Member]) -> bool:
    """The members' current assignments are disjoint and cover every partition."""
    parts = [p for m in members for p in m.assigned]
    return sorted(parts) == list(range(PARTITIONS)) and all(m.assigned for m in members)


def consumed(members: list[Member]) -> set[str]:
    return {v for m in members for _, _, v in m.messages}


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "confluent"])
def test_three_members_share_partitions_survive_leave_kill_and_broker_restarts(
    group_broker: Broker, client: str
) -> None:
    topic, group = f"shared-{client}", f"group-{client}"
    admin = KafkaAdminClient(bootstrap_servers=group_broker.bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    expected = produce(group_broker, topic, 0, 600)
    members = [Member(client, group_broker, group, topic) for _ in range(3)]
    try:
        wait_for("three members to share the partitions", lambda: covers(members))
        wait_for("the first 600 messages", lambda: consumed(members) >= expected)
        # A clean leave: its partitions go to the other two at once.
        members[2].stop()
        wait_for("two members to cover everything", lambda: covers(members[:2]))
        expected |= produce(group_broker, topic, 600, 300)
        # A crash: the broker notices after the session timeout and moves its partitions.
        members[1].kill()
        wait_for("the survivor to own every partition", lambda: covers(members[:1]))
        expected |= produce(group_broker, topic, 900, 60)
        wait_for("every message", lambda: consumed(members) >= expected)
        wait_for(
            "the survivor's commits to reach the log end",
            lambda: committed(group_broker, group) == dict.fromkeys(range(PARTITIONS), 160),
        )
        members[0].stop()
    finally:
        for m in members:
            m.kill()
    assert consumed(members) == expected
    # Committed offsets survive a clean restart and a SIGKILL of the broker.
    group_broker.stop()
    group_broker.start()
    assert committed(group_broker, group) == dict.fromkeys(range(PARTITIONS), 160)
    group_broker.kill()
    group_broker.start()
    assert committed(group_broker, group) == dict.fromkeys(range(PARTITIONS), 160)
    # A new member resumes exactly there: it sees only what was produced since.
    fresh = produce(group_broker, topic, 960, 30)
    late = Member(client, group_broker, group, topic)
    try:
        wait_for("the new messages", lambda: consumed([late]) >= fresh)
        time.sleep(1.0)  # nothing older may follow
        late.stop()
    finally:
        late.kill()
    assert consumed([late]) == fresh


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(
    group_broker: Broker,
) -> None:
    topic, group = "static-topic", "static-group"
    admin = KafkaAdminClient(bootstrap_servers=group_broker.bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    produce(group_broker, topic, 0, 60)
    a = Member("confluent", group_broker, group, topic, instance="static-a")
    b = Member("confluent", group_broker, group, topic, instance="static-b")
    restarted = None
    try:
        wait_for("both static members assigned", lambda: covers([a, b]))
        before = list(a.assigned)
        b_history = len(b.assignments)
        a.kill()  # a static member's crash: no LeaveGroup; its session is 10 s
        restarted = Member("confluent", group_broker, group, topic, instance="static-a")
        wait_for("the restarted member's partitions", lambda: restarted.assigned == before)
        time.sleep(2.0)  # a rebalance would reach b within its heartbeat interval
        assert len(b.assignments) == b_history
        assert covers([restarted, b])
    finally:
        for m in (a, b, restarted):
            if m is not None:
                m.kill()


def test_incremental_cooperative_rebalancing_moves_only_what_it_must(group_broker: Broker) -> None:
    topic, group = "cooperative-topic", "cooperative-group"
    admin = KafkaAdminClient(bootstrap_servers=group_broker.bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    expected = produce(group_broker, topic, 0, 120)
    strategy = "cooperative-sticky"
    members = [Member("confluent", group_broker, group, topic, strategy=strategy) for _ in range(2)]
    try:
        wait_for("two cooperative members assigned", lambda: covers(members))
        kept = set(members[0].assigned)
        members.append(Member("confluent", group_broker, group, topic, strategy=strategy))
        wait_for("three cooperative members assigned", lambda: covers(members))
        # Cooperative: a member keeps what it keeps and is never left with nothing meanwhile.
        assert set(members[0].assigned) <= kept
        history = members[0].assignments
        assert all(history[history.index(sorted(kept)) :])
        members[2].stop()
        wait_for("two members again", lambda: covers(members[:2]))
        expected |= produce(group_broker, topic, 120, 60)
        wait_for("every message", lambda: consumed(members) >= expected)
    finally:
        for m in members:
            m.kill()
    assert consumed(members) == expected


def test_committed_offsets_are_readable_by_kafkas_admin_api(group_broker: Broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=group_broker.bootstrap)
    try:
        groups = {g["group_id"]: g for g in admin.list_groups()}
        assert groups["group-kafka-python"]["protocol_type"] == "consumer"
        desc = admin.describe_groups(["group-kafka-python"])["group-kafka-python"]
        assert desc["group_state"] == "Empty"
    finally:
        admin.close()
    offsets = committed(group_broker, "group-kafka-python")
    assert offsets == dict.fromkeys(range(PARTITIONS), 165)  # 990 messages over 6
    assert committed(group_broker, "never-used") == {}
