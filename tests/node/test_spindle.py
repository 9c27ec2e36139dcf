"""Spindle on the node, as a user installs it: ``helm install`` runs the operator as a Pod (with
the chart's ServiceAccount) from Spindle's locally built image, and an etcd; the example cluster
becomes three broker Pods Running with their volumes at their ``log.dirs``, registered in etcd;
a Kafka client on this machine produces and consumes through them; a deleted broker Pod comes
back on the same claims with its data."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from controlplane import Binaries, LocalControlPlane, volumes
from controlplane.node import cluster_dns_command

from .kit import RELEASE, SYSTEM, Kit, install_spindle, pod_ready

ROOT = Path(__file__).resolve().parents[2]
DEMO = "spindle-demo"
BROKERS = ("demo-0", "demo-1", "demo-2")
LOG_DIRS = [f"/var/lib/spindle/data-{v}" for v in range(3)]


@dataclass
class Release:
    kube: LocalControlPlane
    image: str
    demo: Kit


@pytest.fixture(scope="module")
def release(node_cluster: LocalControlPlane) -> Iterator[Release]:
    image = install_spindle(node_cluster)
    node_cluster.kubectl("create", "namespace", DEMO)
    node_cluster.kubectl("apply", "-n", DEMO, "-f", str(ROOT / "examples" / "cluster.yaml"))
    demo = Kit(node_cluster, DEMO, image)
    for broker in BROKERS:
        demo.wait_for(lambda b=broker: pod_ready(demo, b), what=f"Pod {broker} Ready", timeout=300)
    yield Release(node_cluster, image, demo)
    node_cluster.kubectl("delete", "namespace", DEMO, "--wait=false")
    node_cluster.helm("uninstall", RELEASE, "--namespace", SYSTEM, check=False)


def client(release: Release, tool: str, *args: str, input: str | None = None) -> str:
    """Kafka's console ``tool`` run on this machine, outside any Pod, resolving the brokers'
    advertised names through the cluster's DNS."""
    layout = release.kube.node_layout
    assert layout is not None
    bootstrap = ",".join(f"{b}.{DEMO}.svc:9092" for b in BROKERS)
    command = cluster_dns_command(layout, [tool, "--bootstrap-server", bootstrap, *args])
    done = subprocess.run(
        command, input=input, capture_output=True, text=True, timeout=180, env=release.kube.env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_operator_runs_as_a_pod_of_the_local_image_with_the_charts_service_account(
    release: Release,
) -> None:
    (pod,) = json.loads(
        release.kube.kubectl(
            "get", "pods", "-n", SYSTEM, "-l", "app.kubernetes.io/name=spindle-operator",
            "-o", "json",
        ).stdout
    )["items"]  # fmt: skip
    assert pod["status"]["phase"] == "Running"
    assert pod["spec"]["serviceAccountName"] == "spindle-operator"
    assert pod["spec"]["containers"][0]["image"] == release.image


def test_brokers_run_with_each_volume_its_own_file_system_at_its_log_dir(release: Release) -> None:
    for broker in BROKERS:
        assert pod_ready(release.demo, broker)
        broker_status = release.demo.get("broker", broker)["status"]
        assert broker_status["podName"] == broker
        assert broker_status["logDirs"] == LOG_DIRS
        # In the container: every log dir is a mount point, each on its own device.
        script = (
            "import os, sys; dirs = sys.argv[1:]; "
            "print(all(os.path.ismount(d) for d in dirs), len({os.stat(d).st_dev for d in dirs}))"
        )
        out = release.kube.kubectl(
            "exec", "-n", DEMO, broker, "--", "python", "-c", script, *LOG_DIRS
        ).stdout
        assert out.split() == ["True", "3"]


def test_brokers_register_in_the_charts_etcd(release: Release) -> None:
    (etcd,) = json.loads(
        release.kube.kubectl(
            "get", "pods", "-n", SYSTEM, "-l", "app.kubernetes.io/component=etcd", "-o", "json"
        ).stdout
    )["items"]
    prefix = b"/spindle/demo/brokers/"
    body = json.dumps(
        {
            "key": base64.b64encode(prefix).decode(),
            "range_end": base64.b64encode(prefix[:-1] + b"0").decode(),  # '/' + 1
            "keys_only": True,
        }
    ).encode()
    # etcd's JSON gateway, straight to the Pod's IP (the host routes the node's Pod network).
    request = urllib.request.Request(
        f"http://{etcd['status']['podIP']}:2379/v3/kv/range", data=body, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        kvs = json.load(response).get("kvs", [])
    keys = sorted(base64.b64decode(kv["key"]).decode() for kv in kvs)
    assert keys == [f"/spindle/demo/brokers/{i}" for i in range(3)]


def test_a_client_on_this_machine_produces_and_consumes_through_the_brokers(
    release: Release,
) -> None:
    records = [f"order-{i}" for i in range(10)]
    client(release, "kafka-console-producer", "--topic", "orders", input="\n".join(records) + "\n")
    consumed = client(
        release, "kafka-console-consumer", "--topic", "orders", "--from-beginning",
        "--max-messages", "10", "--timeout-ms", "60000",
    )  # fmt: skip
    assert sorted(consumed.split()) == sorted(records)


def test_a_deleted_broker_pod_comes_back_on_the_same_claims_with_its_data(
    release: Release,
) -> None:
    demo = release.demo
    # The broker holding partition orders-0: its directory is on one of that broker's PVs,
    # which the host sees where the provisioner mounted them.
    volumes_dir = release.kube.state_dir / "volumes"
    holder, claims = None, {}
    for broker in BROKERS:
        claims = {v: demo.get("pvc", f"data-{v}-{broker}")["spec"]["volumeName"] for v in range(3)}
        if any((volumes_dir / pv / "orders-0").is_dir() for pv in claims.values()):
            holder = broker
            break
    assert holder is not None, "no broker holds orders-0 (the produce test runs first)"
    old_uid = demo.get("pod", holder)["metadata"]["uid"]
    release.kube.kubectl("delete", "pod", "-n", DEMO, holder, "--wait=true")

    def recreated() -> bool:
        # Until the operator has made the new Pod there is none of that name.
        found = release.kube.kubectl(
            "get", "pod", "-n", DEMO, holder, "-o", "json", check=False
        )  # fmt: skip
        if found.returncode != 0:
            return False
        pod = json.loads(found.stdout)
        return bool(
            pod["metadata"]["uid"] != old_uid and pod.get("status", {}).get("phase") == "Running"
        )

    demo.wait_for(recreated, what=f"the operator to recreate Pod {holder}", timeout=180)
    pod = demo.get("pod", holder)
    mounted = {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert mounted == {f"data-{v}-{holder}" for v in range(3)}
    assert {
        v: demo.get("pvc", f"data-{v}-{holder}")["spec"]["volumeName"] for v in range(3)
    } == claims
    consumed = client(
        release, "kafka-console-consumer", "--topic", "orders", "--from-beginning",
        "--max-messages", "10", "--timeout-ms", "60000",
    )  # fmt: skip
    assert sorted(consumed.split()) == sorted(f"order-{i}" for i in range(10))


SPARK_JOB = """\
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("spindle-image-check").getOrCreate()
total = spark.sparkContext.parallelize(range(1000), 2).map(lambda x: x * x).sum()
print(f"SUM-OF-SQUARES {total}")
spark.stop()
"""
#: The driver Pod mounts the job from a ConfigMap (cluster mode runs local:// files).
DRIVER_TEMPLATE = """\
apiVersion: v1
kind: Pod
spec:
  containers:
    - name: spark-kubernetes-driver
      volumeMounts: [{name: job, mountPath: /job}]
  volumes:
    - name: job
      configMap: {name: spark-job}
"""


def test_spark_on_kubernetes_runs_its_driver_and_executor_from_the_same_image(
    release: Release, tmp_path: Path
) -> None:
    """spark-submit in cluster mode: the image's entrypoint turns Spark's ``driver`` and
    ``executor`` arguments into the driver (spark-submit in client mode inside the Pod) and an
    executor Pod that registers with it and runs the job's tasks."""
    import pyspark

    kube, namespace = release.kube, "spark-check"
    kube.kubectl("create", "namespace", namespace)
    kube.kubectl("create", "configmap", "spark-job", "-n", namespace, "--from-literal",
                 f"job.py={SPARK_JOB}")  # fmt: skip
    kube.kubectl("create", "serviceaccount", "spark", "-n", namespace)
    kube.kubectl("create", "rolebinding", "spark", "-n", namespace, "--clusterrole=edit",
                 f"--serviceaccount={namespace}:spark")  # fmt: skip
    # spark-submit's Kubernetes client (fabric8) cannot read EC keys in PKCS#8, which the
    # admin kubeconfig holds: it submits with the ServiceAccount's token instead.
    token = kube.kubectl("create", "token", "spark", "-n", namespace).stdout.strip()
    kubeconfig = tmp_path / "spark.kubeconfig"
    env = dict(kube.env, KUBECONFIG=str(kubeconfig))
    for args in (
        ["set-cluster", "c", f"--server={kube.server}", "--embed-certs",
         f"--certificate-authority={kube.state_dir / 'pki' / 'ca.crt'}"],
        ["set-credentials", "spark", f"--token={token}"],
        ["set-context", "c", "--cluster=c", "--user=spark", f"--namespace={namespace}"],
        ["use-context", "c"],
    ):  # fmt: skip
        subprocess.run([str(Binaries.find().kubectl), "config", *args], env=env, check=True,
                       capture_output=True)  # fmt: skip
    template = tmp_path / "driver.yaml"
    template.write_text(DRIVER_TEMPLATE)
    spark_home = Path(pyspark.__file__).parent
    conf = {
        "spark.kubernetes.namespace": namespace,
        "spark.kubernetes.container.image": release.image,
        "spark.kubernetes.container.image.pullPolicy": "Never",
        "spark.kubernetes.authenticate.driver.serviceAccountName": "spark",
        "spark.kubernetes.driver.podTemplateFile": str(template),
        "spark.executor.instances": "1",
        "spark.kubernetes.driver.request.cores": "100m",
        "spark.kubernetes.executor.request.cores": "100m",
        "spark.driver.memory": "512m",
        "spark.executor.memory": "512m",
        "spark.kubernetes.submission.waitAppCompletion": "true",
    }
    submit = [str(spark_home / "bin" / "spark-submit"), "--master", f"k8s://{kube.server}",
              "--deploy-mode", "cluster", "--name", "check"]  # fmt: skip
    for key, value in conf.items():
        submit += ["--conf", f"{key}={value}"]
    # The driver's Python is the image's (its PYSPARK_PYTHON); this one's would be sent along.
    env.pop("PYSPARK_PYTHON", None)
    env["SPARK_HOME"] = str(spark_home)
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    done = subprocess.run([*submit, "local:///job/job.py"], env=env, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    driver = kube.kubectl("get", "pods", "-n", namespace, "-l", "spark-role=driver", "-o",
                          "jsonpath={.items[0].metadata.name}").stdout  # fmt: skip
    log = kube.kubectl("logs", "-n", namespace, driver).stdout
    assert "Registered executor" in log, log[-3000:]
    assert f"SUM-OF-SQUARES {sum(x * x for x in range(1000))}" in log
    kube.kubectl("delete", "namespace", namespace, "--wait=false")


def test_the_operator_pod_serves_its_prometheus_metrics_behind_the_charts_service(
    release: Release,
) -> None:
    """The chart runs the operator with ``--metrics``; its Service says where to scrape. A
    scrape of the Pod (the host routes the node's Pod network) shows the demo's nine LogVolumes
    (at least: the operator watches every namespace, and LogVolumes an earlier module of the
    session left in a namespace still being deleted count too -- the suite found 15)."""
    service = json.loads(
        release.kube.kubectl("get", "service", "-n", SYSTEM, f"{RELEASE}-operator-metrics", "-o", "json")
        .stdout
    )  # fmt: skip
    assert service["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    (pod,) = json.loads(
        release.kube.kubectl(
            "get", "pods", "-n", SYSTEM, "-l", "app.kubernetes.io/name=spindle-operator",
            "-o", "json",
        ).stdout
    )["items"]  # fmt: skip
    url = f"http://{pod['status']['podIP']}:{service['spec']['ports'][0]['port']}/metrics"

    def volumes() -> float | None:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        total = sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("spindle_operator_logvolumes{")
        )
        return total if total >= 9 else None

    assert release.demo.wait_for(volumes, what="nine LogVolumes in /metrics", timeout=120) >= 9


def _set_volumes(release: Release, broker: str, volumes: list[dict[str, object]]) -> None:
    patch = json.dumps({"spec": {"volumes": volumes}})
    release.kube.kubectl("patch", "broker", "-n", DEMO, broker, "--type=merge", "-p", patch)


def _lv_state(release: Release, name: str) -> str | None:
    state = (release.demo.get("logvolume", name).get("status") or {}).get("state")
    return str(state) if state else None


def test_drained_volumes_are_released_on_real_claims_one_deleted_one_kept(
    release: Release,
) -> None:
    """On real volumes: removing a volume that holds replicas is refused; drained (``Empty``)
    and removed, demo-2's volume 2 (``deleteClaim: true``) is Released and its claim and PV
    are deleted, demo-1's volume 1 (``deleteClaim: false``) is Released and its claim kept,
    Bound, with its data; the brokers run on without them and no record is lost."""
    demo, kube = release.demo, release.kube
    client(release, "kafka-topics", "--create", "--topic", "shed", "--partitions", "9",
           "--replication-factor", "2")  # fmt: skip
    records = [f"shed-{i}" for i in range(200)]
    client(release, "kafka-console-producer", "--topic", "shed", "--producer-property",
           "acks=all", input="\n".join(records) + "\n")  # fmt: skip
    for name in ("demo-2-data-2", "demo-1-data-1"):
        demo.wait_for(
            lambda n=name: (demo.get("logvolume", n).get("status") or {}).get("replicaCount"),
            what=f"replicas in {name}",
            timeout=120,
        )
    two = [{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi"}]
    _set_volumes(release, "demo-2", two)

    def refused() -> dict[str, object] | None:
        conditions = (demo.get("broker", "demo-2").get("status") or {}).get("conditions") or []
        found = {c["type"]: c for c in conditions}.get("Reconciled") or {}
        return found if found.get("reason") == "VolumeRemovalRefused" else None

    condition = demo.wait_for(refused, what="the removal of a full volume refused")
    assert "its LogVolume is Active" in str(condition["message"])
    assert _lv_state(release, "demo-2-data-2") == "Active"
    demo_two = [*two, {"id": 2, "size": "1Gi", "deleteClaim": True}]
    _set_volumes(release, "demo-2", demo_two)
    demo.wait_for(lambda: refused() is None, what="the refusal withdrawn")

    deleted_pv = demo.get("pvc", "data-2-demo-2")["spec"]["volumeName"]
    kept = demo.get("pvc", "data-1-demo-1")
    for name in ("demo-2-data-2", "demo-1-data-1"):
        kube.kubectl("patch", "logvolume", "-n", DEMO, name, "--type=merge", "-p",
                     json.dumps({"spec": {"desiredState": "Drained"}}))  # fmt: skip
    for name in ("demo-2-data-2", "demo-1-data-1"):
        demo.wait_for(lambda n=name: _lv_state(release, n) == "Empty", what=f"{name} Empty",
                      timeout=300)  # fmt: skip
    _set_volumes(release, "demo-2", two)
    _set_volumes(release, "demo-1", [{"id": 0, "size": "1Gi"}, {"id": 2, "size": "1Gi",
                                                                 "deleteClaim": True}])  # fmt: skip
    for name in ("demo-2-data-2", "demo-1-data-1"):
        demo.wait_for(lambda n=name: _lv_state(release, n) == "Released", what=f"{name} Released",
                      timeout=180)  # fmt: skip
    released = demo.get("logvolume", "demo-2-data-2")["status"]
    assert released["claimKept"] is False
    demo.wait_for(
        lambda: (
            kube.kubectl("get", "pvc", "-n", DEMO, "data-2-demo-2", check=False).returncode != 0
        ),
        what="claim data-2-demo-2 deleted (once the Pod that mounted it is replaced)",
        timeout=300,
    )
    demo.wait_for(
        lambda: kube.kubectl("get", "pv", deleted_pv, check=False).returncode != 0,
        what=f"its PersistentVolume {deleted_pv} deleted (reclaim policy Delete)",
        timeout=180,
    )
    assert demo.get("logvolume", "demo-1-data-1")["status"]["claimKept"] is True
    claim = demo.get("pvc", "data-1-demo-1")
    assert claim["metadata"]["uid"] == kept["metadata"]["uid"]
    assert claim["metadata"]["labels"]["spindle.io/released"] == "true"
    assert claim["status"]["phase"] == "Bound"
    assert claim["spec"]["volumeName"] == kept["spec"]["volumeName"]
    for broker, dirs in (("demo-2", LOG_DIRS[:2]), ("demo-1", [LOG_DIRS[0], LOG_DIRS[2]])):
        demo.wait_for(
            lambda b=broker, d=dirs: (
                pod_ready(demo, b)
                and {
                    v["persistentVolumeClaim"]["claimName"]
                    for v in demo.get("pod", b)["spec"]["volumes"]
                    if "persistentVolumeClaim" in v
                }
                == {f"data-{p.rsplit('-', 1)[1]}-{b}" for p in d}
            ),
            what=f"Pod {broker} Ready on its remaining volumes",
            timeout=300,
        )
    consumed = client(
        release, "kafka-console-consumer", "--topic", "shed", "--from-beginning",
        "--max-messages", str(len(records)), "--timeout-ms", "60000",
    )  # fmt: skip
    assert sorted(consumed.split()) == sorted(records)


CLIENT = Path(__file__).with_name("kafka_on_node.py")


def on_node(release: Release, *args: str) -> Any:
    """``kafka_on_node.py`` (kafka-python) run on the node, resolving the brokers' advertised
    names through the cluster's DNS; its JSON answer."""
    layout = release.kube.node_layout
    assert layout is not None
    bootstrap = ",".join(f"{b}.{DEMO}.svc:9092" for b in BROKERS)
    command = cluster_dns_command(
        layout, [sys.executable, "-P", str(CLIENT), "--bootstrap", bootstrap, *args]
    )
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=600, env=release.kube.env
    )
    err = done.stderr
    assert done.returncode == 0, err if len(err) < 8000 else f"{err[:3000]}\n...\n{err[-5000:]}"
    return json.loads(done.stdout)


def _reachable(release: Release) -> None:
    """Wait until a client on the node resolves and connects to every broker's advertised
    name. A Pod the operator replaced is Ready a moment before the cluster's DNS and the
    node's routes lead to its new address; a client started in that moment cannot bootstrap
    (seen in CI: ``Connection timed out`` to demo-2 right after its Pod was replaced)."""
    seen: list[dict[str, str]] = []

    def every_broker() -> bool:
        seen.append(on_node(release, "reach"))
        return all(v.startswith("ok ") for v in seen[-1].values())

    try:
        release.demo.wait_for(
            every_broker, what="every broker reachable from the node", timeout=120
        )
    except AssertionError as e:
        raise AssertionError(f"{e}; last answers: {seen[-3:]}") from None


def _desire(release: Release, name: str, state: str, **more: object) -> None:
    patch = json.dumps({"spec": {"desiredState": state, **more}})
    release.kube.kubectl("patch", "logvolume", "-n", DEMO, name, "--type=merge", "-p", patch)


def _operator_pod(release: Release) -> dict[str, Any] | None:
    out = release.kube.kubectl(
        "get", "pods", "-n", SYSTEM, "-l", "app.kubernetes.io/name=spindle-operator",
        "-o", "json",
    ).stdout  # fmt: skip
    live = [p for p in json.loads(out)["items"] if not p["metadata"].get("deletionTimestamp")]
    return live[0] if live else None


#: demo-0's directories cordoned while the new topics are created.
CORDONED = ("demo-0-data-1", "demo-0-data-2")
#: fresh: replicated on every broker, so demo-0 holds all of its partitions; heavy: what the
#: drain below carries to other brokers (twice replicated, 10 MB per partition).
FRESH_PARTITIONS = 24
HEAVY_PARTITIONS, HEAVY_RECORDS, HEAVY_SIZE = 4, 100, 100_000


def test_new_topics_place_no_replica_in_a_cordoned_directory(release: Release) -> None:
    """Two of demo-0's three directories cordoned (``desiredState: Cordoned`` → the broker's
    ``cordoned.log.dirs``, KIP-1066): a topic of 24 partitions replicated on every broker puts
    all 24 of demo-0's replicas in its one open directory, none in the cordoned ones; so does
    a second topic."""
    demo = release.demo
    for name in CORDONED:
        _desire(release, name, "Cordoned")
    for name in CORDONED:
        demo.wait_for(lambda n=name: _lv_state(release, n) == "Cordoned", what=f"{name} Cordoned")
        assert demo.get("logvolume", name)["status"]["cordoned"] is True
    _reachable(release)
    on_node(release, "create", "--topic", "fresh", "--partitions", str(FRESH_PARTITIONS),
            "--replication", "3")  # fmt: skip
    on_node(release, "create", "--topic", "heavy", "--partitions", str(HEAVY_PARTITIONS),
            "--replication", "2")  # fmt: skip
    heavy = on_node(release, "replicas", "--topic", "heavy", "--partitions", "0")
    wanted = FRESH_PARTITIONS + sum(0 in r for r in heavy.values())

    def placed() -> dict[str, list[str]] | None:
        dirs = on_node(release, "dirs", "--brokers", "0")["0"]
        found = {
            d: sorted(tp for tp in parts if tp.split("-")[0] in ("fresh", "heavy"))
            for d, parts in dirs.items()
        }
        return found if sum(map(len, found.values())) == wanted else None

    found = demo.wait_for(placed, what=f"broker 0 holding its {wanted} new replicas", timeout=120)
    print(
        "\nnew replicas on broker 0: "
        + ", ".join(f"{d} {len(t)}" for d, t in sorted(found.items()))
    )
    assert found[LOG_DIRS[1]] == []
    assert found[LOG_DIRS[2]] == []
    assert len(found[LOG_DIRS[0]]) == wanted


def _heavy_digest(partition: int) -> str:
    digest = hashlib.sha256()
    for seq in range(HEAVY_RECORDS):
        digest.update(f"{partition}:{seq}:".encode().ljust(HEAVY_SIZE, b"x"))
    return digest.hexdigest()


def _leave_free(mount: Path, free: int) -> None:
    """Allocate (fallocate: no data written) all but ``free`` bytes of the file system at
    ``mount`` to one file, ``volumes.FILLER`` (``volumes.restore(..., Failure.FULL)`` removes it)."""
    stat = os.statvfs(mount)
    size = stat.f_bavail * stat.f_frsize - free
    assert size > 0, f"{mount} has less than {free} bytes free"
    fd = os.open(mount / volumes.FILLER, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)


#: Throttle of the drain's copies to other brokers (LogVolume ``spec.drainBytesPerSecond``).
DRAIN_RATE = 1024 * 1024


def test_a_drain_finishes_after_the_operator_is_killed_mid_drain(release: Release) -> None:
    """demo-0's directory data-0 holds ~20 MB of heavy and many small replicas. Its other
    directories are open again but nearly full (a file leaves them 5 % + 3 MB free): drained at
    1 MiB/s, the small replicas move next door (AlterReplicaLogDirs), heavy's 10 MB ones do not
    fit and go to other brokers (the drain's Reassignment). The operator's Pod is deleted with
    --grace-period=0 --force while that copy runs; the Deployment's new Pod resumes the drain,
    the LogVolume becomes Empty, and every record of heavy reads back byte for byte."""
    demo, kube, target = release.demo, release.kube, "demo-0-data-0"
    on_node(release, "produce", "--topic", "heavy", "--partitions", str(HEAVY_PARTITIONS),
            "--records", str(HEAVY_RECORDS), "--size", str(HEAVY_SIZE))  # fmt: skip
    held = demo.wait_for(
        lambda: [
            p for p in demo.get("logvolume", target).get("status", {}).get("partitions") or []
            if p["topic"] == "heavy" and p["sizeBytes"] >= HEAVY_RECORDS * HEAVY_SIZE
        ],
        what=f"{target} reporting its replicas of heavy",
        timeout=120,
    )  # fmt: skip
    mounts = []
    for name in CORDONED:
        pv = demo.get("logvolume", name)["status"]["pvName"]
        mount = volumes.mount_path(kube.state_dir / "volumes", pv)
        stat = os.statvfs(mount)
        _leave_free(mount, int(stat.f_blocks * stat.f_frsize * 0.05) + 3_000_000)
        mounts.append(mount)
        _desire(release, name, "Active")
    for name in CORDONED:
        demo.wait_for(lambda n=name: _lv_state(release, n) == "Active", what=f"{name} Active")
    try:
        _drain_killing_the_operator(release, target, held)
    finally:
        for mount in mounts:
            (mount / volumes.FILLER).unlink(missing_ok=True)


def _explained(
    release: Release, target: str, probe: Callable[[], Any], what: str, timeout: float = 90
) -> None:
    """Wait for ``probe``; when it does not come, fail with what the drain shows (its status,
    its Reassignment, the drain's Events, the operator's log)."""
    try:
        release.demo.wait_for(probe, what=what, timeout=timeout)
    except AssertionError:
        kube = release.kube
        drain = release.demo.get("logvolume", target).get("status", {}).get("drain")
        moving = kube.kubectl("get", "reassignment", "-n", DEMO, "-o", "yaml", check=False).stdout
        events = kube.kubectl("get", "events", "-n", DEMO, "--sort-by=.lastTimestamp",
                              check=False).stdout  # fmt: skip
        log = kube.kubectl("logs", "-n", SYSTEM, f"deployment/{RELEASE}-operator", "--tail=40",
                           check=False).stdout  # fmt: skip
        raise AssertionError(
            f"timed out waiting for {what}\ndrain: {drain}\n{moving[-3000:]}\n"
            f"events:\n{events[-3000:]}\noperator:\n{log[-3000:]}"
        ) from None


def _drain_killing_the_operator(release: Release, target: str, held: list[dict[str, Any]]) -> None:
    demo, kube = release.demo, release.kube
    started = time.monotonic()
    _desire(release, target, "Drained", drainBytesPerSecond=DRAIN_RATE)
    reassignment = f"drain-{target}"

    def phase() -> str | None:
        found = kube.kubectl("get", "reassignment", "-n", DEMO, reassignment, "-o", "json",
                             check=False)  # fmt: skip
        if found.returncode != 0:
            return None
        return (json.loads(found.stdout).get("status") or {}).get("phase")

    _explained(
        release, target, lambda: phase() in ("Pending", "Moving"), f"Reassignment {reassignment}"
    )
    old = _operator_pod(release)
    assert old is not None
    drain = demo.get("logvolume", target)["status"].get("drain") or {}
    kube.kubectl("delete", "pod", "-n", SYSTEM, old["metadata"]["name"], "--grace-period=0",
                 "--force")  # fmt: skip
    print(
        f"\n{target}: {len(held)} replica(s) of heavy to other brokers; operator killed "
        f"{time.monotonic() - started:.1f} s into the drain ({drain.get('bytesLeft')} bytes, "
        f"{drain.get('replicasLeft')} replicas left)"
    )
    assert _lv_state(release, target) == "Draining"
    assert phase() in ("Pending", "Moving")
    new = demo.wait_for(
        lambda: (
            p
            if (p := _operator_pod(release)) is not None
            and p["metadata"]["uid"] != old["metadata"]["uid"]
            and p["status"].get("phase") == "Running"
            else None
        ),
        what="the operator's new Pod Running",
        timeout=180,
    )
    _explained(release, target, lambda: _lv_state(release, target) == "Empty", f"{target} Empty",
               timeout=600)  # fmt: skip
    print(
        f"{target} Empty {time.monotonic() - started:.1f} s after Drained was asked "
        f"(new operator Pod {new['metadata']['name']})"
    )
    status = demo.get("logvolume", target)["status"]
    assert status["replicaCount"] == 0
    assert status["drain"]["reassignment"] == reassignment
    # The source is empty once the new replicas took over; the Reassignment finishes after
    # (the copies' directories, the throttles removed).
    _explained(
        release, target, lambda: phase() == "Completed", f"Reassignment {reassignment} Completed"
    )
    placed = on_node(release, "replicas", "--topic", "heavy", "--partitions", "0")
    assert all(0 not in placed[str(p["partition"])] for p in held), placed
    small = sum(len(p) for d, p in on_node(release, "dirs", "--brokers", "0")["0"].items()
                if d != LOG_DIRS[0])  # fmt: skip
    assert small >= FRESH_PARTITIONS  # the small replicas stayed on demo-0, next door
    read = on_node(release, "read", "--topic", "heavy", "--partitions", str(HEAVY_PARTITIONS))
    for p in range(HEAVY_PARTITIONS):
        assert read["counts"][str(p)] == HEAVY_RECORDS
        assert read["sha256"][str(p)] == _heavy_digest(p)
