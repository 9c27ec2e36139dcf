"""A real multi-broker Spindle cluster for system tests: N ``spindle.broker`` processes in
``spindle.controller.mode=elected`` sharing one etcd prefix, each with several log
directories -- optionally each directory its own tmpfs, so a test can make one fail for real
(remount read-only) -- and the cluster metadata as etcd holds it.

Kafka's command-line tools run through :func:`kafka_tool`; ``kafka-topics --describe`` is
parsed by :meth:`Cluster.describe`.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from spindle.broker.controller.etcd import EtcdClient
from spindle.broker.controller.model import TopicState, is_fenced
from spindle.broker.controller.store import MetadataStore

from .conftest import Broker, Etcd, make_broker
from .test_broker_kafka_cli import _run as kafka_tool

__all__ = ["Cluster", "View", "kafka_tool", "running"]

FAST_SESSIONS = {
    "spindle.controller.mode": "elected",
    "spindle.controller.lease.ms": "2000",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    # The verifying consumer has a group id (librdkafka needs one), so the group coordinator
    # creates __consumer_offsets: three partitions instead of fifty spare the two cores.
    "offsets.topic.num.partitions": "3",
}


@dataclass
class View:
    """The cluster metadata as etcd holds it at one moment."""

    controller: tuple[int, int] | None
    live: set[int]
    unfenced: set[int]
    topics: dict[str, TopicState]
    offline_dirs: dict[int, list[str]] = field(default_factory=dict)
    dirs: dict[int, list[str]] = field(default_factory=dict)

    def isr(self, topic: str, partition: int = 0) -> list[int]:
        return list(self.topics[topic].partitions[partition].isr)

    def leader(self, topic: str, partition: int = 0) -> int:
        return self.topics[topic].partitions[partition].leader


def mount_tmpfs(path: Path, size_mb: int = 256) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(path)],
        check=True,
    )


def umount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], check=False)


def remount(path: str, mode: str) -> None:
    """``mode`` ``ro`` fails the file system for writes (EROFS), ``rw`` heals it."""
    subprocess.run(["mount", "-o", f"remount,{mode}", path], check=True)


@contextmanager
def running(
    base: Path, etcd: Etcd, *, nodes: int, dirs: int = 2, extra: dict[str, str] | None = None
) -> Iterator[Cluster]:
    """A :class:`Cluster` started with every broker unfenced, and always closed afterwards: the
    body of the cluster tests' module fixtures."""
    cluster = Cluster(base, etcd, nodes=nodes, dirs=dirs, extra=extra)
    try:
        cluster.start()
        cluster.wait_unfenced()
        yield cluster
    finally:
        cluster.close()


class Cluster:
    """Brokers 1..n on one etcd prefix. ``tmpfs``: every log directory is a tmpfs of its own
    (needs root). ``node_extra``: settings of single brokers (e.g. ``broker.rack``). Call :meth:`close` (the fixtures do) to stop brokers and unmount."""

    def __init__(
        self,
        base: Path,
        etcd: Etcd,
        *,
        nodes: int,
        dirs: int = 2,
        tmpfs: bool = False,
        extra: dict[str, str] | None = None,
        node_extra: dict[int, dict[str, str]] | None = None,
    ) -> None:
        self.etcd_url = etcd.url
        self.prefix = f"/test/{uuid.uuid4().hex}"
        self._stack = ExitStack()
        self.brokers: dict[int, Broker] = {}
        for n in range(1, nodes + 1):
            paths = [base / f"b{n}" / f"dir{i + 1}" for i in range(dirs)]
            if tmpfs:
                for path in paths:
                    mount_tmpfs(path)
                    self._stack.callback(umount, path)
            self.brokers[n] = make_broker(
                base / f"b{n}",
                etcd,
                node_id=n,
                log_dirs=[str(p) for p in paths],
                extra={
                    **FAST_SESSIONS,
                    "spindle.etcd.prefix": self.prefix,
                    **(extra or {}),
                    **(node_extra or {}).get(n, {}),
                },
            )
            self._stack.callback(self.brokers[n].kill)

    def start(self, nodes: Iterable[int] | None = None) -> None:
        for n in self.brokers if nodes is None else nodes:
            if not self.is_up(n):
                self.brokers[n].start()

    def close(self) -> None:
        for b in self.brokers.values():
            with suppress(subprocess.TimeoutExpired):
                b.stop(timeout=20)
        self._stack.close()

    def is_up(self, node: int) -> bool:
        proc = self.brokers[node].proc
        return proc is not None and proc.poll() is None

    def alive(self) -> set[int]:
        return {n for n in self.brokers if self.is_up(n)}

    def bootstrap(self, nodes: Iterable[int] | None = None) -> str:
        chosen = sorted(self.alive() if nodes is None else nodes)
        return ",".join(self.brokers[n].bootstrap for n in chosen)

    def dir_id(self, node: int, index: int) -> str:
        """The directory id (``meta.properties``) of broker ``node``'s log dir ``index``."""
        meta = Path(self.brokers[node].log_dirs[index]) / "meta.properties"
        for line in meta.read_text().splitlines():
            if line.startswith("directory.id="):
                return line.split("=", 1)[1]
        raise AssertionError(f"no directory.id in {meta}")

    # --- metadata ---------------------------------------------------------------------------

    def view(self) -> View:
        async def read() -> View:
            client = EtcdClient([self.etcd_url])
            try:
                store = MetadataStore(client, prefix=self.prefix)
                await store.load()
                return View(
                    store.controller,
                    set(store.sessions),
                    {b for b, s in store.sessions.items() if not is_fenced(s)},
                    store.topics,
                    {b: list(s.offline_dirs) for b, s in store.sessions.items()},
                    {b: list(r.directories) for b, r in store.brokers.items()},
                )
            finally:
                await client.close()

        return asyncio.run(read())

    def wait(self, what: str, check: Callable[[View], bool], timeout_s: float = 60) -> View:
        """Poll etcd until ``check(view)``; fail naming ``what`` and the last view."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                view = self.view()
                if check(view):
                    return view
            except OSError:
                view = None  # etcd restarting
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}; last view: {view}\n{self.log_tails()}")
            time.sleep(0.2)

    def log_tails(self, lines: int = 40) -> str:
        """The last ``lines`` of every broker's log: what a failed wait prints, because CI
        keeps only the test's output, not the brokers' temporary directories."""
        parts = []
        for n, broker in sorted(self.brokers.items()):
            try:
                tail = broker.log_text().splitlines()[-lines:]
            except OSError as exc:
                tail = [f"(no log: {exc})"]
            parts.append(f"--- broker {n} log, last {len(tail)} lines ---\n" + "\n".join(tail))
        return "\n".join(parts)

    def wait_unfenced(self, nodes: Iterable[int] | None = None) -> View:
        want = set(self.brokers if nodes is None else nodes)
        return self.wait(
            f"brokers {sorted(want)} registered and unfenced, and a controller",
            lambda v: want <= v.unfenced and v.controller is not None,
        )

    def wait_isr_whole(self, topic: str, timeout_s: float = 60) -> View:
        return self.wait(
            f"every replica of {topic} in sync",
            lambda v: (
                topic in v.topics
                and all(
                    sorted(p.isr) == sorted(p.replicas) and not p.adding and not p.removing
                    for p in v.topics[topic].partitions.values()
                )
            ),
            timeout_s,
        )

    # --- Kafka's tools ----------------------------------------------------------------------

    def tool(self, name: str, *args: str, nodes: Iterable[int] | None = None) -> str:
        return kafka_tool(name, "--bootstrap-server", self.bootstrap(nodes), *args)

    def create_topic(self, topic: str, *args: str) -> None:
        """``kafka-topics --create``, retried while brokers are still unfencing."""
        deadline = time.monotonic() + 30
        while True:
            try:
                self.tool("kafka-topics", "--create", "--topic", topic, *args)
                return
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def execute_reassignment(self, plan: dict[str, object], plan_file: Path, *opts: str) -> str:
        """``kafka-reassign-partitions --execute`` of ``plan`` (``opts``: e.g. ``--throttle``)."""
        plan_file.write_text(json.dumps(plan))
        out = self.tool(
            "kafka-reassign-partitions",
            "--reassignment-json-file",
            str(plan_file),
            "--execute",
            *opts,
        )
        assert "Successfully started" in out, out
        return out

    def reassign(
        self, plan: dict[str, object], plan_file: Path, *execute: str, timeout_s: float = 120
    ) -> str:
        """:meth:`execute_reassignment` then :meth:`verify_reassignment`: the last --verify
        output (that run also clears the throttles)."""
        self.execute_reassignment(plan, plan_file, *execute)
        return self.verify_reassignment(plan_file, timeout_s=timeout_s)

    def verify_reassignment(self, plan_file: Path, *, timeout_s: float = 120) -> str:
        """``kafka-reassign-partitions --verify`` every second until no partition or log-dir
        move is in progress; its last output (that run also clears the throttles)."""
        args = ("kafka-reassign-partitions", "--reassignment-json-file", str(plan_file))
        deadline = time.monotonic() + timeout_s
        while True:
            out = self.tool(*args, "--verify")
            if "in progress" not in out and "not found" not in out:
                assert "completed" in out, out
                return out
            assert time.monotonic() < deadline, f"reassignment never completed:\n{out}"
            time.sleep(1)

    def describe(self, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
        """``kafka-topics --describe``: partition -> (leader, replicas, isr)."""
        out = self.tool("kafka-topics", "--describe", "--topic", topic)
        rows = {}
        for m in re.finditer(
            r"Partition: (\d+)\s+Leader: (-?\d+|none)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]*)", out
        ):
            leader = -1 if m.group(2) == "none" else int(m.group(2))
            rows[int(m.group(1))] = (leader, _ints(m.group(3)), _ints(m.group(4)))
        return rows


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]
