"""The two clusters of bench/cluster_compare.py: three Kafka brokers with a separate KRaft
controller, three Spindle brokers on one etcd; each broker with two log directories, each its
own ext4 file system on a loop device (not a benchmark by itself).

Why two loop-mounted ext4 directories per broker: the directory-failure failover must fail one
directory *for real* -- ``EXT4_IOC_SHUTDOWN`` makes every later I/O on it return EIO, as a disk
that vanished does -- while the broker keeps serving from its other directory (KIP-112), and
Kafka and Spindle must sit on the same kind of file system for the throughput figures to stay
comparable. The volumes are e2e/controlplane/volumes.py's (the node tests' StorageClass), sparse
images on the machine's disk, so their data does not live in memory as a tmpfs's would. Without
root (no mount) the directories are plain directories and the directory failure is not run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_compare import (
    format_kafka,
    free_port,
    kafka_cluster_id,
    kafka_home,
    kafka_java,
    start_etcd,
    stop,
    wait_port,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
from controlplane import volumes  # e2e/ is not an installed package

BROKERS = (1, 2, 3)
DIRS = 2
VOLUME_BYTES = 4 << 30
"""Sparse: an image only takes the blocks written to it."""
SESSION = ("broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500")
KAFKA_LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stderr.Target=System.err
# The failover breakdown reads these (bench/failover.py): fencing, and leaders taking over.
log4j.logger.org.apache.kafka.controller.ReplicationControlManager=INFO
log4j.logger.org.apache.kafka.controller.BrokerHeartbeatManager=INFO
log4j.logger.state.change.logger=INFO
"""


def can_mount() -> bool:
    return os.geteuid() == 0


@dataclass
class Node:
    """One broker process that can be SIGKILLed and started again with the same command."""

    node_id: int
    port: int
    argv: list[str]
    log: Path
    dirs: list[Path]
    volumes_dir: Path
    pvs: list[str]
    """The volume name of each directory (empty without root: plain directories)."""
    proc: subprocess.Popen[bytes] | None = None

    def launch(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, cwd="/"
        )

    def wait_up(self) -> None:
        assert self.proc is not None
        wait_port(self.port, self.proc, self.log)

    def up(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def mount(self) -> None:
        for pv, path in zip(self.pvs, self.dirs, strict=True):
            volumes.create(self.volumes_dir, pv, VOLUME_BYTES)
            assert volumes.mount_path(self.volumes_dir, pv) == path
        for path in self.dirs:
            path.mkdir(exist_ok=True)

    def fail_dir(self, index: int) -> None:
        """Shut the directory's ext4 down: every later read or write there fails with EIO."""
        volumes.fail(self.volumes_dir, self.pvs[index], volumes.Failure.IO_ERROR)

    def remount_dir(self, index: int) -> None:
        """A shut-down ext4 back in service (the broker is down): unmount, mount (the journal
        replays; what the shutdown cut off is gone, as after a crash).

        The unmount may be refused for a moment while the dead broker's pages are written back
        (they cannot be: the file system is shut down); after a few tries it is detached lazily,
        and the image is mounted through a loop device of its own -- ``mount -o loop`` would
        reuse the old one and with it the shut-down file system."""
        pv = self.pvs[index]
        mount = volumes.mount_path(self.volumes_dir, pv)
        for _ in range(20):
            done = subprocess.run(["umount", str(mount)], capture_output=True, text=True)
            if done.returncode == 0:
                break
            time.sleep(0.1)
        else:
            print(f"{pv}: umount refused ({done.stderr.strip()}); detaching lazily", flush=True)
            subprocess.run(["umount", "-l", str(mount)], check=True)
        image = str(volumes.image_path(self.volumes_dir, pv))
        loop = subprocess.run(
            ["losetup", "--find", "--show", image], check=True, capture_output=True, text=True
        ).stdout.strip()
        subprocess.run(["mount", loop, str(mount)], check=True)
        # Autoclear as mount -o loop sets it: the loop device goes with the last unmount.
        subprocess.run(["losetup", "--detach", loop], check=False)
        if not os.path.ismount(mount):
            raise RuntimeError(f"{pv}: not mounted again at {mount}")
        with contextlib.suppress(OSError):  # back from the journal, as after mkfs
            (mount / "lost+found").rmdir()

    def unmount(self) -> None:
        for pv in self.pvs:
            volumes.remove(self.volumes_dir, pv)

    def bytes_of(self, topic: str) -> int:
        """Bytes of ``topic``'s segment files in this broker's directories."""
        return sum(
            f.stat().st_size for d in self.dirs for f in d.glob(f"{topic}-*/*.log") if f.exists()
        )

    def dir_of(self, topic: str, partition: int = 0) -> int | None:
        """Index of the directory holding this broker's replica of ``topic-partition``."""
        for i, d in enumerate(self.dirs):
            if (d / f"{topic}-{partition}").is_dir():
                return i
        return None


@dataclass
class System:
    """Three brokers, the process(es) they depend on, and who their controller is."""

    name: str
    nodes: dict[int, Node]
    side: dict[str, subprocess.Popen[bytes]]
    controller: Callable[[], int | None]
    side_peak_mb: dict[str, float] = field(default_factory=dict)
    etcd: tuple[str, str] | None = None
    """Spindle: (etcd url, metadata prefix)."""
    controller_log: Path | None = None
    """Kafka: the KRaft controller's log."""

    def start(self) -> None:
        for node in self.nodes.values():
            node.launch()
        for node in self.nodes.values():
            node.wait_up()

    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes.values() if n.up())

    def close(self) -> None:
        for name, proc in self.side.items():
            if proc.poll() is None:
                self.side_peak_mb[name] = hwm_mb(proc.pid)
        for node in self.nodes.values():
            if node.proc is not None:
                stop(node.proc)
        for proc in self.side.values():
            stop(proc)
        for node in self.nodes.values():
            node.unmount()


def hwm_mb(pid: int) -> float:
    """Peak resident set of ``pid`` over its life (``VmHWM``), MiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _node(work: Path, system: str, n: int, port: int, argv: list[str]) -> Node:
    """Node ``n`` of ``system`` with its directories mounted (plain dirs without root)."""
    volumes_dir = work / "volumes"
    volumes_dir.mkdir(exist_ok=True)
    pvs = [f"{system}-b{n}-d{i}" for i in range(DIRS)] if can_mount() else []
    dirs = (
        [volumes.mount_path(volumes_dir, pv) for pv in pvs]
        if pvs
        else [work / f"{system}-b{n}-d{i}" for i in range(DIRS)]
    )
    node = Node(n, port, argv, work / f"{system}-b{n}.log", dirs, volumes_dir, pvs)
    node.mount() if pvs else [d.mkdir() for d in dirs]
    return node


def start_kafka_cluster(work: Path, systems: dict[str, System]) -> None:
    """A separate KRaft controller and three brokers, entered in ``systems`` once launched."""
    home = kafka_home()
    log4j = work / "kafka-log4j.properties"
    log4j.write_text(KAFKA_LOG4J)
    java = [*kafka_java(home, "-Xms256m"), f"-Dlog4j.configuration=file:{log4j}"]
    cport = free_port()
    common = [
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"controller.quorum.voters=100@127.0.0.1:{cport}",
        *SESSION,
    ]
    controller_props = work / "kafka-controller.properties"
    controller_props.write_text(
        "\n".join(
            [
                *common,
                "process.roles=controller",
                "node.id=100",
                f"listeners=CONTROLLER://127.0.0.1:{cport}",
                f"log.dirs={work / 'kafka-controller'}",
                "",
            ]
        )
    )
    system = System("kafka", {}, {}, lambda: None)
    systems["kafka"] = system  # stopped by the caller from now on, whatever fails next
    for n in BROKERS:
        port, props = free_port(), work / f"kafka-b{n}.properties"
        node = _node(work, "kafka", n, port, [*java, "kafka.Kafka", str(props)])
        system.nodes[n] = node
        props.write_text(
            "\n".join(
                [
                    *common,
                    "process.roles=broker",
                    f"node.id={n}",
                    f"listeners=PLAINTEXT://127.0.0.1:{port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                    "inter.broker.listener.name=PLAINTEXT",
                    f"log.dirs={','.join(str(d) for d in node.dirs)}",
                    "offsets.topic.replication.factor=3",
                    "offsets.topic.num.partitions=3",
                    "group.initial.rebalance.delay.ms=0",
                    "",
                ]
            )
        )
    cluster_id = kafka_cluster_id()
    with ThreadPoolExecutor(4) as pool:
        formats = [controller_props, *(work / f"kafka-b{n}.properties" for n in BROKERS)]
        list(pool.map(lambda p: format_kafka(java, p, cluster_id), formats))
    log = work / "kafka-controller.log"
    controller = subprocess.Popen(
        [*java, "kafka.Kafka", str(controller_props)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    system.side["kafka_controller"] = controller
    system.controller_log = log
    wait_port(cport, controller, log)
    system.start()


def start_spindle_cluster(work: Path, systems: dict[str, System]) -> None:
    """Etcd and three elected-mode brokers, entered in ``systems`` before any broker starts."""
    prefix = f"/bench/{uuid.uuid4().hex}"
    etcd, url = start_etcd(work)
    system = System(
        "spindle", {}, {"etcd": etcd}, lambda: spindle_controller(url, prefix), etcd=(url, prefix)
    )
    systems["spindle"] = system
    for n in BROKERS:
        port, config = free_port(), work / f"spindle-b{n}.properties"
        argv = [sys.executable, "-m", "spindle.broker", "--config", str(config)]
        node = _node(work, "spindle", n, port, [*argv, "--log-level", "WARNING"])
        system.nodes[n] = node
        config.write_text(
            "\n".join(
                [
                    f"node.id={n}",
                    f"listeners=PLAINTEXT://127.0.0.1:{port}",
                    f"log.dirs={','.join(str(d) for d in node.dirs)}",
                    f"spindle.etcd.endpoints={url}",
                    f"spindle.etcd.prefix={prefix}",
                    "spindle.controller.mode=elected",
                    "spindle.controller.lease.ms=2000",
                    "offsets.topic.num.partitions=3",
                    *SESSION,
                    "",
                ]
            )
        )
    system.start()


def spindle_controller(url: str, prefix: str) -> int | None:
    """The node id of Spindle's active controller, as etcd holds it."""
    from spindle.broker.controller.etcd import EtcdClient
    from spindle.broker.controller.store import MetadataStore

    async def read() -> int | None:
        client = EtcdClient([url])
        try:
            store = MetadataStore(client, prefix=prefix)
            await store.load()
            return store.controller[0] if store.controller else None
        finally:
            await client.close()

    return asyncio.run(read())


def create_topic(
    system: System, topic: str, *, partitions: int = 3, assignment: list[list[int]] | None = None
) -> None:
    """Create ``topic`` (RF 3 unless ``assignment``), retried while brokers still unfence, and
    wait until every partition has a leader and a whole ISR."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": system.bootstrap(), "log_level": 0})
    new = (
        NewTopic(topic, len(assignment), replica_assignment=assignment)
        if assignment
        else NewTopic(topic, partitions, 3)
    )
    deadline = time.monotonic() + 90
    while True:
        try:
            admin.create_topics([new])[topic].result(30)
            break
        except Exception as e:
            if "already exists" in str(e).lower():
                break
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    wait_isr(system, topic)


def wait_isr(system: System, topic: str, timeout_s: float = 120) -> dict[int, Any]:
    """Poll metadata until every partition of ``topic`` has a leader and ISR == replicas."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": system.bootstrap(), "log_level": 0})
    deadline = time.monotonic() + timeout_s
    parts: dict[int, Any] = {}
    while True:
        try:
            parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
            if parts and all(
                p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas) for p in parts.values()
            ):
                return dict(parts)
        except Exception as e:  # metadata not there yet
            if time.monotonic() > deadline:
                raise RuntimeError(f"{system.name}: {topic} never whole: {e}") from e
        if time.monotonic() > deadline:
            raise RuntimeError(f"{system.name}: {topic} ISR never whole: {parts}")
        time.sleep(0.3)
