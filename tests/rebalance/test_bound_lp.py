"""The lower bound accounts for the count goals (issue 15): a linear program over brokers and
directories (``bound_lp``), never above the fewest bytes any plan meeting every goal moves."""

from __future__ import annotations

from typing import Any

from spindle.rebalance.model import Goals, parse_snapshot
from spindle.rebalance.pipeline import make_plan
from spindle.rebalance.scope import Request

from .test_mip_optimum import optimum


def _counts_apart() -> dict[str, Any]:
    """Two brokers holding the same bytes, one in eight small replicas, one in two large
    ones: bytes are in band, replica counts (8 and 2 around a mean of 5) are not."""
    sizes = [10] * 8 + [40] * 2
    return {
        "version": 1,
        "brokers": [
            {
                "id": b,
                "rack": rack,
                "logDirs": [
                    {"path": "/d0", "state": "Active", "totalBytes": 1000, "usableBytes": 920}
                ],
            }
            for b, rack in ((1, "a"), (2, "b"))
        ],
        "partitions": [
            {
                "topic": "t",
                "partition": p,
                "replicas": [1 if p < 8 else 2],
                "leader": 1 if p < 8 else 2,
                "logDirs": ["/d0"],
                "sizeBytes": size,
            }
            for p, size in enumerate(sizes)
        ],
    }


def test_count_goals_raise_the_bound_where_bytes_alone_need_nothing() -> None:
    cluster = parse_snapshot(_counts_apart())
    result = make_plan(cluster, Request(mode="full"), goals=Goals(), detail=False)
    s = result.summary
    bounds = s["lowerBounds"]
    assert bounds["balance"] == 0  # bytes alone: already in band
    # Broker 1 sheds at least two of its 10-byte replicas, and broker 2, taking them,
    # must give bytes back to stay in its byte band.
    assert bounds["lp"] >= 20
    assert bounds["bytes"] == bounds["lp"]
    best = optimum(cluster, Goals())
    assert best is not None
    assert bounds["bytes"] <= best + 1
    assert s["after"]["replicas"]["met"]
    assert s["bytesMoved"]["total"] >= bounds["bytes"]
