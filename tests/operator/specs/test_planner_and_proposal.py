"""Pure builders of a Rebalance: the planner Job in both modes, its RBAC, the proposal in
status, and the plan split into Reassignments under the concurrency caps."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from spindle.operator.decisions import proposal
from spindle.operator.decisions.reassignment import ClusterView, DirInfo
from spindle.operator.reconcile.rebalance import parse_duration
from spindle.operator.specs import planner
from spindle.operator.specs.reassignment import build_rebalance_reassignment
from spindle.operator.workloads.plan_job import TEXT_LIMIT, decode, encode

ROOT = Path(__file__).resolve().parents[3]


def rebalance(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "spindle.io/v1alpha1",
        "kind": "Rebalance",
        "metadata": {"name": "rb", "namespace": "kafka", "uid": "u-1"},
        "spec": {"cluster": "c", "mode": "intra-broker", **spec},
    }


def test_job_mode_runs_plan_job_with_spark_in_local_mode() -> None:
    job = planner.build_planner_job(
        rebalance(volumes=[{"brokerId": 2, "volumeId": 1}], mode="remove-volumes"),
        image="spindle:1", bootstrap=["b0:9092", "b1:9092"], plan_job_file="/x/plan_job.py",
    )  # fmt: skip
    assert job["kind"] == "Job"
    assert job["metadata"]["name"] == "rb-plan"
    assert job["metadata"]["ownerReferences"][0]["kind"] == "Rebalance"
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "spindle-planner"
    assert pod["restartPolicy"] == "Never"
    [c] = pod["containers"]
    assert c["image"] == "spindle:1"
    assert c["command"][:4] == ["python3", "-P", "-m", "spindle.operator.workloads.plan_job"]
    args = c["command"][4:]
    assert args[args.index("--bootstrap") + 1] == "b0:9092,b1:9092"
    assert args[args.index("--mode") + 1] == "remove-volumes"
    assert args[args.index("--configmap") + 1] == "rb-plan"
    assert args[args.index("--dir") + 1] == "2:/var/lib/spindle/data-1"
    assert args[-2:] == ["--master", "local[*]"]


def test_spark_on_kubernetes_submits_in_cluster_mode_with_the_executors_asked_for() -> None:
    job = planner.build_planner_job(
        rebalance(mode="add-brokers", brokers=[3], planner={"mode": "SparkOnKubernetes", "executors": 2}),
        image="spindle:1", bootstrap=["b0:9092"], plan_job_file="/site/spindle/plan_job.py",
    )  # fmt: skip
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:4] == ["bash", "-c", planner.SUBMIT_SCRIPT, "spark-submit"]
    assert command[command.index("--master") + 1].startswith("k8s://https://kubernetes.default")
    assert command[command.index("--deploy-mode") + 1] == "cluster"
    conf = dict(command[i + 1].split("=", 1) for i, a in enumerate(command) if a == "--conf")
    assert conf["spark.executor.instances"] == "2"
    assert conf["spark.kubernetes.container.image"] == "spindle:1"
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "spindle-planner"
    assert conf["spark.kubernetes.submission.waitAppCompletion"] == "true"
    assert conf["spark.kubernetes.driver.label.spindle.io/rebalance"] == "rb"
    assert "local:///site/spindle/plan_job.py" in command
    assert command[command.index("--brokers") + 1] == "3"
    assert "--master" not in command[command.index("local:///site/spindle/plan_job.py") :]


def test_the_spark_driver_is_owned_by_the_rebalance_through_its_pod_template() -> None:
    """spark-submit creates the driver Pod, so its owner comes from the template the submitting
    Pod writes; the executors are the driver's (Spark's own references)."""
    job = planner.build_planner_job(
        rebalance(mode="add-brokers", brokers=[3], planner={"mode": "SparkOnKubernetes"}),
        image="spindle:1", bootstrap=["b0:9092"], plan_job_file="/p.py",
    )  # fmt: skip
    [container] = job["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    conf = dict(command[i + 1].split("=", 1) for i, a in enumerate(command) if a == "--conf")
    assert conf["spark.kubernetes.driver.podTemplateFile"] == planner.DRIVER_TEMPLATE_FILE
    env = {e["name"]: e["value"] for e in container["env"]}
    template = json.loads(env[planner.DRIVER_TEMPLATE_ENV])
    assert template["kind"] == "Pod"
    [owner] = template["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "spindle.io/v1alpha1", "kind": "Rebalance", "name": "rb", "uid": "u-1",
        "controller": True, "blockOwnerDeletion": False,
    }  # fmt: skip
    local = planner.build_planner_job(
        rebalance(planner={"mode": "Job"}), image="i", bootstrap=["b"], plan_job_file="/p.py"
    )
    assert [e["name"] for e in local["spec"]["template"]["spec"]["containers"][0]["env"]] == [
        "PYTHONUNBUFFERED"
    ]


def test_spark_pods_request_a_quarter_core_unless_the_spec_says() -> None:
    def conf_of(**planner_spec: Any) -> dict[str, str]:
        job = planner.build_planner_job(
            rebalance(mode="full", planner={"mode": "SparkOnKubernetes", **planner_spec}),
            image="spindle:1", bootstrap=["b0:9092"], plan_job_file="/p.py",
        )  # fmt: skip
        command = job["spec"]["template"]["spec"]["containers"][0]["command"]
        return dict(command[i + 1].split("=", 1) for i, a in enumerate(command) if a == "--conf")

    default = conf_of()
    assert default["spark.kubernetes.driver.request.cores"] == "250m"
    assert default["spark.kubernetes.executor.request.cores"] == "250m"
    # A fixed driver Pod name would collide with the last plan's finished driver on a re-plan.
    assert "spark.kubernetes.driver.pod.name" not in default
    asked = conf_of(resources={"requests": {"cpu": "2"}})
    assert asked["spark.kubernetes.executor.request.cores"] == "2"


def test_a_failed_spark_submit_leaves_its_cause_not_java_frames_as_the_pods_message(
    tmp_path: Path,
) -> None:
    """The submit script, run by bash with a stand-in spark-submit that fails like Spark."""
    fake = tmp_path / "spark-submit"
    fake.write_text(
        "#!/bin/sh\necho 'Exception in thread main: forbidden networkpolicies'\n"
        "printf '\\tat io.fabric8.X(X.java:1)\\n\\tat io.netty.Y(Y.java:2)\\n'\nexit 3\n"
    )
    fake.chmod(0o755)
    message = tmp_path / "termination-log"
    template = tmp_path / "driver-pod.json"
    script = (
        planner.SUBMIT_SCRIPT.replace("/dev/termination-log", str(message))
        .replace("/tmp/spark-submit.log", str(tmp_path / "submit.log"))
        .replace(planner.DRIVER_TEMPLATE_FILE, str(template))
    )
    done = subprocess.run(
        ["bash", "-c", script, "spark-submit", "--master", "k8s://x"],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", planner.DRIVER_TEMPLATE_ENV: '{"kind": "Pod"}'},
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 3
    assert template.read_text() == '{"kind": "Pod"}'  # written before spark-submit ran
    assert "\tat io.netty" in done.stdout  # the log keeps the whole trace
    assert message.read_text() == "Exception in thread main: forbidden networkpolicies\n"


def test_planner_rules_grant_only_what_spark_and_the_plan_job_need_in_one_namespace() -> None:
    """The chart's file is the one place the rules are written (templates/planner.yaml renders
    it; tests/controlplane/test_chart.py checks the rendering)."""
    rules = yaml.safe_load(
        (ROOT / "charts" / "spindle" / "files" / "planner-rules.yaml").read_text()
    )
    assert {g for rule in rules for g in rule["apiGroups"]} == {"", "networking.k8s.io"}
    granted = {r for rule in rules for r in rule["resources"]}
    assert granted == {
        "pods", "services", "configmaps", "persistentvolumeclaims", "networkpolicies"
    }  # fmt: skip
    assert all("*" not in rule["verbs"] for rule in rules)


SNAPSHOT = {
    "partitions": [
        {
            "topic": "t",
            "partition": 0,
            "replicas": [1, 2],
            "logDirs": ["/a", "/b"],
            "sizeBytes": 10,
        },
        {"topic": "t", "partition": 1, "replicas": [1], "logDirs": ["/a"], "sizeBytes": 20},
        {"topic": "t", "partition": 2, "replicas": [2], "logDirs": ["/b"], "sizeBytes": 30},
    ]
}
PLAN = {
    "version": 1,
    "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 3], "log_dirs": ["/a", "/c"]},
        {"topic": "t", "partition": 1, "replicas": [1], "log_dirs": ["/a2"]},
        {"topic": "t", "partition": 2, "replicas": [2], "log_dirs": ["/b2"]},
    ],
}


def test_replica_moves_name_source_and_destination_broker_and_directory() -> None:
    moves = proposal.replica_moves(SNAPSHOT, PLAN)
    assert moves == [
        {"topic": "t", "partition": 0, "sourceBroker": 2, "sourceDir": "/b",
         "destinationBroker": 3, "destinationDir": "/c", "bytes": 10},
        {"topic": "t", "partition": 1, "sourceBroker": 1, "sourceDir": "/a",
         "destinationBroker": 1, "destinationDir": "/a2", "bytes": 20},
        {"topic": "t", "partition": 2, "sourceBroker": 2, "sourceDir": "/b",
         "destinationBroker": 2, "destinationDir": "/b2", "bytes": 30},
    ]  # fmt: skip


def test_proposal_renames_the_planners_rows_to_the_crds_fields() -> None:
    summary = {
        "mode": "full",
        "planner": "greedy",
        "moves": {"total": 3, "crossBroker": 1, "intraBroker": 2},
        "bytesMoved": {"total": 60, "crossBroker": 10, "intraBroker": 50},
        "perBroker": [{"id": 1, "bytesBefore": 30, "bytesAfter": 30, "utilisationBefore": 0.3,
                       "utilisationAfter": 0.3, "replicasBefore": 2, "replicasAfter": 2}],
        "perDir": [{"broker": 1, "path": "/a", "state": "Active", "bytesBefore": 30, "bytesAfter": 10,
                    "utilisationBefore": 0.3, "utilisationAfter": 0.1}],
        "goalStatus": {"DISK_BYTES": {"status": "met"}, "RACK": {"status": "unachievable"}},
        "unmet": [{"goal": "RACK", "status": "unachievable", "why": "1 out of band"}],
    }  # fmt: skip
    p = proposal.proposal(summary, proposal.replica_moves(SNAPSHOT, PLAN), snapshot_time="T")
    assert p["moves"] == 3
    assert (p["interBrokerBytes"], p["intraBrokerBytes"]) == (10, 50)
    assert p["brokers"][0]["brokerId"] == 1
    assert "replicasBefore" not in p["brokers"][0]
    assert p["directories"][0]["brokerId"] == 1
    assert p["directories"][0]["path"] == "/a"
    assert p["goals"] == [
        {"name": "DISK_BYTES", "status": "met"},
        {"name": "RACK", "status": "unachievable", "reason": "1 out of band"},
    ]
    assert p["replicaMoves"][0]["destinationDir"] == "/c"
    assert p["snapshotTime"] == "T"


def test_batches_keep_every_cap_and_every_partition_once() -> None:
    moves = proposal.replica_moves(SNAPSHOT, PLAN)
    # Per broker 1: partitions 0 and 2 both touch broker 2, so they cannot share a batch.
    out = proposal.batches(PLAN, moves, proposal.Caps(max_moves=10, per_broker=1, per_disk=10))
    assert [[p["partition"] for p in b] for b in out] == [[0, 1], [2]]
    out = proposal.batches(PLAN, moves, proposal.Caps(max_moves=1, per_broker=10, per_disk=10))
    assert [[p["partition"] for p in b] for b in out] == [[0], [1], [2]]
    # Per disk 1: partitions 0 and 2 both copy from broker 2's /b.
    out = proposal.batches(PLAN, moves, proposal.Caps(max_moves=10, per_broker=10, per_disk=1))
    assert [[p["partition"] for p in b] for b in out] == [[0, 1], [2]]
    # However high the caps, a Reassignment stays well inside its CRD's 5000 partitions.
    big = {"partitions": [{**PLAN["partitions"][1], "partition": i} for i in range(2500)]}
    out = proposal.batches(
        big, [], proposal.Caps(max_moves=10**6, per_broker=10**6, per_disk=10**6)
    )
    assert [len(b) for b in out] == [proposal.MAX_BATCH_PARTITIONS] * 2 + [500]
    assert proposal.batches({"partitions": []}, [], proposal.Caps()) == []


def test_a_batch_becomes_a_reassignment_owned_by_the_rebalance() -> None:
    body = build_rebalance_reassignment(
        rebalance(throttle={"intraBrokerBytesPerSecond": 5}), 2, PLAN["partitions"][:1]
    )
    assert body["metadata"]["name"] == "rb-2"
    assert body["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert body["spec"] == {
        "cluster": "c",
        "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 3], "logDirs": ["/a", "/c"]}],
        "throttle": {"intraBrokerBytesPerSecond": 5},
    }


def test_small_plans_are_text_large_ones_gzipped_and_huge_ones_refused() -> None:
    small = {"plan.json": "{}", "summary.json": "{}"}
    assert encode(small) == {"data": small}
    large = {"plan.json": "x" * (TEXT_LIMIT + 1)}
    packed = encode(large)
    assert "binaryData" in packed
    assert decode(packed) == large
    noise = {"plan.json": "".join(f"{i * 7919 % 100003:x}" for i in range(400_000))}
    with pytest.raises(ValueError, match="more than a ConfigMap holds"):
        encode(noise)


def test_a_proposal_whose_sources_moved_since_the_snapshot_is_stale() -> None:
    moves = proposal.replica_moves(SNAPSHOT, PLAN)
    same = ClusterView(
        brokers=frozenset({1, 2, 3}),
        partitions={("t", 0): (1, 2), ("t", 1): (1,), ("t", 2): (2,)},
        dirs={1: {"/a": DirInfo("/a", None, {("t", 0): 10, ("t", 1): 20})},
              2: {"/b": DirInfo("/b", None, {("t", 0): 10, ("t", 2): 30})}},
    )  # fmt: skip
    assert proposal.stale_moves(moves, same) == []
    moved = ClusterView(
        brokers=same.brokers,
        partitions={("t", 0): (1, 3), ("t", 1): (1,), ("t", 2): (2,)},
        dirs={1: {"/a2": DirInfo("/a2", None, {("t", 1): 20})},
              2: {"/b": DirInfo("/b", None, {("t", 2): 30})}},
    )  # fmt: skip
    assert proposal.stale_moves(moves, moved) == [
        "t-0 is no longer on broker 2",
        "t-1 on broker 1 is no longer in /a",
    ]


def test_proposal_ttl_durations() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("1h30m") == 5400
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")
