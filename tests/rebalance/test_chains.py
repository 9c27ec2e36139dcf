"""Two-move chains (``chains``): a refill hands a broker one replica from a donor with bytes
to spare, and the donor keeps its byte band."""

from __future__ import annotations

import numpy as np
from spindle.rebalance.chains import refill_one
from spindle.rebalance.core import Planner
from spindle.rebalance.generator import family_shape, generate
from spindle.rebalance.model import Goals
from spindle.rebalance.prepare import prepare_local
from spindle.rebalance.scope import Request, build_scope


def test_a_refill_takes_no_donor_below_its_byte_floor_however_much_the_taker_lacks() -> None:
    # The taker lacks far more than the donor may lose. Before, the best fit was sought
    # under what the taker lacked alone: combined seed 21 at 4000 replicas, a 3.7 GB replica
    # left a donor 2.04 GB above its floor 1.67 GB under it, and brokerUtilisation unmet.
    cluster = generate(family_shape("combined", 21, 4000))
    request = Request(mode="full")
    scope = build_scope(cluster, request)
    pl = Planner(cluster, prepare_local(cluster, scope), scope, goals=Goals(), request=request)
    taker = int(np.argmax(pl.b_hi - pl.b_load))
    donor = next(
        b
        for b in np.argsort(-pl.b_load).tolist()
        if b != taker and pl.rack_open(b, int(cluster.broker_rack[taker]))
    )
    sizes = np.sort(pl.size_f[pl.cur_b == donor])
    # The donor may lose a little more than its smallest replica, far less than its largest.
    spare = float(sizes[0]) * 1.5
    assert spare < float(sizes[-1])
    pl.b_lo[donor] = pl.b_load[donor] - spare
    others = set(range(cluster.n_brokers)) - {donor}
    lack = float(pl.b_hi[taker] - pl.b_load[taker])
    got = refill_one(pl, taker, lack, 0, 10**9, skip=others)
    assert 0 < got <= spare
    assert pl.b_load[donor] >= pl.b_lo[donor]
