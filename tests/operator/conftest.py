"""Fixtures for operator tests against the real API server (the session's ``kube``): the
operator as a real process, namespaces, and the ``world`` (a real broker on tmpfs disks with an
operator driving it) that the dashboard's tests share."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import spindle.broker.protocol.apis  # noqa: F401  (kafka-python's schemas, warnings silenced)
from controlplane import stop_process_group
from controlplane.processes import free_port as free_port
from controlplane.volumes import remount_read_only
from kafka import KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.errors import KafkaError

from ..broker.conftest import Broker, Etcd, make_broker
from ..broker.conftest import etcd as etcd

ROOT = Path(__file__).resolve().parents[2]
CRD_NAMES = [
    "brokers.spindle.io",
    "logvolumes.spindle.io",
    "reassignments.spindle.io",
    "rebalances.spindle.io",
]
T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], *, what: str, timeout: float = 60.0) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` otherwise.
    A deadline on waiting, not an assertion about speed."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


class Cluster:
    """kubectl helpers in one namespace."""

    def __init__(self, kube: Any, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> Any:
        return self.kube.kubectl("-n", self.namespace, *args, input=input, check=check)

    def get(self, kind: str, name: str | None = None) -> Any:
        args = ["get", kind, *([name] if name else []), "-o", "json"]
        result = self.kubectl(*args, check=False)
        if result.returncode != 0:
            if "NotFound" in result.stderr:
                return None
            raise AssertionError(result.stderr)
        return json.loads(result.stdout)

    def names(self, kind: str) -> set[str]:
        return {item["metadata"]["name"] for item in self.get(kind)["items"]}

    def apply(self, manifest: str) -> Any:
        return self.kubectl("apply", "-f", "-", input=manifest)

    def items(self, kind: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.get(kind)["items"]
        return items

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.items("events") if e.get("reason") == reason]

    def patch_status(self, kind: str, name: str, status: dict[str, Any]) -> None:
        """Write status as the operator does (merge patch on the status subresource)."""
        patch = json.dumps({"status": status})
        self.kubectl("patch", kind, name, "--subresource=status", "--type=merge", "-p", patch)

    def token(self, service_account: str) -> str:
        """A bound token from the TokenRequest API (``kubectl create token``)."""
        done = self.kubectl("create", "token", service_account, "--duration=1h")
        return str(done.stdout).strip()


@pytest.fixture(scope="session")
def spindle_crds(kube: Any) -> Any:
    """The CRDs from crds/, applied and Established."""
    kube.kubectl("apply", "-f", str(ROOT / "crds"))
    kube.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in CRD_NAMES]
    )
    return kube


@contextlib.contextmanager
def temporary_namespace(kube: Any, prefix: str) -> Iterator[Cluster]:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", name)
    try:
        yield Cluster(kube, name)
    finally:
        kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def namespace(spindle_crds: Any) -> Iterator[Cluster]:
    """A fresh namespace served by the session's operator (when a test starts it)."""
    with temporary_namespace(spindle_crds, "op") as cluster:
        yield cluster


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class OperatorProcess:
    """``python -m spindle.operator run ARGS`` as a real subprocess against the real API server,
    which a test can SIGKILL and start again; with ``dashboard`` it also serves the dashboard
    (reads open) on that loopback port. Its log is ``workdir/operator.log``."""

    def __init__(self, kube: Any, workdir: Path, *args: str, dashboard: int | None = None) -> None:
        self.kube, self.workdir, self.args = kube, workdir, args
        self.log = workdir / "operator.log"
        self.liveness = f"http://127.0.0.1:{free_port()}/healthz"
        self.dashboard_url = f"http://127.0.0.1:{dashboard}" if dashboard else None
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> None:
        """Start and wait until its liveness probe (and dashboard, if any) answer."""
        args = [*self.args, "--liveness", self.liveness]
        if self.dashboard_url:
            args += ["--dashboard", self.dashboard_url.removeprefix("http://")]
            args += ["--dashboard-read", "open"]
        env = {**self.kube.env, "PYTHONUNBUFFERED": "1"}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "spindle.operator", "run", *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                # Not the repository root: ``-m`` puts the cwd first on sys.path, where the
                # ``operator/`` folder would shadow the standard library's ``operator``.
                cwd=self.workdir,
                start_new_session=True,
            )
        urls = [self.liveness]
        if self.dashboard_url:
            urls.append(self.dashboard_url + "/api/v1/overview")
        deadline = time.monotonic() + timeout
        while not all(healthy(url) for url in urls):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"operator did not start:\n{self.log_tail()}", pytrace=False)
            time.sleep(0.25)
        # Healthy comes before kopf has listed the namespaces; a namespace the tests create
        # from here on is still served (spindle.operator.kopf_patches closes kopf's gap).

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def kill(self) -> None:
        """SIGKILL the whole process group: no cleanup handlers run."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, 9)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_process_group(self.proc)


@pytest.fixture(scope="session")
def operator(spindle_crds: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The operator serving the tests' op-* namespaces (a namespace pattern: a test that runs
    another operator instance uses a namespace outside it). Yields the path of its log
    (attached to failures by the tests that read it)."""
    process = OperatorProcess(
        spindle_crds, tmp_path_factory.mktemp("operator"), "--namespace", "op-*"
    )
    process.start()
    try:
        yield process.log
    finally:
        process.stop()


@pytest.fixture(name="wait_for")
def wait_for_fixture() -> Callable[..., Any]:
    return wait_for


@pytest.fixture(name="helpers")
def helpers_fixture() -> dict[str, Any]:
    """conftest helpers for test modules (which cannot import each other in importlib mode)."""
    return {
        "free_port": free_port,
        "healthy": healthy,
        "temporary_namespace": temporary_namespace,
    }


# -- The world: one real broker on four tmpfs log directories and an operator driving it ------
# Used by the operator's Reassignment/Rebalance tests and by the dashboard's browser test that
# approves a real proposal (tests/dashboard imports these fixtures).

CLUSTER = "loop"
TOPIC, CANARY, SKEWED = "moves", "canary", "skewed"
PARTITIONS, RECORDS, RECORD_BYTES = 3, 2000, 1000  # 2 MB per partition
SKEWED_PARTITIONS, SKEWED_RECORDS = 8, 500  # 0.5 MB per partition
DIR_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[str]:
    """A tmpfs of its own mounted at ``path`` (root only): a log directory whose disk a test
    can fill or remount read-only for real."""
    path.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield str(path)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(path)], check=False)
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=False)


def record(partition: int, seq: int) -> bytes:
    """The value of record ``seq`` produced to ``partition`` (checked byte for byte later)."""
    return f"{partition}:{seq}:".encode().ljust(RECORD_BYTES, b"x")


def produce(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", batch_size=256 * 1024)
    for p in range(partitions):
        for seq in range(records):
            producer.send(topic, record(p, seq), partition=p)
    producer.flush()
    producer.close()


class World:
    """The broker, its directories, the operator serving ``ns`` and an admin client."""

    def __init__(
        self, broker: Broker, dirs: list[str], operator: OperatorProcess, ns: Cluster
    ) -> None:
        self.broker, self.dirs, self.operator, self.ns = broker, dirs, operator, ns
        self.admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)

    def placement(self, topic: str = TOPIC) -> dict[int, str]:
        """partition -> the directory holding its current (not future) replica."""
        out = {}
        for d in self.admin.describe_log_dirs(brokers=[self.broker.node_id])[0]["log_dirs"]:
            for t in d.get("topics") or ():
                for p in t["partitions"]:
                    if t["name"] == topic and not p["is_future_key"]:
                        out[int(p["partition_index"])] = d["log_dir"]
        return out

    def futures(self) -> int:
        return sum(
            1
            for d in self.admin.describe_log_dirs(brokers=[self.broker.node_id])[0]["log_dirs"]
            for t in d.get("topics") or ()
            for p in t["partitions"]
            if p["is_future_key"]
        )

    def dir_throttle(self) -> str | None:
        res = ConfigResource(ConfigResourceType.BROKER, str(self.broker.node_id))
        configs = self.admin.describe_configs([res])["broker"][str(self.broker.node_id)]
        entry = configs.get(DIR_THROTTLE)
        return None if entry is None else str(entry["value"])

    def apply(self, name: str, moves: dict[int, str], **spec: Any) -> None:
        partitions = [
            {"topic": TOPIC, "partition": p, "replicas": [1], "logDirs": [d]}
            for p, d in moves.items()
        ]
        self.create(name, partitions, **spec)

    def create(self, name: str, partitions: list[dict[str, Any]], **spec: Any) -> None:
        body = {
            "apiVersion": "spindle.io/v1alpha1",
            "kind": "Reassignment",
            "metadata": {"name": name},
            "spec": {"cluster": CLUSTER, "partitions": partitions, **spec},
        }
        self.ns.apply(json.dumps(body))

    def status(self, name: str, kind: str = "reassignment") -> dict[str, Any]:
        body = self.ns.get(kind, name) or {}
        status: dict[str, Any] = body.get("status") or {}
        return status

    def wait(self, what: str, probe: Callable[[], Any], timeout: float = 120) -> Any:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = probe()
            if last:
                return last
            time.sleep(0.2)
        statuses = {n: self.status(n) for n in self.ns.names("reassignments")}
        pytest.fail(
            f"timed out waiting for {what}; last {last!r}\nstatuses: {statuses}\n"
            f"operator log:\n{self.operator.log_tail(3000)}"
        )

    def wait_phase(
        self, name: str, *phases: str, kind: str = "reassignment", timeout: float = 120
    ) -> dict[str, Any]:
        """The status of ``kind``/``name`` once its phase is one of ``phases``."""
        status: dict[str, Any] = self.wait(
            f"{kind} {name} in {phases}",
            lambda: (s := self.status(name, kind)).get("phase") in phases and s,
            timeout,
        )
        return status

    def wait_moving(self, name: str, *, partial: bool = False) -> dict[str, Any]:
        """Until a copy is under way (a future replica exists); with ``partial``, also until
        some but not all bytes count as copied (DescribeLogDirs reports a future replica's
        size as it copies, so ``bytesDone`` grows within a partition too)."""

        def probe() -> dict[str, Any] | None:
            s = self.status(name)
            if s.get("phase") != "Moving" or not self.futures():
                return None
            if partial and not 0 < int(s.get("bytesDone") or 0) < int(s.get("bytesTotal") or 0):
                return None
            return s

        status: dict[str, Any] = self.wait(f"{name} mid-move", probe)
        return status

    def elsewhere(self, partitions: list[int]) -> dict[int, str]:
        """Each partition's next directory among the first three (the fourth fails later)."""
        where = self.placement()
        return {p: self.dirs[(self.dirs.index(where[p]) + 1) % 3] for p in partitions}

    def skew(self, name: str) -> str:
        """Put every partition of the SKEWED topic (made and filled on first use: eight half
        megabytes, which four disks hold two each inside the planner's balance band) onto the
        first directory, through Reassignment ``name``; returns that directory."""
        hot = self.dirs[0]
        if SKEWED not in self.admin.list_topics():
            self.admin.create_topics(
                [NewTopic(SKEWED, num_partitions=SKEWED_PARTITIONS, replication_factor=1)]
            )
            produce(self.broker.bootstrap, SKEWED, SKEWED_PARTITIONS, SKEWED_RECORDS)
        self.create(name, [
            {"topic": SKEWED, "partition": p, "replicas": [1], "logDirs": [hot]}
            for p in range(SKEWED_PARTITIONS)
        ])  # fmt: skip
        assert self.wait_phase(name, "Completed", "Failed")["phase"] == "Completed"
        return hot

    def run_planner_job(self, name: str) -> subprocess.CompletedProcess[str]:
        """Run the planner Job's own command (no node in this control plane, so its Pod cannot
        start here; the same program and arguments run beside it, against the same broker and
        API server, and write the same ConfigMap)."""
        job = self.wait(f"Job {name}", lambda: self.ns.get("job", name))
        command = job["spec"]["template"]["spec"]["containers"][0]["command"]
        assert command[:4] == ["python3", "-P", "-m", "spindle.operator.workloads.plan_job"]
        env = {**self.operator.kube.env, "PYTHONUNBUFFERED": "1"}
        return subprocess.run(
            [sys.executable, *command[1:]], env=env, cwd=self.operator.workdir,
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip

    def fail_fourth_dir(self) -> str:
        """Remount the fourth tmpfs read-only and write to its canary until the broker says the
        directory is offline (DescribeLogDirs KAFKA_STORAGE_ERROR); returns its path."""
        failed = self.dirs[3]
        canary = next(p for p, d in self.placement(CANARY).items() if d == failed)
        remount_read_only(failed)
        producer = KafkaProducer(bootstrap_servers=self.broker.bootstrap, acks=1, retries=0)

        def offline() -> bool:
            with contextlib.suppress(KafkaError):
                producer.send(CANARY, b"x" * 100, partition=canary).get(timeout=5)
            dirs = self.admin.describe_log_dirs(brokers=[self.broker.node_id])[0]["log_dirs"]
            return any(d["log_dir"] == failed and d["error_code"] != 0 for d in dirs)

        self.wait("the fourth directory offline", offline, timeout=60)
        producer.close()
        return failed

    def made_by(self, rebalance: str) -> set[str]:
        """Reassignments a Rebalance created (they carry its label)."""
        out = self.ns.kubectl(
            "get", "reassignments", "-l", f"spindle.io/rebalance={rebalance}", "-o", "json"
        )
        return {item["metadata"]["name"] for item in json.loads(out.stdout)["items"]}


def planner_account(kube: Any, namespace: str) -> None:
    """The planner's ServiceAccount, Role and RoleBinding in ``namespace``, as the chart renders
    them for a namespace in its ``planner.namespaces``."""
    manifest = kube.helm(
        "template", "t", str(ROOT / "charts" / "spindle"), "--show-only",
        "templates/planner.yaml", "--set", f"planner.namespaces={{{namespace}}}",
    ).stdout  # fmt: skip
    kube.kubectl("apply", "-f", "-", input=manifest)


@pytest.fixture(scope="module")
def world_dashboard() -> bool:
    """Whether the world's operator also serves the dashboard (tests/dashboard says yes)."""
    return False


@pytest.fixture(scope="module")
def world(
    spindle_crds: Any, etcd: Etcd, tmp_path_factory: pytest.TempPathFactory, world_dashboard: bool
) -> Iterator[World]:
    """One broker (node id 1) on four 24 MB tmpfs directories (``disks/data-0`` to ``data-3``)
    with a ``moves`` topic (3 partitions of 2 MB) and a ``canary`` (one partition per directory,
    so that the fourth can be failed for real by writing to its canary), and ``spindle-operator
    run`` serving ``ra-*`` namespaces with ``--bootstrap loop=<broker>``, for the whole module.
    Needs root (mounts)."""
    base = tmp_path_factory.mktemp("reassign")
    with contextlib.ExitStack() as stack:
        # Named as the operator names a volume's mount (data-<id>), so that a Broker object
        # declaring volumes 0-3 gets LogVolumes reporting these very directories.
        disks = base / "disks"
        dirs = [stack.enter_context(tmpfs(disks / f"data-{i}", "24m")) for i in range(4)]
        # One mover thread: partitions are copied one after another, so progress is seen
        # partition by partition (see World.wait_moving).
        extra = {"file.delete.delay.ms": "0", "num.replica.alter.log.dirs.threads": "1"}
        broker = make_broker(base / "broker", etcd, log_dirs=dirs, extra=extra)
        broker.start()
        stack.callback(broker.stop)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        # One canary partition per directory first (fewest-logs placement).
        admin.create_topics([NewTopic(CANARY, num_partitions=4, replication_factor=1)])
        admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
        admin.close()
        produce(broker.bootstrap, TOPIC, PARTITIONS, RECORDS)
        operator = OperatorProcess(
            spindle_crds, base, "--namespace", "ra-*", "--bootstrap",
            f"{CLUSTER}={broker.bootstrap}", dashboard=free_port() if world_dashboard else None,
        )  # fmt: skip
        operator.start()
        stack.callback(operator.stop)
        ns = stack.enter_context(temporary_namespace(spindle_crds, "ra"))
        planner_account(spindle_crds, ns.namespace)
        w = World(broker, dirs, operator, ns)
        stack.callback(w.admin.close)
        yield w
