"""A disk's end of life, for real: drained (across brokers when it must), emptied, released.

One scenario for the module: two real broker processes in one elected-controller cluster on
loopback (a real etcd), each log directory its own tmpfs; a real operator process on the local
control plane pointed at them with ``--bootstrap`` and serving ``--metrics``; Broker objects
declaring those directories. In order:

1. broker 2's only directory is drained (``desiredState: Drained``, throttled): it has no
   other directory, so the operator moves its replicas to broker 1 through one Reassignment;
   the operator is SIGKILLed mid-drain and started again, resumes (the same Reassignment, the
   same ``startTime``) and the LogVolume ends ``Empty``; every acked record is consumed from
   broker 1. The operator's ``/metrics`` (scraped for real) shows the drain's bytes while it
   runs, the volumes by state and the reconciles;
2. removing a volume of broker 1 that still holds replicas is refused, with the reason;
3. a volume of broker 1 drained inside the broker (moves throttled by the broker's own
   ``replica.alter.log.dirs.io.max.bytes.per.second``, so they take seconds) while the operator
   is SIGKILLed and started again: the drain resumes (same ``startTime``) and ends ``Empty``;
   removed from the spec with ``deleteClaim: true`` it is ``Released`` and its claim deleted;
4. one with ``deleteClaim: false`` is ``Released`` with its claim kept, and declaring it again
   takes that claim back (the LogVolume leaves Released);
5. with broker 1's other directory really nearly full (a file fills its tmpfs), draining a
   directory of broker 1 sends its replicas to broker 2 instead.

The claims here are API objects without volumes (no node): whether a claim is deleted or kept
is the operator's decision, and that is what this module proves; ``tests/node`` does the same
with real volumes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import pytest
from controlplane import stop_process_group
from kafka import KafkaConsumer, KafkaProducer, TopicPartition, TopicPartitionReplica
from kafka.admin import KafkaAdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        sys.platform != "linux" or os.geteuid() != 0,
        reason="mounts tmpfs for each log directory: needs root (CI runs as root)",
    ),
]

CLUSTER = "c1"
WIDE, WIDE_RECORDS = "wide", 3000  # on broker 2: 3 partitions, ~3 MB
MSGS, MSGS_RECORDS = "msgs", 4800  # on broker 1's three directories, ~1.6 MB each
CROSS_THROTTLE = 500_000  # the cross-broker drain's copies (replication throttle), B/s
THROTTLE = 300_000  # broker 1's directory moves, bytes per second: a drain takes seconds


def _mount(path: Path, size: str) -> None:
    path.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                   check=True)  # fmt: skip


def _umount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], check=False)


class Operator:
    """``spindle-operator run`` as a process a test can SIGKILL and start again."""

    def __init__(self, kube: Any, workdir: Path, namespace: str, bootstrap: str,
                 helpers: dict[str, Any]) -> None:  # fmt: skip
        self.kube, self.workdir, self.namespace, self.bootstrap = (
            kube,
            workdir,
            namespace,
            bootstrap,
        )
        free_port, self.healthy = helpers["free_port"], helpers["healthy"]
        self.metrics_port = free_port()
        self.health = f"http://127.0.0.1:{free_port()}/healthz"
        self.log = workdir / "operator.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**self.kube.env, "PYTHONUNBUFFERED": "1"}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "spindle.operator", "run", "--namespace", self.namespace,
                 "--bootstrap", f"{CLUSTER}={self.bootstrap}", "--probe-period", "1",
                 "--liveness", self.health, "--metrics", f"127.0.0.1:{self.metrics_port}"],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.workdir,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + 90
        while not self.healthy(self.health):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"operator did not start:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.25)

    def kill(self) -> None:
        """SIGKILL the whole process group: no clean-up handler runs."""
        assert self.proc is not None
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, 9)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_process_group(self.proc)

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """A real scrape of the operator's /metrics, parsed by prometheus_client's parser."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }


class Scene:
    def __init__(self, brokers: list[Any], ns: Any, operator: Operator, disks: dict[str, Path]):
        self.brokers, self.ns, self.operator, self.disks = brokers, ns, operator, disks
        self.servers = [b.bootstrap for b in brokers]
        self.sent: dict[str, list[bytes]] = {}

    def lv(self, name: str) -> dict[str, Any]:
        return dict(self.ns.get("logvolume", name) or {})

    def state(self, name: str) -> str | None:
        return (self.lv(name).get("status") or {}).get("state")

    def desire(self, name: str, state: str, **extra: Any) -> None:
        patch = {"spec": {"desiredState": state, **extra}}
        self.ns.kubectl("patch", "logvolume", name, "--type=merge", "-p", json.dumps(patch))

    def set_volumes(self, broker: str, volumes: list[dict[str, Any]]) -> None:
        patch = json.dumps({"spec": {"volumes": volumes}})
        self.ns.kubectl("patch", "broker", broker, "--type=merge", "-p", patch)

    def produce(self, topic: str, count: int, partitions: int) -> None:
        producer = KafkaProducer(bootstrap_servers=self.servers, acks="all", linger_ms=5)
        sent = [f"{topic}-{n}".encode().ljust(1000, b".") for n in range(count)]
        futures = [producer.send(topic, v, partition=n % partitions) for n, v in enumerate(sent)]
        for f in futures:
            f.get(timeout=30)  # every record acked (acks=all)
        producer.close()
        self.sent[topic] = sent

    def consume_all(self, topic: str, partitions: int) -> list[bytes]:
        consumer = KafkaConsumer(bootstrap_servers=self.servers, enable_auto_commit=False,
                                 consumer_timeout_ms=10_000)  # fmt: skip
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        got = [m.value for m in consumer]
        consumer.close()
        return got


@pytest.fixture(scope="module")
def scene(
    spindle_crds: Any,
    etcd: Any,
    tmp_path_factory: pytest.TempPathFactory,
    session_helpers: dict[str, Any],
    broker_factory: Callable[..., Any],
) -> Iterator[Scene]:
    base = tmp_path_factory.mktemp("release")
    disks = {
        "b1-data-0": base / "b1" / "data-0",
        "b1-data-1": base / "b1" / "data-1",
        "b1-data-2": base / "b1" / "data-2",
        "b2-data-0": base / "b2" / "data-0",
    }
    extra = {
        "spindle.etcd.prefix": f"/test/{uuid.uuid4().hex}",
        "spindle.controller.mode": "elected",
        "spindle.controller.lease.ms": "2000",
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
    }
    with ExitStack() as stack:
        for path in disks.values():
            _mount(path, "64m")
            stack.callback(_umount, path)
        brokers = [
            broker_factory(base / "broker1", etcd, node_id=1,
                           extra={**extra, "replica.alter.log.dirs.io.max.bytes.per.second": str(THROTTLE)},
                           log_dirs=[str(disks[f"b1-data-{i}"]) for i in range(3)]),
            broker_factory(base / "broker2", etcd, node_id=2, extra=extra,
                           log_dirs=[str(disks["b2-data-0"])]),
        ]  # fmt: skip
        for b in brokers:
            b.start()
            stack.callback(b.kill)
        admin = KafkaAdminClient(bootstrap_servers=[b.bootstrap for b in brokers])
        stack.callback(admin.close)
        deadline = time.monotonic() + 60
        while len(admin.describe_cluster()["brokers"]) < 2:
            assert time.monotonic() < deadline, "the two brokers did not register"
            time.sleep(0.5)
        admin.create_topics([
            NewTopic(WIDE, -1, replica_assignments={p: [2] for p in range(3)}),
            NewTopic(MSGS, -1, replica_assignments={p: [1] for p in range(6)}),
        ])  # fmt: skip
        ns = stack.enter_context(session_helpers["temporary_namespace"](spindle_crds, "rel"))
        operator = Operator(
            spindle_crds, base, ns.namespace, ",".join(b.bootstrap for b in brokers),
            session_helpers,
        )  # fmt: skip
        operator.start()
        stack.callback(operator.stop)
        volumes = [{"id": 0, "size": "64Mi"}, {"id": 1, "size": "64Mi", "deleteClaim": True},
                   {"id": 2, "size": "64Mi"}]  # fmt: skip
        for name, broker_id, vols in (("b1", 1, volumes), ("b2", 2, volumes[:1])):
            ns.apply(json.dumps({
                "apiVersion": "spindle.io/v1alpha1", "kind": "Broker", "metadata": {"name": name},
                "spec": {"brokerId": broker_id, "cluster": CLUSTER, "volumes": vols},
            }))  # fmt: skip
        world = Scene(brokers, ns, operator, disks)
        world.produce(WIDE, WIDE_RECORDS, 3)
        world.produce(MSGS, MSGS_RECORDS, 6)
        yield world


Metric = tuple[str, tuple[tuple[str, str], ...]]


def _state(state: str) -> Metric:
    return ("spindle_operator_logvolumes", (("state", state),))


DRAINING = _state("Draining")
DRAIN_BYTES: Metric = ("spindle_operator_bytes_moving", (("kind", "drain"),))
BROKER_PASSES: Metric = ("spindle_operator_reconciles_total", (("kind", "Broker"),))


def _gauges(op: Any, at_least: dict[Metric, float], what: str) -> None:
    """Wait until each metric is at least its value: the operator sets its gauges at the end
    of a pass, after writing the statuses the test has just read, so one scrape may come
    between the two."""
    _wait(lambda: all(op.metrics().get(k, 0) >= v for k, v in at_least.items()) or None, what)


def _wait(probe: Callable[[], Any], what: str, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def test_a_lone_directory_drains_to_another_broker_through_an_operator_kill_losing_nothing(
    scene: Scene,
) -> None:
    ns, op = scene.ns, scene.operator
    _wait(lambda: scene.state("b2-data-0") == "Active" and scene.state("b1-data-0") == "Active",
          "the LogVolumes Active")  # fmt: skip
    started = time.monotonic()
    scene.desire("b2-data-0", "Drained", drainBytesPerSecond=CROSS_THROTTLE)

    def moving() -> Any:
        status = scene.lv("b2-data-0").get("status") or {}
        ra = ns.get("reassignment", "drain-b2-data-0") or {}
        return (status.get("state") == "Draining" and (ra.get("status") or {}).get("phase") == "Moving"
                and (status.get("drain") or {}).get("reassignment") and (status, ra))  # fmt: skip

    before, in_flight = _wait(moving, "the drain moving replicas to broker 1")
    _gauges(op, {DRAINING: 1, DRAIN_BYTES: 1}, "the Draining gauges")
    op.kill()  # mid-drain: the Reassignment's state is in its status, the drain's in the LogVolume's
    assert scene.state("b2-data-0") == "Draining"
    op.start()
    done = _wait(lambda: scene.state("b2-data-0") == "Empty" and scene.lv("b2-data-0"),
                 "LogVolume b2-data-0 Empty", timeout=180)  # fmt: skip
    print(f"cross-broker drain of ~{WIDE_RECORDS} kB at {CROSS_THROTTLE} B/s, operator killed "
          f"and restarted on the way: Empty after {time.monotonic() - started:.1f}s")  # fmt: skip
    assert done["status"]["cordoned"] is True
    drain = done["status"]["drain"]
    assert drain["startTime"] == before["drain"]["startTime"]  # resumed, not started again
    assert (drain["bytesLeft"], drain["replicasLeft"]) == (0, 0)
    assert drain["completionTime"]
    assert drain["bytesTotal"] >= WIDE_RECORDS * 1000
    assert drain["reassignment"] == "drain-b2-data-0"
    ra = _wait(lambda: ((r := ns.get("reassignment", "drain-b2-data-0")) or {}).get("status", {})
               .get("phase") == "Completed" and r, "the drain's Reassignment Completed")  # fmt: skip
    assert [p["replicas"] for p in ra["spec"]["partitions"]] == [[1], [1], [1]]
    assert ra["spec"]["throttle"] == {"interBrokerBytesPerSecond": CROSS_THROTTLE}
    assert ra["metadata"]["uid"] == in_flight["metadata"]["uid"]  # the same one, resumed
    assert ra["metadata"]["ownerReferences"][0]["name"] == "b2-data-0"
    assert len(ns.get("reassignments")["items"]) == 1
    across = [e for e in ns.events("DrainStarted") if "other brokers" in e["message"]]
    assert sum(e.get("count") or 1 for e in across) == 1, across
    # No acked record lost, every one now served by broker 1.
    admin = KafkaAdminClient(bootstrap_servers=scene.servers)
    try:
        replicas = [p["replica_nodes"] for p in admin.describe_topics([WIDE])[0]["partitions"]]
    finally:
        admin.close()
    assert replicas == [[1], [1], [1]]
    assert sorted(scene.consume_all(WIDE, 3)) == sorted(scene.sent[WIDE])
    _gauges(
        op,
        {
            _state("Empty"): 1,
            _state("Active"): 3,
            BROKER_PASSES: 1,
            ("spindle_operator_reconciles_total", (("kind", "Reassignment"),)): 1,
            ("spindle_operator_last_reconcile_duration_seconds", (("kind", "Broker"),)): 1e-9,
        },
        "the gauges after the drain",
    )
    conditions = {c["type"]: c for c in ns.get("broker", "b2")["status"]["conditions"]}
    assert conditions["Degraded"]["status"] == "False", conditions


def test_removing_a_volume_that_holds_replicas_is_refused_with_the_reason(scene: Scene) -> None:
    ns = scene.ns
    _wait(lambda: (scene.lv("b1-data-1").get("status") or {}).get("replicaCount"),
          "replicas in b1-data-1")  # fmt: skip
    scene.set_volumes("b1", [{"id": 0, "size": "64Mi"}, {"id": 2, "size": "64Mi"}])

    def refused() -> Any:
        conditions = (ns.get("broker", "b1").get("status") or {}).get("conditions") or []
        c = {x["type"]: x for x in conditions}.get("Reconciled") or {}
        return c.get("reason") == "VolumeRemovalRefused" and c

    condition = _wait(refused, "the removal refused")
    assert condition["status"] == "False"
    assert "volume 1: removal is refused because its LogVolume is Active" in condition["message"]
    assert "desiredState to Drained" in condition["message"]
    _wait(lambda: ns.events("VolumeRemovalRefused"), "a VolumeRemovalRefused Event")
    assert ns.get("pvc", "data-1-b1") is not None
    assert scene.state("b1-data-1") == "Active"
    scene.set_volumes("b1", [{"id": 0, "size": "64Mi"}, {"id": 1, "size": "64Mi", "deleteClaim": True},
                             {"id": 2, "size": "64Mi"}])  # fmt: skip
    _wait(lambda: not refused(), "the refusal cleared with the volume declared again")


def test_a_drain_survives_an_operator_kill_and_the_emptied_volume_is_released_and_deleted(
    scene: Scene,
) -> None:
    ns, op = scene.ns, scene.operator
    scene.desire("b1-data-1", "Drained")

    def moving() -> Any:
        status = scene.lv("b1-data-1").get("status") or {}
        drain = status.get("drain") or {}
        return status.get("state") == "Draining" and drain.get("bytesLeft", 0) > 0 and status

    before = _wait(moving, "b1-data-1 Draining")
    _gauges(op, {DRAINING: 1, DRAIN_BYTES: 1}, "the Draining gauges")
    op.kill()  # mid-drain: what the drain needs is in the LogVolume's status and the broker
    assert scene.state("b1-data-1") == "Draining"
    op.start()
    done = _wait(lambda: scene.state("b1-data-1") == "Empty" and scene.lv("b1-data-1"),
                 "b1-data-1 Empty", timeout=180)  # fmt: skip
    drain = done["status"]["drain"]
    assert drain["startTime"] == before["drain"]["startTime"]  # resumed, not started again
    assert (drain["bytesLeft"], drain["replicasLeft"]) == (0, 0)
    assert drain["bytesTotal"] >= before["drain"]["bytesLeft"]
    assert sorted(scene.consume_all(MSGS, 6)) == sorted(scene.sent[MSGS])

    uid = ns.get("pvc", "data-1-b1")["metadata"]["uid"]
    scene.set_volumes("b1", [{"id": 0, "size": "64Mi"}, {"id": 2, "size": "64Mi"}])
    lv = _wait(lambda: scene.state("b1-data-1") == "Released" and scene.lv("b1-data-1"),
               "b1-data-1 Released")  # fmt: skip
    assert lv["status"]["claimKept"] is False
    assert lv["status"]["releasedTime"]
    assert lv["metadata"]["labels"]["spindle.io/released"] == "true"
    ready = {c["type"]: c for c in lv["status"]["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "Released")
    assert "data-1-b1 deleted" in ready["message"]
    _wait(lambda: (c := ns.get("pvc", "data-1-b1")) is None or c["metadata"]["uid"] != uid,
          "claim data-1-b1 deleted")  # fmt: skip
    assert any("deleted PVC data-1-b1" in e["message"] for e in ns.events("VolumeReleased"))
    _gauges(op, {_state("Released"): 1}, "the Released gauge")


def test_without_delete_claim_the_claim_is_kept_and_declaring_the_id_again_takes_it_back(
    scene: Scene,
) -> None:
    ns = scene.ns
    scene.desire("b1-data-2", "Drained")
    _wait(lambda: scene.state("b1-data-2") == "Empty", "b1-data-2 Empty", timeout=120)
    uid = ns.get("pvc", "data-2-b1")["metadata"]["uid"]
    scene.set_volumes("b1", [{"id": 0, "size": "64Mi"}])
    lv = _wait(lambda: scene.state("b1-data-2") == "Released" and scene.lv("b1-data-2"),
               "b1-data-2 Released")  # fmt: skip
    assert lv["status"]["claimKept"] is True
    claim = ns.get("pvc", "data-2-b1")
    assert claim["metadata"]["uid"] == uid
    assert claim["metadata"]["labels"]["spindle.io/released"] == "true"
    assert sorted(scene.consume_all(MSGS, 6)) == sorted(scene.sent[MSGS])

    scene.set_volumes("b1", [{"id": 0, "size": "64Mi"}, {"id": 2, "size": "64Mi"}])
    back = _wait(lambda: scene.state("b1-data-2") == "Active" and scene.lv("b1-data-2"),
                 "b1-data-2 Active again")  # fmt: skip
    assert back["spec"]["desiredState"] == "Active"
    assert "spindle.io/released" not in back["metadata"]["labels"]
    assert "claimKept" not in back["status"]
    assert back["status"]["cordoned"] is False
    claim = ns.get("pvc", "data-2-b1")
    assert claim["metadata"]["uid"] == uid
    assert "spindle.io/released" not in claim["metadata"]["labels"]
    assert ns.events("VolumeReattached")
    # The deleted one stays Released: its id is not declared.
    assert scene.state("b1-data-1") == "Released"


def test_replicas_that_do_not_fit_in_the_brokers_other_directories_go_to_another_broker(
    scene: Scene,
) -> None:
    """Broker 1's other declared directory is (really) nearly full: draining b1-data-2 sends
    its replicas to broker 2 rather than into a disk they would fill."""
    ns = scene.ns
    scene.desire("b2-data-0", "Active")
    _wait(lambda: scene.state("b2-data-0") == "Active", "b2-data-0 Active again")
    spill_dir = str(scene.disks["b1-data-2"])
    admin = KafkaAdminClient(bootstrap_servers=scene.servers)
    try:
        admin.create_topics([NewTopic("spill", -1, replica_assignments={0: [1], 1: [1]})])

        def placed() -> bool:
            answer = admin.alter_replica_log_dirs(
                {TopicPartitionReplica("spill", p, 1): spill_dir for p in (0, 1)}
            )
            return all(e is None or e.__name__ == "NoError" for e in answer.values())

        _wait(placed, "both spill replicas in b1-data-2")
    finally:
        admin.close()
    scene.produce("spill", 2000, 2)
    _wait(lambda: (s := scene.lv("b1-data-2").get("status") or {}).get("replicaCount") == 2
          and s.get("usedBytes", 0) >= 2000 * 1000 and s, "the spill bytes in b1-data-2")  # fmt: skip
    full = scene.lv("b1-data-0")["status"]
    # Leave data-0 less room than one spill partition (~1 MB) above the drain's 5 % reserve.
    filler = scene.disks["b1-data-0"] / "filler"
    room = full["usableBytes"] - int(0.05 * full["totalBytes"]) - 200_000
    with filler.open("wb") as f:
        f.write(b"\0" * room)
    try:
        _wait(lambda: (scene.lv("b1-data-0")["status"].get("usableBytes") or 1 << 40)
              < full["usableBytes"] - room // 2, "data-0's usable bytes down")  # fmt: skip
        replicas_in_0 = scene.lv("b1-data-0")["status"]["replicaCount"]
        scene.desire("b1-data-2", "Drained")
        done = _wait(lambda: scene.state("b1-data-2") == "Empty" and scene.lv("b1-data-2"),
                     "b1-data-2 Empty", timeout=180)  # fmt: skip
        assert done["status"]["drain"]["reassignment"] == "drain-b1-data-2"
        ra = ns.get("reassignment", "drain-b1-data-2")
        assert sorted(p["replicas"] for p in ra["spec"]["partitions"]) == [[2], [2]]
        assert scene.lv("b1-data-0")["status"]["replicaCount"] == replicas_in_0
        assert sorted(scene.consume_all("spill", 2)) == sorted(scene.sent["spill"])
    finally:
        filler.unlink()
