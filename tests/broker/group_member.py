"""One consumer-group member in its own process, for tests that SIGKILL members.

``python group_member.py CLIENT BOOTSTRAP GROUP TOPIC [INSTANCE_ID]`` with CLIENT one of
``kafka-python``, ``aiokafka``, ``confluent``. It subscribes, and prints JSON lines:
``{"assigned": [partition, ...]}`` whenever its assignment changes and
``{"msg": [partition, offset, value]}`` for every record (confluent members use
``$GROUP_ASSIGNMENT_STRATEGY`` when set, e.g. ``cooperative-sticky``), committing synchronously after each
poll that returned records (so a committed offset always follows a printed record). SIGTERM
closes the consumer (a clean LeaveGroup) and exits; SIGKILL is the crash.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

SESSION_MS = 6000
"""Short sessions so a killed member is noticed quickly, long enough for a loaded machine."""
MAX_POLL_MS = 10_000
"""Also the rebalance timeout: how long a rebalance waits for members to rejoin."""

stopping = False


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def on_term(*_: object) -> None:
    global stopping
    stopping = True


def commit(do: Any) -> None:
    """Commit; a member removed from the group meanwhile (a rebalance it was late for) gets
    CommitFailed/ILLEGAL_GENERATION/UNKNOWN_MEMBER_ID, as consumer applications do: the records
    will be delivered again to whoever owns the partition now (at least once), so go on."""
    try:
        do()
    except Exception as exc:
        emit({"commit_failed": repr(exc)})


def run_kafka_python(bootstrap: str, group: str, topic: str, instance: str | None) -> None:
    from kafka import KafkaConsumer

    extra = {"group_instance_id": instance} if instance else {}
    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
        max_poll_interval_ms=MAX_POLL_MS,
        **extra,
    )
    last: list[int] | None = None
    while not stopping:
        batches = c.poll(timeout_ms=200)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            emit({"assigned": now})
            last = now
        for records in batches.values():
            for r in records:
                emit({"msg": [r.partition, r.offset, r.value.decode()]})
        if batches:
            commit(c.commit)
    c.close()


async def run_aiokafka(bootstrap: str, group: str, topic: str, instance: str | None) -> None:
    from aiokafka import AIOKafkaConsumer

    extra = {"group_instance_id": instance} if instance else {}
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
        max_poll_interval_ms=MAX_POLL_MS,
        **extra,
    )
    await c.start()
    last: list[int] | None = None
    try:
        while not stopping:
            batches = await c.getmany(timeout_ms=200)
            now = sorted(tp.partition for tp in c.assignment())
            if now != last:
                emit({"assigned": now})
                last = now
            for records in batches.values():
                for r in records:
                    emit({"msg": [r.partition, r.offset, r.value.decode()]})
            if batches:
                try:
                    await c.commit()
                except Exception as exc:  # see commit()
                    emit({"commit_failed": repr(exc)})
    finally:
        await c.stop()


def run_confluent(bootstrap: str, group: str, topic: str, instance: str | None) -> None:
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": SESSION_MS if instance is None else 10_000,
        "heartbeat.interval.ms": 500,
        "max.poll.interval.ms": MAX_POLL_MS,
    }
    if instance:
        conf["group.instance.id"] = instance
    if os.environ.get("GROUP_ASSIGNMENT_STRATEGY"):
        conf["partition.assignment.strategy"] = os.environ["GROUP_ASSIGNMENT_STRATEGY"]
    c = Consumer(conf)
    c.subscribe([topic])
    last: list[int] | None = None
    while not stopping:
        msgs = c.consume(num_messages=500, timeout=0.2)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            emit({"assigned": now})
            last = now
        good = [m for m in msgs if m.error() is None]
        for m in good:
            emit({"msg": [m.partition(), m.offset(), m.value().decode()]})
        if good:
            commit(lambda: c.commit(asynchronous=False))
    c.close()


def main() -> None:
    client, bootstrap, group, topic = sys.argv[1:5]
    instance = sys.argv[5] if len(sys.argv) > 5 else None
    signal.signal(signal.SIGTERM, on_term)
    if client == "kafka-python":
        run_kafka_python(bootstrap, group, topic, instance)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(bootstrap, group, topic, instance))
    elif client == "confluent":
        run_confluent(bootstrap, group, topic, instance)
    else:
        raise SystemExit(f"unknown client {client}")


if __name__ == "__main__":
    main()
