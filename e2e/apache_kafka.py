"""A real Apache Kafka broker from the cached Maven Central jars, for comparisons.

Spindle's answers are checked against Kafka's own where they must match (tests/compat) and its
speed is measured against Kafka's (bench/): both start the same KRaft broker -- combined
broker and controller, one node, PLAINTEXT -- from the jars ``scripts/install.d/30-kafka-jars.sh``
resolves into ``$SPINDLE_CACHE/kafka/<version>/lib``. Nothing is downloaded here.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

CACHE = Path(os.environ.get("SPINDLE_CACHE", Path.home() / ".cache" / "spindle"))
KAFKA_VERSION_FILE = Path(__file__).resolve().parent / "kafka-tools" / "pom.xml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> None:
    """Until ``port`` accepts a connection; the log's tail if ``proc`` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"process exited ({proc.returncode}); log:\n{log.read_text()[-3000:]}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"port {port} did not open; log:\n{log.read_text()[-3000:]}")


def kafka_version() -> str:
    text = KAFKA_VERSION_FILE.read_text()
    return text.split("<kafka.version>")[1].split("</kafka.version>")[0]


def kafka_home() -> Path:
    home = CACHE / "kafka" / kafka_version()
    if not (home / "lib").is_dir():
        raise SystemExit(f"Kafka jars missing under {home}: run ./dev sync first")
    return home


def kafka_java(home: Path, heap: str = "-Xms1g", max_heap: str = "-Xmx1g") -> list[str]:
    """The JVM command line that runs a Kafka class from the cached jars (G1; ``heap`` and
    ``max_heap`` are the initial and largest heap options)."""
    return [
        "java",
        heap,
        max_heap,
        "-XX:+UseG1GC",
        f"-Dlog4j.configuration=file:{home / 'tools-log4j.properties'}",
        "-cp",
        f"{home / 'lib'}/*",
    ]


def format_kafka(java: list[str], props: Path, cluster_id: str) -> None:
    """``kafka-storage format``: a KRaft node's log dirs get the cluster id before it starts."""
    subprocess.run(
        [*java, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)],
        check=True,
        capture_output=True,
    )


def kafka_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def start_kafka(
    work: Path, dirs: int, *, java: list[str] | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """One KRaft broker+controller with ``dirs`` log directories under ``work``, started and
    accepting connections; (process, PLAINTEXT port). The caller stops the process."""
    home = kafka_home()
    port, cport = free_port(), free_port()
    log_dirs = [str(work / f"kafka-d{i}") for i in range(dirs)]
    props = work / "kafka.properties"
    props.write_text(
        "\n".join(
            [
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{cport}",
                f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                "controller.listener.names=CONTROLLER",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name=PLAINTEXT",
                f"log.dirs={','.join(log_dirs)}",
                "offsets.topic.replication.factor=1",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "num.partitions=1",
                "file.delete.delay.ms=1000",
                "",
            ]
        )
    )
    java = java or kafka_java(home)
    format_kafka(java, props, kafka_cluster_id())
    log = work / "kafka.log"
    with log.open("wb") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen([*java, "kafka.Kafka", str(props)], stdout=out, stderr=out)
    wait_port(port, proc, log)
    return proc, port
