"""The Reassignment reconciler's progress step on fake views and times (no API server, no
broker): which time its rate divides by."""

from __future__ import annotations

import datetime
from typing import Any

from spindle.operator.decisions import reassignment as plan
from spindle.operator.decisions.reassignment import ClusterView, DirInfo
from spindle.operator.reconcile import reassignment as reconcile

A, B = "/data/a", "/data/b"
KIB = 1024
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _view(copied: int, answered: datetime.datetime) -> ClusterView:
    """Partition t-0 (2 MiB) on broker 1 in A, ``copied`` bytes of it arrived in B."""
    return ClusterView(
        brokers=frozenset({1}),
        partitions={("t", 0): (1,)},
        dirs={
            1: {
                A: DirInfo(A, None, {("t", 0): 2048 * KIB}),
                B: DirInfo(B, None, {}, {("t", 0): copied}),
            }
        },
        described_at=answered,
    )


def _pass(status: dict[str, Any], view: ClusterView, now: datetime.datetime) -> reconcile.Pass:
    target = {"topic": "t", "partition": 0, "replicas": [1], "logDirs": [B]}
    spec = plan.parse_reassignment({"cluster": "k", "partitions": [target]})
    body = {"metadata": {"name": "r", "namespace": "ns"}, "status": status}
    return reconcile.Pass(
        api=None,  # type: ignore[arg-type]  # the progress step makes no API call
        body=body,
        admin=None,  # type: ignore[arg-type]  # nor any broker call: the view is given
        now=now,
        emit=lambda *_: None,
        spec=spec,
        status=status,
        view=view,
    )


def test_the_rate_divides_by_the_time_between_describe_log_dirs_answers() -> None:
    """Not by the time between passes: two started 0.36 s apart whose answers came 2 s apart (the first read fast, the
    second slowed by a loaded machine): 300 KiB in 2 s is 150 KiB/s, not 830 KiB/s."""
    status: dict[str, Any] = {
        "phase": "Moving",
        "startTime": "2026-01-01T00:00:00Z",
        "partitions": [
            {"topic": "t", "partition": 0, "phase": "Moving", "originalReplicas": [1],
             "originalLogDirs": [A], "bytesTotal": 0, "bytesDone": 0}
        ],
    }  # fmt: skip
    first = _pass(status, _view(0, T0), T0 - datetime.timedelta(seconds=1.64))
    reconcile.progress(first)
    assert first.status["lastProbeTime"] == "2026-01-01T00:00:00.000Z"
    second_start = T0 - datetime.timedelta(seconds=1.28)
    second = _pass(
        dict(first.status), _view(300 * KIB, T0 + datetime.timedelta(seconds=2)), second_start
    )
    reconcile.progress(second)
    assert second.status["bytesDone"] == 300 * KIB
    assert second.status["bytesPerSecond"] == 150 * KIB
    assert second.status["lastProbeTime"] == "2026-01-01T00:00:02.000Z"
