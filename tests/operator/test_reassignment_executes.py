"""Reassignments and Rebalances carried out by the operator, for real: a Spindle broker process
on loopback with four log directories, each its own small tmpfs, and the operator
(``spindle-operator run``, its own process, serving ``ra-*`` namespaces with ``--bootstrap``
pointing at the broker) against the session's real kube-apiserver. Moves are between
directories of the one broker (AlterReplicaLogDirs through the operator's broker client), under
the intra-broker throttle the spec gives.

Proven here: moves run with per-partition and overall progress, the throttle set while they run
and cleared after, every record still there; ``spec.cancel`` and deletion mid-move restore the
original directories; an operator SIGKILLed mid-move resumes watching after a restart without
submitting anything again; a Rebalance launches its planner Job (whose command is run beside the
cluster: this control plane has no node), shows the proposal, executes it on approval as
Reassignments under ``maxConcurrentMoves`` and completes (an approval given to a proposal that is
then re-planned is withdrawn first); a Rebalance no placement can satisfy
fails with the planner's reason; invalid specs are refused with a condition naming each problem
(and the API server refuses relative directories and duplicate replicas).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from .conftest import (
    CANARY,
    CLUSTER,
    PARTITIONS,
    RECORD_BYTES,
    RECORDS,
    SKEWED,
    TOPIC,
    World,
    record,
    temporary_namespace,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs per log dir: needs root"),
]

FINALIZER = "spindle.io/rollback-on-delete"


def test_moves_run_throttled_with_progress_and_complete_with_every_record(world: World) -> None:
    w = world
    before = w.placement()
    target = w.elsewhere(list(range(PARTITIONS)))
    rate = 400 * 1024
    w.apply("all", target, throttle={"intraBrokerBytesPerSecond": rate})
    mid = w.wait_moving("all", partial=True)
    assert mid["partitionsTotal"] == PARTITIONS
    assert mid["bytesTotal"] >= PARTITIONS * RECORDS * RECORD_BYTES
    assert {p["phase"] for p in mid["partitions"]} <= {"Moving", "Completed"}
    assert all(p["originalLogDirs"] == [before[p["partition"]]] for p in mid["partitions"])
    assert w.dir_throttle() == str(rate)
    body = w.ns.get("reassignment", "all")
    assert FINALIZER in body["metadata"]["finalizers"]
    # Printer columns while it runs: PARTITIONS, PHASE, PROGRESS (%), ETA.
    table = w.ns.kubectl("get", "reassignments", "all").stdout
    assert table.split("\n")[0].split() == [
        "NAME",
        "CLUSTER",
        "PARTITIONS",
        "PHASE",
        "PROGRESS",
        "ETA",
        "AGE",
    ]

    done = w.wait_phase("all", "Completed", "Failed", timeout=180)
    assert done["phase"] == "Completed", done
    assert done["progress"] == "100%"
    assert done["partitionsDone"] == PARTITIONS
    assert done["bytesDone"] == done["bytesTotal"]
    assert done["startTime"] <= done["completionTime"]
    assert "timeRemaining" not in done
    assert "throttles" not in done
    assert w.placement() == target
    assert w.dir_throttle() is None  # throttle cleared
    assert FINALIZER not in (w.ns.get("reassignment", "all")["metadata"].get("finalizers") or [])
    assert len([e for e in w.ns.events("Started") if e["involvedObject"]["name"] == "all"]) == 1

    consumer = KafkaConsumer(bootstrap_servers=w.broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10_000)  # fmt: skip
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for msg in consumer:
        got[msg.partition].append(msg.value)
        if sum(map(len, got.values())) == PARTITIONS * RECORDS:
            break
    consumer.close()
    for p in range(PARTITIONS):
        assert got[p] == [record(p, s) for s in range(RECORDS)], f"partition {p}"


def future_size(w: World, topic: str, partition: int) -> int | None:
    """The future replica's size as DescribeLogDirs reports it (Kafka's tool reads the same
    field); None while there is none."""
    for d in w.admin.describe_log_dirs(brokers=[w.broker.node_id])[0]["log_dirs"]:
        for t in d.get("topics") or ():
            for p in t["partitions"]:
                if t["name"] == topic and p["partition_index"] == partition and p["is_future_key"]:
                    return int(p["partition_size"])
    return None


def test_a_moving_replica_grows_in_describe_log_dirs_and_its_progress_rises_in_steps(
    world: World,
) -> None:
    """One 2 MB partition at 150 KiB/s (about 14 s; the operator looks every 2 s): the future
    replica's size grows while it copies, as in Kafka, not 0 -> total at the swap, and so do
    the Reassignment's bytesDone and PROGRESS."""
    w = world
    target = w.elsewhere([0])
    w.apply("steps", target, throttle={"intraBrokerBytesPerSecond": 150 * 1024})
    sizes: list[int] = []  # the future replica's size in DescribeLogDirs, in sample order
    done_bytes: list[int] = []  # the Reassignment's status.bytesDone, likewise
    shown: set[str] = set()  # the PROGRESS column's values
    rates: list[tuple[int, str | None]] = []  # (bytesPerSecond, eta) while Moving

    def sample() -> dict[str, Any] | None:
        size = future_size(w, TOPIC, 0)
        if size is not None:
            sizes.append(size)
        status = w.status("steps")
        if status.get("phase") == "Moving":
            done_bytes.append(int(status.get("bytesDone") or 0))
            shown.add(str(status.get("progress")))
            rates.append((int(status.get("bytesPerSecond") or 0), status.get("eta")))
        return status if status.get("phase") in {"Completed", "Failed"} else None

    final: dict[str, Any] = w.wait("steps finished", sample, timeout=180)
    print({"sizes": sizes, "bytesDone": done_bytes, "progress": sorted(shown), "rates": rates})
    assert final["phase"] == "Completed", final
    total = int(final["bytesTotal"])
    assert len({x for x in sizes if 0 < x < total}) >= 3, sizes
    assert sizes == sorted(sizes), sizes  # it only grows
    assert len({x for x in done_bytes if 0 < x < total}) >= 3, done_bytes
    assert done_bytes == sorted(done_bytes), done_bytes
    assert len(shown - {"0%", "100%"}) >= 2, shown
    # A rate and an ETA while it copies; the rate (bytes between two probes over the time
    # between them, smoothed) reaches the throttle's order and never far above it.
    assert any(rate > 0 and eta for rate, eta in rates), rates
    assert 0.5 * 150 * 1024 <= max(rate for rate, _ in rates) <= 2 * 150 * 1024, rates
    assert w.placement()[0] == target[0]


def test_cancel_mid_move_restores_the_original_directories(world: World) -> None:
    w = world
    before = w.placement()
    w.apply("cancel-me", w.elsewhere([0]), throttle={"intraBrokerBytesPerSecond": 200 * 1024})
    w.wait_moving("cancel-me")
    w.ns.kubectl(
        "patch", "reassignment", "cancel-me", "--type=merge", "-p", '{"spec":{"cancel":true}}'
    )
    status = w.wait_phase("cancel-me", "Cancelled", "Failed")
    assert status["phase"] == "Cancelled", status
    assert {p["phase"] for p in status["partitions"]} == {"Cancelled"}
    assert w.placement() == before
    assert w.futures() == 0
    assert w.dir_throttle() is None


def test_deleting_mid_move_rolls_back_before_the_object_goes(world: World) -> None:
    w = world
    before = w.placement()
    w.apply("delete-me", w.elsewhere([1]), throttle={"intraBrokerBytesPerSecond": 200 * 1024})
    w.wait_moving("delete-me")
    w.ns.kubectl("delete", "reassignment", "delete-me", "--wait=false")
    w.wait("the deleted reassignment gone", lambda: w.ns.get("reassignment", "delete-me") is None)
    assert w.placement() == before
    assert w.futures() == 0
    assert w.dir_throttle() is None


def test_an_operator_killed_mid_move_resumes_without_starting_anything_twice(world: World) -> None:
    w = world
    target = w.elsewhere([2])
    w.apply("survive", target, throttle={"intraBrokerBytesPerSecond": 300 * 1024})
    mid = w.wait_moving("survive")
    w.operator.kill()
    w.operator.start()
    done = w.wait_phase("survive", "Completed", "Failed", timeout=180)
    assert done["phase"] == "Completed", done
    assert done["startTime"] == mid["startTime"]
    assert len([e for e in w.ns.events("Started") if e["involvedObject"]["name"] == "survive"]) == 1
    assert w.placement()[2] == target[2]
    assert w.dir_throttle() is None


def test_rebalance_plans_proposes_and_executes_once_approved(world: World) -> None:
    w = world
    hot = w.skew("skew")
    w.ns.apply(json.dumps({
        "apiVersion": "spindle.io/v1alpha1", "kind": "Rebalance", "metadata": {"name": "rb"},
        "spec": {"cluster": CLUSTER, "mode": "intra-broker", "maxConcurrentMoves": 3,
                 "planner": {"mode": "Job"}},
    }))  # fmt: skip
    w.wait_phase("rb", "Snapshotting", kind="rebalance")
    job = w.ns.get("job", "rb-plan")
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "spindle-planner"
    done = w.run_planner_job("rb-plan")
    assert done.returncode == 0, done.stderr[-3000:]
    status = w.wait_phase("rb", "ProposalReady", kind="rebalance")
    # Snapshotting -> Planning once the job wrote its snapshot's time (Spark then takes
    # seconds to start; the operator looks every 2 s), each step an Event.
    steps = [e["reason"] for e in w.ns.items("events") if e["involvedObject"]["name"] == "rb"]
    print(steps)
    assert {"PlannerStarted", "SnapshotTaken", "ProposalReady"} <= set(steps), steps
    proposal = status["proposal"]
    assert proposal["mode"] == "intra-broker"
    assert proposal["planner"] in {"greedy", "exact"}
    assert proposal["moves"] >= 1
    assert proposal["interBrokerBytes"] == 0
    brief = {k: proposal[k] for k in ("goals", "replicaMoves", "directories")}
    assert proposal["intraBrokerBytes"] > 0, json.dumps(brief, indent=1)
    assert {g["name"]: g["status"] for g in proposal["goals"]}[
        "diskUtilisationOverBrokerMean"
    ] == "met"
    assert [b["brokerId"] for b in proposal["brokers"]] == [1]
    dirs = {d["path"]: d for d in proposal["directories"]}
    assert dirs[hot]["bytesAfter"] < dirs[hot]["bytesBefore"]
    assert all(d["brokerId"] == 1 for d in dirs.values())
    assert {g["status"] for g in proposal["goals"]} <= {
        "met",
        "unmet",
        "unachievable",
        "notInScope",
    }
    moves = proposal["replicaMoves"]
    assert len(moves) == proposal["moves"]
    skewed = [m for m in moves if m["topic"] == SKEWED]
    assert skewed
    assert all(m["sourceDir"] == hot and m["destinationDir"] != hot for m in skewed)
    assert all(m["sourceBroker"] == m["destinationBroker"] == 1 for m in moves)
    assert not w.made_by("rb")  # nothing runs before approval

    # An approval given to a proposal that is then planned again (here: older than its
    # proposalTtl, in the same update) is withdrawn: the new proposal waits for its own review.
    w.ns.kubectl("patch", "rebalance", "rb", "--type=merge", "-p", json.dumps({
        "metadata": {"annotations": {"spindle.io/approve": "true"}},
        "spec": {"proposalTtl": "1s"},
    }))  # fmt: skip
    w.wait("the approval withdrawn", lambda: w.ns.events("ApprovalWithdrawn"))
    w.ns.kubectl("patch", "rebalance", "rb", "--type=merge", "-p", '{"spec":{"proposalTtl":"15m"}}')
    body = w.ns.get("rebalance", "rb")
    assert "spindle.io/approve" not in (body["metadata"].get("annotations") or {}), body
    w.wait_phase("rb", "Snapshotting", kind="rebalance")
    again = w.run_planner_job("rb-plan")
    assert again.returncode == 0, again.stderr[-3000:]
    status = w.wait_phase("rb", "ProposalReady", kind="rebalance")
    assert status["proposal"]["snapshotTime"] > proposal["snapshotTime"]
    assert not w.made_by("rb")
    moves = status["proposal"]["replicaMoves"]

    # What the dashboard's Approve button does: patch spec.approve.
    w.ns.kubectl("patch", "rebalance", "rb", "--type=merge", "-p", '{"spec":{"approve":true}}')
    final = w.wait_phase("rb", "Completed", "Failed", kind="rebalance", timeout=300)
    assert final["phase"] == "Completed", final
    assert final["batches"] == -(-len(moves) // 3)  # maxConcurrentMoves: 3 partitions a batch
    # One broker: no preferred leader changes, so the closing election has nothing to elect.
    assert final["preferredElection"] == {"partitions": 0, "elected": 0, "failed": []}
    created = sorted(w.made_by("rb"))
    assert created == [f"rb-{i}" for i in range(1, final["batches"] + 1)]
    for name in created:
        r = w.ns.get("reassignment", name)
        assert r["metadata"]["ownerReferences"][0]["name"] == "rb"
        assert r["status"]["phase"] == "Completed"
    for m in moves:
        assert w.placement(m["topic"])[m["partition"]] == m["destinationDir"]


def test_a_rebalance_where_the_chart_gave_no_planner_account_waits_saying_which_value_to_set(
    world: World,
) -> None:
    w = world
    with temporary_namespace(w.operator.kube, "ra") as bare:
        bare.apply(json.dumps({
            "apiVersion": "spindle.io/v1alpha1", "kind": "Rebalance", "metadata": {"name": "rb"},
            "spec": {"cluster": CLUSTER, "mode": "intra-broker"},
        }))  # fmt: skip
        cond = w.wait(
            "rb waiting for its planner account",
            lambda: next(
                (c for c in ((bare.get("rebalance", "rb") or {}).get("status") or {}).get(
                    "conditions") or [] if c["type"] == "PlannerReady"), None,
            ),
        )  # fmt: skip
        assert cond["status"] == "False"
        assert cond["reason"] == "PlannerAccountMissing"
        assert "planner.namespaces" in cond["message"]
        assert bare.namespace in cond["message"]
        assert bare.get("rebalance", "rb")["status"].get("phase") == "Pending"
        assert bare.get("job", "rb-plan") is None
        assert bare.events("PlannerAccountMissing")


def test_a_rebalance_no_placement_can_satisfy_fails_with_the_planners_reason(world: World) -> None:
    w = world
    w.ns.apply(json.dumps({
        "apiVersion": "spindle.io/v1alpha1", "kind": "Rebalance", "metadata": {"name": "nowhere"},
        "spec": {"cluster": CLUSTER, "mode": "remove-brokers", "brokers": [1]},
    }))  # fmt: skip
    done = w.run_planner_job("nowhere-plan")
    assert done.returncode == 2, done.stderr[-3000:]
    status = w.wait_phase("nowhere", "Failed", kind="rebalance")
    [cond] = [c for c in status["conditions"] if c["type"] == "Progressing"]
    assert cond["reason"] == "PlanRefused"
    assert cond["message"].startswith("plan refused (remove-brokers)"), cond["message"]
    assert w.ns.events("PlanRefused")


def test_stopping_an_auto_approved_rebalance_mid_move_rolls_its_reassignment_back(
    world: World,
) -> None:
    w = world
    w.skew("reskew")
    before = w.placement(SKEWED)
    w.ns.apply(json.dumps({
        "apiVersion": "spindle.io/v1alpha1", "kind": "Rebalance", "metadata": {"name": "halt"},
        "spec": {"cluster": CLUSTER, "mode": "intra-broker", "autoApprove": True,
                 "maxConcurrentMoves": 3, "throttle": {"intraBrokerBytesPerSecond": 100 * 1024}},
    }))  # fmt: skip
    done = w.run_planner_job("halt-plan")
    assert done.returncode == 0, done.stderr[-3000:]
    w.wait_moving("halt-1")  # auto-approved: executing without anyone approving
    w.ns.kubectl("patch", "rebalance", "halt", "--type=merge", "-p", '{"spec":{"stop":true}}')
    final = w.wait_phase("halt", "Stopped", "Completed", "Failed", kind="rebalance", timeout=180)
    assert final["phase"] == "Stopped", final
    assert w.status("halt-1")["phase"] == "Cancelled"
    assert w.made_by("halt") == {"halt-1"}  # no batch started after the stop
    assert w.placement(SKEWED) == before
    assert w.futures() == 0
    assert w.dir_throttle() is None


def test_invalid_reassignments_are_refused_naming_each_problem(world: World) -> None:
    w = world
    offline = w.fail_fourth_dir()
    cordoned = w.dirs[2]
    w.ns.apply(json.dumps({
        "apiVersion": "spindle.io/v1alpha1", "kind": "LogVolume",
        "metadata": {"name": "loop-1-data-2", "labels": {"spindle.io/cluster": CLUSTER}},
        "spec": {"broker": "loop-1", "brokerId": 1, "volumeId": 2, "desiredState": "Cordoned"},
    }))  # fmt: skip
    w.ns.kubectl(
        "patch", "logvolume", "loop-1-data-2", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"state": "Cordoned", "path": cordoned}}),
    )  # fmt: skip
    where = w.placement()
    moves = {p: d for p, d in where.items()}
    src0 = next(p for p, d in moves.items() if d != cordoned)
    src1 = next(p for p, d in moves.items() if p != src0)
    w.create("bad", [
        {"topic": TOPIC, "partition": src0, "replicas": [1], "logDirs": [cordoned]},
        {"topic": TOPIC, "partition": src1, "replicas": [1], "logDirs": [offline]},
        {"topic": TOPIC, "partition": 9, "replicas": [1]},
        {"topic": "ghost", "partition": 0, "replicas": [1]},
        {"topic": CANARY, "partition": 0, "replicas": [7]},
    ])  # fmt: skip
    status = w.wait_phase("bad", "Failed")
    [valid] = [c for c in status["conditions"] if c["type"] == "Valid"]
    assert valid["status"] == "False"
    assert valid["reason"] == "InvalidReassignment"
    message = valid["message"]
    for expected in (
        f"{TOPIC}-{src0}: destination log dir {cordoned} on broker 1 is Cordoned "
        "(LogVolume loop-1-data-2): it takes no new replicas",
        f"{TOPIC}-{src1}: destination log dir {offline} on broker 1 is offline (KafkaStorageError)",
        f"{TOPIC}-9: topic '{TOPIC}' has no partition 9",
        "ghost-0: topic 'ghost' does not exist",
        f"{CANARY}-0: broker 7 is not in the cluster (brokers: 1)",
    ):
        assert expected in message, message
    assert w.placement() == where  # nothing moved
    assert FINALIZER not in (
        (w.ns.get("reassignment", "bad") or {})["metadata"].get("finalizers") or []
    )
    assert [e for e in w.ns.events("InvalidReassignment") if e["involvedObject"]["name"] == "bad"]
    w.ns.kubectl("delete", "logvolume", "loop-1-data-2")

    # The API server refuses what the schema can see: relative dirs, a broker twice.
    for partition, error in (
        ({"topic": TOPIC, "partition": 0, "replicas": [1], "logDirs": ["data"]},
         'each log dir must be "any" or an absolute path'),
        ({"topic": TOPIC, "partition": 0, "replicas": [1, 1]},
         "replicas must not list a broker twice"),
    ):  # fmt: skip
        body = {"apiVersion": "spindle.io/v1alpha1", "kind": "Reassignment",
                "metadata": {"name": "schema"}, "spec": {"cluster": CLUSTER, "partitions": [partition]}}  # fmt: skip
        done = w.ns.kubectl("apply", "-f", "-", input=json.dumps(body), check=False)
        assert done.returncode != 0, done.stdout
        assert error in done.stderr, done.stderr
