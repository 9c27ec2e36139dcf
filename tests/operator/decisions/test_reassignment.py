"""The Reassignment's pure decisions: refusals, what is submitted, progress, rollback."""

from __future__ import annotations

import datetime

import pytest
from spindle.operator.decisions import reassignment as plan
from spindle.operator.decisions.reassignment import ClusterView, DirInfo, Target
from spindle.operator.specs.broker import SpecError

A, B, C = "/data/a", "/data/b", "/data/c"
MB = 1 << 20


def view(
    *,
    a: dict[tuple[str, int], int] | None = None,
    b: dict[tuple[str, int], int] | None = None,
    futures_b: dict[tuple[str, int], int] | None = None,
    reassigning: frozenset[tuple[str, int]] = frozenset(),
    partitions: dict[tuple[str, int], tuple[int, ...]] | None = None,
    c_error: str | None = None,
) -> ClusterView:
    """Broker 1 with dirs a, b, c; topic t partitions 0 and 1 on a unless told otherwise."""
    a = {("t", 0): 4 * MB, ("t", 1): 2 * MB} if a is None else a
    return ClusterView(
        brokers=frozenset({1, 2}),
        partitions=partitions or {("t", 0): (1,), ("t", 1): (1,)},
        dirs={
            1: {
                A: DirInfo(A, None, a),
                B: DirInfo(B, None, b or {}, futures_b or {}),
                C: DirInfo(C, c_error),
            },
            2: {"/d2": DirInfo("/d2")},
        },
        reassigning=reassigning,
    )


def spec(*partitions: dict[str, object], **extra: object) -> plan.ReassignmentSpec:
    return plan.parse_reassignment({"cluster": "k", "partitions": list(partitions), **extra})


def test_a_spec_without_partitions_is_refused() -> None:
    with pytest.raises(SpecError, match="nothing to reassign"):
        plan.parse_reassignment({"cluster": "k", "partitions": []})


def test_validation_names_every_problem() -> None:
    s = spec(
        {"topic": "nope", "partition": 0, "replicas": [1]},
        {"topic": "t", "partition": 7, "replicas": [1]},
        {"topic": "t", "partition": 0, "replicas": [1, 1, 9], "logDirs": [B, "rel", "any"]},
        {"topic": "t", "partition": 1, "replicas": [1], "logDirs": ["/nowhere"]},
    )
    problems = plan.validate(s, view(), {})
    assert problems == [
        "nope-0: topic 'nope' does not exist",
        "t-7: topic 't' has no partition 7",
        "t-0: broker 1 is listed twice in replicas",
        "t-0: broker 9 is not in the cluster (brokers: 1, 2)",
        "t-0: log dir 'rel' for broker 1 is not an absolute path",
        "t-1: broker 1 has no log dir /nowhere (it has: /data/a, /data/b, /data/c)",
    ]


def test_offline_and_cordoned_destinations_are_refused_but_staying_put_is_not() -> None:
    s = spec(
        {"topic": "t", "partition": 0, "replicas": [1], "logDirs": [C]},
        {"topic": "t", "partition": 1, "replicas": [1], "logDirs": [B]},
    )
    closed = plan.closed_dirs(
        [
            {
                "metadata": {"name": "b1-data-1"},
                "spec": {"brokerId": 1, "desiredState": "Cordoned"},
                "status": {"path": B, "state": "Cordoned"},
            },
            {  # the source is cordoned too: leaving it is fine
                "metadata": {"name": "b1-data-0"},
                "spec": {"brokerId": 1, "desiredState": "Cordoned"},
                "status": {"path": A, "state": "Active"},
            },
        ]
    )
    assert plan.validate(s, view(c_error="KafkaStorageError"), closed) == [
        "t-0: destination log dir /data/c on broker 1 is offline (KafkaStorageError)",
        "t-1: destination log dir /data/b on broker 1 is Cordoned (LogVolume b1-data-1): "
        "it takes no new replicas",
    ]
    stay = spec({"topic": "t", "partition": 0, "replicas": [1], "logDirs": [A]})
    assert plan.validate(stay, view(), closed) == []


def test_originals_record_each_replicas_directory() -> None:
    s = spec({"topic": "t", "partition": 0, "replicas": [1], "logDirs": [B]})
    [record] = plan.originals(s, view())
    assert record["originalReplicas"] == [1]
    assert record["originalLogDirs"] == [A]


def test_only_changed_replicas_and_directories_are_submitted() -> None:
    targets = [
        Target("t", 0, (1,), (B,)),
        Target("t", 1, (1, 2), ("any", "/d2")),
    ]
    v = view()
    assert plan.replica_changes(targets, v) == {("t", 1): [1, 2]}
    assert plan.dir_changes(targets, v) == {("t", 0, 1): B, ("t", 1, 2): "/d2"}
    # A copy already on its way is not asked for again.
    moving = view(futures_b={("t", 0): MB})
    assert plan.dir_changes(targets[:1], moving) == {}


def test_throttles_follow_kafka_reassign_partitions() -> None:
    s = spec(
        {"topic": "t", "partition": 0, "replicas": [1], "logDirs": [B]},
        {"topic": "t", "partition": 1, "replicas": [2]},
        throttle={"interBrokerBytesPerSecond": 100, "intraBrokerBytesPerSecond": 50},
    )
    brokers, topics = plan.throttles(s, view())
    assert brokers == {
        1: {plan.THROTTLE_LEADER_RATE: "100", plan.THROTTLE_FOLLOWER_RATE: "100",
            plan.THROTTLE_DIR_RATE: "50"},
        2: {plan.THROTTLE_LEADER_RATE: "100", plan.THROTTLE_FOLLOWER_RATE: "100"},
    }  # fmt: skip
    assert topics == {"t": {plan.THROTTLED_LEADERS: "1:1", plan.THROTTLED_FOLLOWERS: "1:2"}}
    assert plan.throttles(spec({"topic": "t", "partition": 0, "replicas": [1]}), view()) == (
        {},
        {},
    )


def test_progress_counts_the_future_copy_then_completes() -> None:
    t = Target("t", 0, (1,), (B,))
    record = {"topic": "t", "partition": 0, "originalReplicas": [1], "originalLogDirs": [A]}
    half = plan.partition_progress(t, record, view(futures_b={("t", 0): 2 * MB}))
    assert (half["phase"], half["bytesTotal"], half["bytesDone"]) == ("Moving", 4 * MB, 2 * MB)
    done = plan.partition_progress(t, record, view(a={("t", 1): 1}, b={("t", 0): 4 * MB}))
    assert (done["phase"], done["bytesDone"]) == ("Completed", 4 * MB)
    assert done["originalLogDirs"] == [A]


def test_a_new_broker_replica_counts_what_it_holds() -> None:
    t = Target("t", 0, (1, 2))
    record = {"topic": "t", "partition": 0, "originalReplicas": [1], "originalLogDirs": [A]}
    v = ClusterView(
        brokers=frozenset({1, 2}),
        partitions={("t", 0): (1, 2)},
        dirs={
            1: {A: DirInfo(A, None, {("t", 0): 4 * MB})},
            2: {"/d2": DirInfo("/d2", None, {("t", 0): MB})},
        },
        reassigning=frozenset({("t", 0)}),
    )
    p = plan.partition_progress(t, record, v)
    assert (p["phase"], p["bytesTotal"], p["bytesDone"]) == ("Moving", 4 * MB, MB)


def test_rollback_cancels_in_flight_reverses_completed_and_moves_dirs_back() -> None:
    records = [
        {"topic": "t", "partition": 0, "originalReplicas": [1], "originalLogDirs": [A]},
        {"topic": "t", "partition": 1, "originalReplicas": [1], "originalLogDirs": [A]},
    ]
    v = view(
        a={("t", 0): 4 * MB},
        b={("t", 1): 2 * MB},
        futures_b={("t", 0): MB},
        partitions={("t", 0): (1,), ("t", 1): (1, 2)},
    )
    replicas, dirs = plan.rollback_actions(records, v)
    assert replicas == {("t", 1): [1]}
    assert dirs == {("t", 0, 1): A, ("t", 1, 1): A}
    assert not plan.is_rolled_back(records, v)
    assert plan.is_rolled_back(records, view())
    in_flight = view(reassigning=frozenset({("t", 0)}))
    assert plan.rollback_actions(records[:1], in_flight)[0] == {("t", 0): None}


def test_rate_and_eta_come_from_successive_probes() -> None:
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    parts = [{"phase": "Moving", "bytesTotal": 10 * MB, "bytesDone": 2 * MB}]
    first = plan.progress_fields(parts, {}, t0)
    assert first["progress"] == "20%"
    assert first["bytesPerSecond"] == 0
    assert "eta" not in first
    parts = [{"phase": "Moving", "bytesTotal": 10 * MB, "bytesDone": 6 * MB}]
    second = plan.progress_fields(parts, first, t0 + datetime.timedelta(seconds=4))
    assert second["bytesPerSecond"] == MB
    assert second["timeRemaining"] == "4s"
    assert second["eta"] == "2026-01-01T00:00:08Z"
    assert plan.remaining_text(3725) == "1h2m"


def test_the_rate_divides_by_the_time_between_probes_to_the_millisecond() -> None:
    """Probes 2 s apart at .9 past a second: whole-second stamps would make it 2.9 s."""
    t0 = datetime.datetime(2026, 1, 1, 0, 0, 0, 900_000, tzinfo=datetime.UTC)
    parts = [{"phase": "Moving", "bytesTotal": 10 * MB, "bytesDone": 2 * MB}]
    first = plan.progress_fields(parts, {}, t0)
    assert first["lastProbeTime"] == "2026-01-01T00:00:00.900Z"
    parts = [{"phase": "Moving", "bytesTotal": 10 * MB, "bytesDone": 4 * MB}]
    second = plan.progress_fields(parts, first, t0 + datetime.timedelta(seconds=2))
    assert second["bytesPerSecond"] == MB
    # A status written before stamps had a fraction still reads.
    whole = {**first, "lastProbeTime": "2026-01-01T00:00:00Z"}
    third = plan.progress_fields(parts, whole, t0 + datetime.timedelta(seconds=1))
    assert third["lastProbeTime"] == "2026-01-01T00:00:01.900Z"


def test_a_probe_under_a_second_after_the_last_keeps_its_baseline_and_makes_no_sample() -> None:
    """150 KiB/s copied in 64 KiB chunks, probes at 0, 0.3 and 2 s: 0.3 s saw one chunk (a
    sample of 213 KiB/s); it stands aside, and 2 s later the sample spans the 2 s."""
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    kib = 1024

    def parts(done: int) -> list[dict[str, object]]:
        return [{"phase": "Moving", "bytesTotal": 2 * MB, "bytesDone": done}]

    first = plan.progress_fields(parts(0), {}, t0)
    soon = plan.progress_fields(parts(64 * kib), first, t0 + datetime.timedelta(seconds=0.3))
    assert {k: soon.get(k) for k in plan.PROBE_FIGURES} == {
        k: first.get(k) for k in plan.PROBE_FIGURES
    }
    assert soon["bytesDone"] == 0
    later = plan.progress_fields(
        parts(300 * kib), {**first, **soon}, t0 + datetime.timedelta(seconds=2)
    )
    assert later["bytesPerSecond"] == 150 * kib
    assert later["lastProbeTime"] == "2026-01-01T00:00:02.000Z"


def test_the_last_probe_writes_completion_figures_however_soon_it_comes() -> None:
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    first = plan.progress_fields(
        [{"phase": "Moving", "bytesTotal": MB, "bytesDone": MB // 2}], {}, t0
    )
    done = plan.progress_fields(
        [{"phase": "Completed", "bytesTotal": MB, "bytesDone": MB}],
        first,
        t0 + datetime.timedelta(seconds=0.2),
    )
    assert (done["bytesDone"], done["progress"], done["partitionsDone"]) == (MB, "100%", 1)


def test_a_clock_gone_back_restarts_the_baseline_without_a_sample() -> None:
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    def parts(done: int) -> list[dict[str, object]]:
        return [{"phase": "Moving", "bytesTotal": 10 * MB, "bytesDone": done}]

    first = plan.progress_fields(parts(0), {}, t0)
    second = plan.progress_fields(parts(2 * MB), first, t0 + datetime.timedelta(seconds=2))
    assert second["bytesPerSecond"] == MB
    back = plan.progress_fields(parts(3 * MB), second, t0 - datetime.timedelta(minutes=5))
    assert (back["lastProbeTime"], back["bytesDone"]) == ("2025-12-31T23:55:00.000Z", 3 * MB)
    assert back["bytesPerSecond"] == MB
