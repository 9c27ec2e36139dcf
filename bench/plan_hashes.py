"""A sha256 per plan over a fixed set of cases: the proof that a restructure of the planner
changed no plan (not a test; run ``.venv/bin/python -P bench/plan_hashes.py``, save its last
line, change the code, run it again and compare).

Each hash covers what ``spindle-rebalance plan`` writes: the reassignment JSON, the election
JSON and the summary without its wall-clock parts (``timings``, and every ``seconds`` inside
it, e.g. the exact solver's, and the solve times quoted in ``unmet``'s ``tried``); a refused plan hashes its message. The cases:

  ``pins``      ``tests/rebalance/test_plan_pins``' cluster in every mode, and capped
  ``small``     ``generator.small_shape`` seeds 0-11 (the exact planner's sizes: the MIP and
                the repair run here)
  ``mid``       ``generator.mid_shape`` seeds 0-23 (the sweep's and the exchange tests')
  ``exact``     the exact planner alone (``exact.solve``, elastic and not) on small clusters,
                the repair's neighbourhood solve (``repair.solve_near``), and the exact
                fallback's tests' clusters planned whole (one rescued, one proved impossible)
  ``families``  every ``generator.FAMILIES`` shape, seeds 0-2 at 3K, 11.5K and 20K replicas:
                the 27 family cases the earlier restructures hashed
  ``million``   with ``--million``: the combined family at 1M replicas (a few minutes)

Ends with ONE JSON line: ``{"bench": "plan_hashes", "hashes": {case: sha256}, "all": sha256}``.
``--compare FILE`` also prints the cases whose hash differs from FILE's last line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from spindle.rebalance.generator import (
    FAMILIES,
    Shape,
    family_shape,
    generate,
    mid_shape,
    small_shape,
)
from spindle.rebalance.input.model import Goals, PlanError
from spindle.rebalance.input.scope import Request

try:  # the facade (spindle.rebalance.api); the code before it had only the pipeline
    from spindle.rebalance.api import plan as _facade
except ImportError:  # pragma: no cover - the code before the facade
    _facade = None  # type: ignore[assignment]

#: tests/rebalance/test_plan_pins' cluster.
PIN_SHAPE = Shape(
    brokers=6,
    disks=2,
    replicas=600,
    racks=3,
    offline_dirs=1,
    draining_dirs=1,
    new_brokers=1,
    seed=3,
)
MODES = ("full", "intra-broker", "add-brokers", "fix-offline", "remove-volumes")


def _make_plan_of(cluster: Any, request: Request, **kw: Any) -> Any:
    if _facade is not None:
        return _facade(cluster, request, Goals(), **kw)
    from spindle.rebalance.pipeline import make_plan  # type: ignore[import-not-found]

    return make_plan(cluster, request, goals=Goals(), **kw)


def _make_plan(shape: Shape, request: Request) -> Any:
    return _make_plan_of(generate(shape), request)


def _strip(data: Any) -> Any:
    """The data without its wall-clock parts."""
    if isinstance(data, dict):
        return {k: _strip(v) for k, v in data.items() if k not in ("timings", "seconds")}
    if isinstance(data, list):
        return [_strip(v) for v in data]
    if isinstance(data, str):  # "exact MIP (HiGHS): optimal in 0.336s, used" (``tried``)
        return re.sub(r" in [0-9.]+s\b", " in Ns", data)
    return data


def _written(data: Any) -> str:
    """As ``spindle-rebalance plan`` writes its files."""
    return json.dumps(data, separators=(",", ":")) + "\n"


def digest(shape: Shape, request: Request) -> str:
    try:
        result = _make_plan(shape, request)
        text = _written(result.plan) + _written(result.election) + _written(_strip(result.summary))
    except PlanError as exc:
        text = f"PlanError: {exc}\n"
    return hashlib.sha256(text.encode()).hexdigest()


# tests/rebalance/test_exact_fallback's clusters.
RESCUED = Shape(
    brokers=6,
    disks=3,
    replicas=71,
    replication=2,
    racks=1,
    new_brokers=1,
    offline_dirs=2,
    draining_dirs=1,
    target_utilisation=0.65,
    seed=1452,
)
IMPOSSIBLE = Shape(
    brokers=3,
    disks=2,
    replicas=79,
    replication=2,
    racks=2,
    offline_dirs=1,
    target_utilisation=0.65,
    seed=4988,
)


def _solved(found: Any) -> str:
    """An exact solve's outcome, without its seconds."""
    where = None if found.cur_dir is None else found.cur_dir.tolist()
    text = json.dumps([found.status, where, found.bytes_moved, found.violation, found.variables])
    return hashlib.sha256(text.encode()).hexdigest()


def exact_digest(shape: Shape, how: str) -> str:
    """``exact.solve`` (``how``: ``elastic`` or ``strict``) or ``repair.solve_near`` over
    brokers 0 and 3 of the greedy's own plan (``near``)."""
    import numpy as np
    from spindle.rebalance.analysis.achievable import unachievable
    from spindle.rebalance.exact import mip as exact
    from spindle.rebalance.exact import repair
    from spindle.rebalance.input.scope import build_scope

    cluster, request, goals = generate(shape), Request(mode="full"), Goals()
    scope = build_scope(cluster, request)
    if how != "near":
        return _solved(exact.solve(cluster, scope, goals, elastic=how == "elastic"))
    planned = _make_plan_of(cluster, request, exact_limit=0)
    inside = np.zeros(cluster.n_brokers, bool)
    inside[[0, 3]] = True
    near = exact.Near(planned_dir=planned.placement[1], brokers=inside)
    excused = unachievable(cluster, scope, goals)
    return _solved(repair.solve_near(cluster, scope, goals, near, excused))


def cases(million: bool) -> list[tuple[str, Shape, Request | str]]:
    out: list[tuple[str, Shape, Request | str]] = [
        (f"pins/{m}", PIN_SHAPE, Request(mode=m)) for m in MODES
    ]
    out.append(("pins/full-capped", PIN_SHAPE, Request(mode="full", max_moves=40)))
    out += [(f"small/{s}", small_shape(s), Request(mode="full")) for s in range(12)]
    out.append(("exact/rescued", RESCUED, Request(mode="full")))
    out.append(("exact/impossible", IMPOSSIBLE, Request(mode="full")))
    for seed in range(4):
        for how in ("elastic", "strict", "near"):
            out.append((f"exact/{how}/{seed}", small_shape(seed), how))
    out.append(("exact/elastic/offline", replace(small_shape(0), offline_dirs=1), "elastic"))
    out.append(("exact/strict/offline", replace(small_shape(0), offline_dirs=1), "strict"))
    out += [(f"mid/{s}", mid_shape(s), Request(mode="full")) for s in range(24)]
    for fam in FAMILIES:
        for seed, n in enumerate((3_000, 11_500, 20_000)):
            out.append(
                (f"families/{fam}/{seed}/{n}", family_shape(fam, seed, n), Request(mode="full"))
            )
    if million:
        out.append(
            ("million/combined", family_shape("combined", 0, 1_000_000), Request(mode="full"))
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--million", action="store_true", help="also the combined 1M case")
    ap.add_argument("--only", default="", help="only the cases whose name starts with this")
    ap.add_argument("--compare", type=Path, help="a previous run's output to compare against")
    args = ap.parse_args()
    hashes: dict[str, str] = {}
    for name, shape, request in cases(args.million):
        if not name.startswith(args.only):
            continue
        t0 = time.perf_counter()
        if isinstance(request, str):
            hashes[name] = exact_digest(shape, request)
        else:
            hashes[name] = digest(shape, request)
        print(f"{name:32s} {hashes[name][:16]} {time.perf_counter() - t0:6.1f}s", flush=True)
    whole = hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()
    if args.compare is not None:
        before = json.loads(args.compare.read_text().strip().splitlines()[-1])["hashes"]
        differ = sorted(k for k in hashes if k in before and before[k] != hashes[k])
        missing = sorted(k for k in hashes if k not in before)
        print(
            f"compared with {args.compare}: {len(hashes) - len(differ) - len(missing)} same, "
            f"{len(differ)} differ {differ}, {len(missing)} not there before"
        )
    print(json.dumps({"bench": "plan_hashes", "hashes": hashes, "all": whole}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
