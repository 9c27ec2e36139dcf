"""The failover phases of bench/cluster_compare.py, with where the time went (not a benchmark
by itself).

Both phases run the same paced ``acks=all`` stream (one 1 KiB message per 5 ms, librdkafka,
``linger.ms=0``) into a 1-partition RF 3 topic led by a broker that is not Spindle's
controller, inflict the fault a second into the stream, and time it from the fault to the ack
of the first message produced after it:

- ``failover_s``: the leader is SIGKILLed. Both systems notice only when its session times out
  (``broker.session.timeout.ms``, same value on both); then leadership moves and the client
  finds the new leader.
- ``dir_failover_s``: the leader's directory holding the partition fails for real (its ext4 is
  shut down, ``EXT4_IOC_SHUTDOWN``: every later I/O there is EIO); the next append fails, the
  broker takes the directory offline, tells the controller, which moves leadership (KIP-112;
  the broker keeps serving from its other directory).

The breakdown (seconds after the fault) comes from what each system records on its own:

- Spindle: the bench follows the metadata in etcd with a watch of its own and notes when the
  victim's session key was deleted (``session_gone_s``) or rewritten with an offline directory
  (``dir_reported_s``), and when the topic's key named another leader (``leader_elected_s``).
- Kafka: the KRaft controller's log line ``Fencing broker N because its session has timed out``
  (``session_gone_s``), the victim's ``Stopping serving replicas in dir`` (``dir_reported_s``,
  the broker's own reaction: its heartbeat to the controller follows at once), and the new
  leader's ``Transitioning 1 partition(s) to local leaders`` (``leader_elected_s``: later than
  the controller's decision by one metadata fetch).

``resumed_s`` minus ``leader_elected_s`` is the rest: brokers applying the change, the new
leader's first commit, and the client refreshing its metadata and retrying. After each phase
the victim (and, after a directory failure, its file system) is restored and the next round
waits until it is back in every ISR.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from cluster_nodes import BROKERS, System, create_topic, wait_isr

MSG_SIZE = 1024
KAFKA_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] \w+ (.*)$")


class EtcdTimeline:
    """Every change under Spindle's metadata prefix, stamped with the wall time the bench's own
    etcd watch delivered it (a thread with its own event loop, started before the fault)."""

    def __init__(self, url: str, prefix: str) -> None:
        self.url, self.prefix = url, prefix
        self.events: list[tuple[float, bool, str, dict[str, Any]]] = []
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> EtcdTimeline:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("etcd timeline watch did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        from spindle.broker.controller.etcd import EtcdClient
        from spindle.broker.controller.watch import PrefixWatcher

        client = EtcdClient([self.url])
        base = self.prefix.rstrip("/") + "/"
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        try:
            _kvs, revision = await client.get_prefix(base.encode())
            watcher = PrefixWatcher(client, base.encode(), start_revision=revision + 1)
            self._ready.set()
            async for batch in watcher:
                now = time.time()
                for e in batch.events:
                    value = {} if e.deleted or not e.kv.value else json.loads(e.kv.value)
                    self.events.append((now, e.deleted, e.kv.key.decode()[len(base) :], value))
        except asyncio.CancelledError:
            pass
        finally:
            await client.close()

    def first(self, match: Callable[[bool, str, dict[str, Any]], bool], after: float) -> float:
        """Wall time of the first event after ``after`` that ``match``es (0.0 if none)."""
        return next((t for t, d, k, v in self.events if t >= after and match(d, k, v)), 0.0)


def kafka_log_time(path: Path, pattern: str, after: float) -> float:
    """Wall time of the first line of a Kafka log matching ``pattern`` at or after ``after``
    (log4j's ``[%d]`` is local time with milliseconds); 0.0 if none."""
    for line in path.read_text(errors="replace").splitlines():
        m = KAFKA_LINE.match(line)
        if m and re.search(pattern, m.group(2)):
            t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if t >= after - 0.001:
                return t
    return 0.0


def stream_through(system: System, topic: str, fault: Callable[[], None]) -> tuple[float, float]:
    """Produce the paced stream, call ``fault`` a second in; (fault time, first ack of a message
    sent after it), wall clock."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": system.bootstrap(),
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": 120_000,
            "enable.idempotence": False,
            "log_level": 0,  # not one line per refused reconnect to the killed leader
        }
    )
    acks: list[tuple[float, float]] = []  # (sent, acked)

    def sender(sent: float) -> Callable[[Any, Any], None]:
        def done(err: Any, _msg: Any) -> None:
            if err is None:
                acks.append((sent, time.time()))

        return done

    faulted = resumed = 0.0
    start = time.time()
    while not resumed:
        now = time.time()
        producer.produce(topic, b"f" * MSG_SIZE, on_delivery=sender(now))
        producer.poll(0.005)
        if not faulted and now - start > 1.0 and acks:
            faulted = time.time()
            fault()
        if faulted:
            after = [a for s, a in acks if s >= faulted]
            resumed = min(after) if after else 0.0
            if now - faulted > 90:
                raise RuntimeError(f"{system.name}: produce did not resume within 90 s")
    producer.flush(30)
    return faulted, resumed


def _victim(system: System, r: int) -> tuple[int, list[int]]:
    controller = system.controller()
    victim = next(n for n in (*BROKERS[r % 3 :], *BROKERS[: r % 3]) if n != controller)
    return victim, [n for n in BROKERS if n != victim]


def _timeline(system: System) -> EtcdTimeline | None:
    return EtcdTimeline(*system.etcd) if system.etcd else None


def _watched_stream(
    system: System, topic: str, fault: Callable[[], None], *, settle_s: float = 0.0
) -> tuple[EtcdTimeline | None, float, float]:
    """``stream_through`` with Spindle's etcd timeline recording around it (Kafka's steps
    are read from its logs afterwards): the timeline, the fault's and resumption's times."""
    timeline = _timeline(system)
    if timeline is not None:
        timeline.__enter__()
    try:
        faulted, resumed = stream_through(system, topic, fault)
        time.sleep(settle_s)
    finally:
        if timeline is not None:
            timeline.__exit__()
    return timeline, faulted, resumed


def _breakdown(
    system: System,
    timeline: EtcdTimeline | None,
    *,
    topic: str,
    victim: int,
    faulted: float,
    resumed: float,
    dir_failure: bool,
) -> dict[str, float]:
    """Seconds after the fault of each step the module docstring names (-1: not seen)."""
    if timeline is not None:
        if dir_failure:
            gone = timeline.first(
                lambda d, k, v: k == f"sessions/{victim}" and not d and bool(v.get("offline_dirs")),
                faulted,
            )
        else:
            gone = timeline.first(lambda d, k, _v: d and k == f"sessions/{victim}", faulted)
        elected = timeline.first(
            lambda d, k, v: (
                not d
                and k == f"topics/{topic}"
                and v.get("partitions", [{}])[0].get("leader", victim) not in (victim, -1)
            ),
            faulted,
        )
    else:
        assert system.controller_log is not None
        if dir_failure:
            gone = kafka_log_time(
                system.nodes[victim].log, "Stopping serving replicas in dir", faulted
            )
        else:
            gone = kafka_log_time(
                system.controller_log, f"Fencing broker {victim} because its session", faulted
            )
        elected = min(
            (
                t
                for n, node in system.nodes.items()
                if n != victim
                and (
                    t := kafka_log_time(
                        node.log, r"Transitioning \d+ partition\(s\) to local leaders", faulted
                    )
                )
            ),
            default=0.0,
        )
    first = "dir_reported_s" if dir_failure else "session_gone_s"
    return {
        first: round(gone - faulted, 3) if gone else -1.0,
        "leader_elected_s": round(elected - faulted, 3) if elected else -1.0,
        "resumed_s": round(resumed - faulted, 3),
    }


def failover(system: System, r: int) -> dict[str, Any]:
    """Leader SIGKILL until produce resumes; the victim is restarted and rejoins the ISR."""
    victim, others = _victim(system, r)
    topic = f"failover-{r}"
    create_topic(system, topic, assignment=[[victim, *others]])
    timeline, faulted, resumed = _watched_stream(system, topic, system.nodes[victim].kill)
    node = system.nodes[victim]
    node.launch()
    node.wait_up()
    wait_isr(system, topic, timeout_s=180)
    parts = _breakdown(
        system,
        timeline,
        topic=topic,
        victim=victim,
        faulted=faulted,
        resumed=resumed,
        dir_failure=False,
    )
    return {"failover_s": resumed - faulted, "victim": float(victim), "failover_parts": parts}


def dir_failover(system: System, r: int) -> dict[str, Any]:
    """The leader's directory holding the partition fails (ext4 shut down) until produce
    resumes; then the victim is stopped, its file system mounted again, the victim restarted
    and back in every ISR."""
    victim, others = _victim(system, r + 1)  # not the SIGKILL phase's victim of this round
    topic = f"dirfail-{r}"
    create_topic(system, topic, assignment=[[victim, *others]])
    node = system.nodes[victim]
    deadline = time.monotonic() + 60
    # The metadata's ISR is whole from creation on; the replica's directory follows shortly.
    while (index := node.dir_of(topic)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{system.name}: {topic} not in broker {victim}'s directories")
        time.sleep(0.05)
    # settle_s: the victim's own log lines of the failure.
    timeline, faulted, resumed = _watched_stream(
        system, topic, lambda: node.fail_dir(index), settle_s=0.5
    )
    parts = _breakdown(
        system,
        timeline,
        topic=topic,
        victim=victim,
        faulted=faulted,
        resumed=resumed,
        dir_failure=True,
    )
    node.kill()
    node.remount_dir(index)
    node.launch()
    node.wait_up()
    wait_isr(system, topic, timeout_s=180)
    return {
        "dir_failover_s": resumed - faulted,
        "dir_victim": float(victim),
        "dir_failover_parts": parts,
    }
