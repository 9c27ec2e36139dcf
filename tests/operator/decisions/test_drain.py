"""decisions.drain: where a draining directory's replicas go, and the drain's progress."""

from __future__ import annotations

import dataclasses
import datetime

from spindle.operator.decisions.drain import (
    RESERVE_FRACTION,
    plan_cross,
    plan_intra,
    progress,
)
from spindle.operator.decisions.reassignment import ClusterView, DirInfo
from spindle.operator.decisions.volume_state import DirReport
from spindle.operator.specs import BrokerSpec
from spindle.operator.specs.reassignment import build_drain_reassignment

MB = 2**20


def _dir(path: str, parts: dict[tuple[str, int], int], *, usable: int | None, total: int = 100 * MB,
         cordoned: bool = False, futures: dict[tuple[str, int], int] | None = None,
         error: str | None = None) -> DirReport:  # fmt: skip
    return DirReport(
        path=path,
        error=error,
        replicas=len(parts),
        used_bytes=sum(parts.values()),
        total_bytes=total,
        usable_bytes=usable,
        cordoned=cordoned,
        partitions=parts,
        futures=futures or {},
    )


def test_replicas_that_fit_stay_in_the_broker_least_used_directory_first() -> None:
    source = _dir("/d0", {("t", 0): 10 * MB, ("t", 1): 5 * MB}, usable=50 * MB, cordoned=True)
    a = _dir("/d1", {("u", 0): 30 * MB}, usable=60 * MB)
    b = _dir("/d2", {}, usable=90 * MB)
    moves, homeless = plan_intra(source, [a, b])
    assert moves == {("t", 0): "/d2", ("t", 1): "/d2"}  # d2 stays the least used after 10 MB
    assert homeless == []


def test_a_directory_without_room_takes_nothing_and_the_rest_is_homeless() -> None:
    source = _dir("/d0", {("t", 0): 40 * MB, ("t", 1): 3 * MB}, usable=50 * MB, cordoned=True)
    # 10 MB usable less the 5 % reserve of its 100 MB: 5 MB of room
    small = _dir("/d1", {}, usable=10 * MB)
    moves, homeless = plan_intra(source, [small])
    assert moves == {("t", 1): "/d1"}
    assert homeless == [("t", 0)]
    assert 10 * MB - RESERVE_FRACTION * 100 * MB < 40 * MB


def test_cordoned_offline_and_arriving_are_skipped_and_a_lone_directory_has_no_home() -> None:
    source = _dir("/d0", {("t", 0): MB, ("t", 1): MB}, usable=50 * MB, cordoned=True,
                  futures={})  # fmt: skip
    cordoned = _dir("/d1", {}, usable=90 * MB, cordoned=True)
    offline = _dir("/d2", {}, usable=None, error="KafkaStorageError")
    arriving = _dir("/d3", {}, usable=None, futures={("t", 1): 0})
    moves, homeless = plan_intra(source, [cordoned, offline])
    assert (moves, homeless) == ({}, [("t", 0), ("t", 1)])
    moves, homeless = plan_intra(source, [arriving])
    assert moves == {("t", 0): "/d3"}  # no usable figure: trusted to fit
    assert homeless == []  # t-1 is already on its way to /d3
    assert plan_intra(source, []) == ({}, [("t", 0), ("t", 1)])


def _view() -> ClusterView:
    return ClusterView(
        brokers=frozenset({1, 2, 3}),
        partitions={("t", 0): (1, 2), ("t", 1): (1,), ("t", 2): (2, 1, 3), ("gone", 0): (2,)},
        dirs={
            1: {"/d0": DirInfo("/d0", None, {("t", 0): 8 * MB, ("t", 1): 4 * MB})},
            2: {
                "/a": DirInfo("/a", None, {("t", 0): 8 * MB}, total_bytes=100 * MB,
                              usable_bytes=20 * MB),
                "/b": DirInfo("/b", None, {}, total_bytes=100 * MB, usable_bytes=80 * MB),
            },
            3: {
                "/x": DirInfo("/x", None, {}, total_bytes=100 * MB, usable_bytes=95 * MB),
                "/y": DirInfo("/y", "KafkaStorageError"),
            },
        },
    )  # fmt: skip


def test_other_brokers_take_what_does_not_fit_into_their_roomiest_open_directory() -> None:
    sizes = {("t", 0): 8 * MB, ("t", 1): 4 * MB, ("t", 2): MB}
    cross, stuck = plan_cross(1, [("t", 0), ("t", 1), ("t", 2)], sizes, _view(), closed={})
    # t-0 already has broker 2: broker 3's /x; t-1 then fits best on 3's /x too (95-8 > 80)
    assert cross[("t", 0)].replicas == (3, 2)
    assert cross[("t", 0)].log_dirs == ("/x", "any")
    assert cross[("t", 1)].replicas == (3,)
    assert cross[("t", 1)].log_dirs == ("/x",)
    # t-2 lives on every broker: nowhere to go, and it says so
    assert ("t", 2) in stuck
    assert "already holds it" in stuck[("t", 2)]


def test_closed_directories_and_partitions_already_leaving_are_not_used() -> None:
    sizes = {("t", 0): 8 * MB, ("t", 1): 4 * MB}
    view = _view()
    moving = ClusterView(view.brokers, view.partitions, view.dirs, frozenset({("t", 1)}))
    cross, stuck = plan_cross(
        1, [("t", 0), ("t", 1)], sizes, moving, closed={(3, "/x"): "is Cordoned"}
    )
    assert cross == {}
    assert ("t", 1) not in cross
    assert ("t", 1) not in stuck
    assert ("t", 0) in stuck  # broker 2 holds it, broker 3's only open dir is cordoned
    left = ClusterView(view.brokers, {**view.partitions, ("t", 1): (2,)}, view.dirs)
    assert plan_cross(1, [("t", 1)], sizes, left, closed={}) == ({}, {})


def test_a_broker_without_room_leaves_the_replica_stuck_with_the_reason() -> None:
    view = _view()
    cross, stuck = plan_cross(1, [("t", 1)], {("t", 1): 99 * MB}, view, closed={})
    assert cross == {}
    assert "no other broker has an open directory with room" in stuck[("t", 1)]


def test_the_reassignment_is_owned_by_the_logvolume_and_throttled_when_asked() -> None:
    broker = BrokerSpec.from_body(
        {"metadata": {"name": "b1", "namespace": "ns", "uid": "u1"},
         "spec": {"brokerId": 1, "cluster": "c1", "volumes": [{"id": 0, "size": "1Gi"}]}}
    )  # fmt: skip
    sizes = {("t", 1): 4 * MB}
    cross, _ = plan_cross(1, [("t", 1)], sizes, _view(), closed={})
    lv = {"metadata": {"name": "b1-data-0", "uid": "lv-uid"}}
    body = build_drain_reassignment(broker, lv, "drain-b1-data-0", cross, rate=1000)
    assert body["spec"] == {
        "cluster": "c1",
        "partitions": [{"topic": "t", "partition": 1, "replicas": [3], "logDirs": ["/x"]}],
        "throttle": {"interBrokerBytesPerSecond": 1000},
    }
    (owner,) = body["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("LogVolume", "b1-data-0", "lv-uid")
    assert body["metadata"]["labels"]["spindle.io/drains"] == "b1-data-0"
    assert "throttle" not in build_drain_reassignment(broker, lv, "n", cross)["spec"]


def test_progress_counts_down_with_a_rate_and_eta_and_completes_at_zero() -> None:
    first = progress(
        {}, _dir("/d0", {("t", 0): 100, ("t", 1): 100}, usable=0), "2026-01-01T00:00:00Z"
    )
    assert (first["bytesLeft"], first["replicasLeft"], first["bytesTotal"]) == (200, 2, 200)
    assert first["eta"] is None
    assert first["startTime"] == "2026-01-01T00:00:00Z"
    later = progress(first, _dir("/d0", {("t", 1): 100}, usable=0), "2026-01-01T00:00:10Z")
    assert (later["bytesLeft"], later["bytesPerSecond"]) == (100, 10)
    assert later["eta"] == "2026-01-01T00:00:20Z"
    assert later["timeRemaining"] == "10s"
    done = progress(later, _dir("/d0", {}, usable=0), "2026-01-01T00:00:19Z", reassignment="r")
    assert (done["bytesLeft"], done["replicasLeft"]) == (0, 0)
    assert done["completionTime"] == "2026-01-01T00:00:19Z"
    assert done["eta"] is None
    assert done["reassignment"] == "r"
    assert done["startTime"] == "2026-01-01T00:00:00Z"


def test_the_drain_rate_divides_by_the_times_of_the_answers_not_of_the_passes() -> None:
    """Answers at 0.4 s and 4.4 s read by passes at 1 s and 7 s (the second used the probe
    loop's last answer): 100 bytes went in 4 s, not in the passes' 6 s."""
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    def answer(parts: dict[tuple[str, int], int], seconds: float) -> DirReport:
        at = t0 + datetime.timedelta(seconds=seconds)
        return dataclasses.replace(_dir("/d0", parts, usable=0), described_at=at)

    full = {("t", 0): 100, ("t", 1): 100}
    first = progress({}, answer(full, 0.4), "2026-01-01T00:00:01Z")
    assert first["startTime"] == "2026-01-01T00:00:00.400Z"
    later = progress(first, answer({("t", 1): 100}, 4.4), "2026-01-01T00:00:07Z")
    assert (later["bytesLeft"], later["bytesPerSecond"]) == (100, 25)
    assert later["eta"] == "2026-01-01T00:00:08Z"


def test_a_drain_shows_no_rate_before_its_first_second() -> None:
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    full = _dir("/d0", {("t", 0): 100, ("t", 1): 100}, usable=0)
    first = progress({}, dataclasses.replace(full, described_at=t0), "2026-01-01T00:00:00Z")
    half = _dir("/d0", {("t", 1): 100}, usable=0)
    soon = dataclasses.replace(half, described_at=t0 + datetime.timedelta(seconds=0.3))
    early = progress(first, soon, "2026-01-01T00:00:00Z")
    assert (early["bytesLeft"], early["bytesPerSecond"], early["eta"]) == (100, 0, None)
