"""The sequential core: a greedy that walks only the replicas it moves.

Why greedy and why this order: every byte moved is a byte copied over a network or a disk, so
the planner first computes how much must leave each broker and each directory (the bands of
the soft goals, the hard capacity limit, the directories that must be emptied) and then moves
the largest replica that does not overshoot what is still needed ("best fit"), from the
fullest directory of the giving broker to the emptiest directory of the taking one. Moving
across brokers that way also evens out the directories on both ends, so brokers and disks are
planned in one pass; what remains inside a broker is fixed by moves between its own disks,
which cost no network. Replica and leader counts are evened last with the smallest replicas,
mostly in rounds: a proposer (``propose``; Spark tasks in the real job) turns the live state
into a batch of candidate moves, this driver re-checks each against what earlier moves
changed and applies it or skips it, and the next round proposes again; the one-move-at-a-time
search finishes what the rounds leave.

Rules kept at every step (never checked only at the end):
  - a replica moves at most once (``moved``);
  - a destination directory is Active, in scope, and stays under the capacity threshold;
  - a destination broker holds no other replica of the partition, held none in the snapshot
    (Kafka names replicas by broker: replicas [2, 4, 3] after moving slot 1 from 2 to 4 and
    slot 0 from 1 to 2 is one copy to broker 4 and a reorder, not two moves), and its rack
    holds fewer than ``max_per_rack`` of them;
  - the replica keeps its position in the replica list, so order and leadership are kept.

Deterministic: every choice is an argmin/argmax over arrays in index order, so ties go to the
lowest index; the same snapshot gives the same moves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from spindle.rebalance import goals as goals_registry
from spindle.rebalance.goals import (
    BrokerBytes,
    Capacity,
    DiskBytes,
    Goal,
    LeaderCount,
    Rack,
    ReplicaCount,
)
from spindle.rebalance.input.model import Cluster, Goals, SnapshotError, executed
from spindle.rebalance.input.scope import Request, Scope, build_scope
from spindle.rebalance.search.byte_phases import (
    balance_broker_bytes,
    balance_disks,
    evacuate,
    fix_racks,
    relieve_capacity,
)
from spindle.rebalance.search.cancel import cancel_pairs
from spindle.rebalance.search.chains import refill_givers
from spindle.rebalance.search.count_phases import balance_counts, reorder_leaders
from spindle.rebalance.search.exchange import exchange_counts
from spindle.rebalance.search.leader_paths import reorder_paths
from spindle.rebalance.search.placement import Placer
from spindle.rebalance.search.prepare import Prepared, prepare_local
from spindle.rebalance.search.simplify import retarget_into, simplify_intra


@dataclass(kw_only=True)
class Outcome:
    """The core's result: where each replica ends, and what could not be done."""

    cur_broker: np.ndarray
    cur_dir: np.ndarray
    moved: np.ndarray
    #: Goals (hard or soft) that were not met, with why.
    unmet: list[dict[str, object]] = field(default_factory=list)
    #: Hard-goal failures: the plan must be refused.
    hard_failures: list[str] = field(default_factory=list)
    capped: bool = False
    n_moves: int = 0
    #: Which replica leads each partition after the plan (differs only with leader_reorder).
    leader: np.ndarray | None = None
    #: Seconds the driver spent per phase, and inside destination scoring (``dest_cross`` /
    #: ``dest_intra``) with how many destinations it scored: where the sequential time goes.
    profile: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One step of the greedy: the goals it works on (none: the mode's evacuation, which is
    the request itself), whether it runs for this plan now, and what it does."""

    #: The profile's key for the seconds it took.
    lap: str
    goals: tuple[type[Goal], ...]
    runs: Callable[[Planner], bool]
    act: Callable[[Planner], object]


def _counts(pl: Planner) -> None:
    """Replica then leader counts; leader moves can push a replica count out again (and the
    reverse), so up to three passes. Leadership goes by preferred-leader changes first (no
    bytes), one hop then along chains; bytes move for leaders only where those cannot reach
    the band."""
    for _ in range(3):
        refill_givers(pl)
        balance_counts(pl, leaders=False)
        if pl.g.leader_reorder:
            reorder_leaders(pl)
            reorder_paths(pl)
        balance_counts(pl, leaders=True)
        if pl.counts_in_band():
            break


def _simplify(pl: Planner) -> None:
    """Fewer bytes for the same bands: a broker's moves between its own directories spared
    by a replica landing on it instead of a rack-mate, then pairs of such moves by one."""
    retarget_into(pl)
    simplify_intra(pl)


def _open(pl: Planner) -> bool:
    return not pl.capped


#: The request's own step, before any goal's: the mode's evacuation (dirs to empty).
FIRST: tuple[Step, ...] = (Step("evacuateS", (), lambda pl: True, evacuate),)

#: The greedy's steps by key (``Step.lap``): each goal names the ones that work on it
#: (``Goal.steps``), and they run in the goals' priority order (``goals.GOALS``): a goal's
#: step runs once the goals before it have done what they can, and its moves may not undo
#: them: hard goals (racks, capacity) are kept by every destination search, byte balance is
#: kept by the count moves (strict destinations stay inside the byte and disk bands:
#: ``SoftGoal.vetoes``), and counts only rank byte moves. Why the goal names and the search
#: holds the step: a step is search code, and the goals may not import the optimiser. A goal
#: whose band the steps here already work on names one of them (or none: the leader count,
#: worked on with the replica count's); one with a step of its own registers it here (or,
#: from a test or plugin, ``register_step``).
STEP_KINDS: dict[str, Step] = {
    step.lap: step
    for step in (
        Step("fixRacksS", (Rack,), lambda pl: pl.s.fix_racks and _open(pl), fix_racks),
        Step(
            "relieveCapacityS",
            (Capacity,),
            lambda pl: pl.s.balance_disks and _open(pl),
            relieve_capacity,
        ),
        Step(
            "brokerBytesS",
            (BrokerBytes,),
            lambda pl: pl.s.balance_brokers and pl.s.cross_ok and _open(pl),
            balance_broker_bytes,
        ),
        Step(
            "diskBytesS", (DiskBytes,), lambda pl: pl.s.balance_disks and _open(pl), balance_disks
        ),
        Step(
            "countsS",
            (ReplicaCount, LeaderCount),
            lambda pl: pl.s.balance_counts and pl.s.cross_ok and _open(pl),
            _counts,
        ),
        # Exchanges decide for themselves (only when counts are in scope and still out of
        # band); looked up at call time so a benchmark or test may switch them off.
        Step(
            "exchangeS",
            (ReplicaCount, LeaderCount),
            lambda pl: True,
            lambda pl: exchange_counts(pl),
        ),
    )
}


def register_step(step: Step) -> None:
    """Make ``step`` available to the goals that name it (``Goal.steps``) by its key."""
    STEP_KINDS[step.lap] = step


#: After every goal's steps: disk balance again, to even out what the count moves left
#: inside brokers; then fewer bytes for the same bands, without changing any earlier step --
#: replicas passed between two brokers both ways stay put, then moves between directories.
LAST: tuple[Step, ...] = (
    STEP_KINDS["diskBytesS"],
    Step(
        "cancelS",
        (BrokerBytes, ReplicaCount, LeaderCount, DiskBytes),
        lambda pl: pl.s.cross_ok and _open(pl),
        cancel_pairs,
    ),
    Step("simplifyS", (DiskBytes,), lambda pl: pl.s.balance_disks and _open(pl), _simplify),
)


def goal_order_steps() -> tuple[Step, ...]:
    """The greedy's steps: ``FIRST``, the steps each goal names (``Goal.steps``, looked up
    in ``STEP_KINDS``) in ``goals.GOALS``' order, then ``LAST``."""
    own = (STEP_KINDS[key] for goal in goals_registry.GOALS for key in goal.steps)
    return (*FIRST, *own, *LAST)


#: The steps a plan runs (a test or benchmark may swap them for one plan).
STEPS: tuple[Step, ...] = goal_order_steps()


class Planner(Placer):
    """The greedy over one cluster: the steps in order, then the result. Not thread-safe;
    one instance per plan.

    Why one object of ~47 methods (``PlannerState``'s 28 bookkeeping methods, ``Placer``'s
    17 of destination search and source picking, these 2): every step reads and changes the
    same loads, counts, bands, partition members and the caches keyed by them (``touched``
    versions, ``rack_open``, the small-replica pointers), and a move must update all of them
    at once (``apply``). Split into objects that each own a part, every move would have to
    reach into several and keep their caches consistent by hand; the split kept is by job:
    state (what is where, what a move changes), placement (where a replica may go), the
    driver (the order), with the phases as functions over it in their own modules."""

    def run(self) -> Outcome:
        prof: dict[str, float] = {}
        mark = time.perf_counter()
        for step in STEPS:
            if step.runs(self):
                step.act(self)
            now = time.perf_counter()
            prof[step.lap] = prof.get(step.lap, 0.0) + now - mark
            mark = now
        if self.capped:
            self.unmet.append(
                {"goal": "caps", "why": "--max-moves/--max-bytes reached; planning stopped"}
            )
        self._check_capacity()
        prof["destScoringS"] = self._dest_s
        prof["destScoringCalls"] = float(self._dest_n)
        prof["proposeS"] = self._prop_s
        prof["proposeRounds"] = float(self._prop_rounds)
        prof["proposals"] = float(self._prop_n)
        prof["proposalsApplied"] = float(self._prop_applied)
        return Outcome(
            cur_broker=self.cur_b,
            cur_dir=self.cur_d,
            moved=self.moved,
            unmet=self.unmet,
            hard_failures=self.hard_failures,
            capped=self.capped,
            n_moves=self.n_moves,
            leader=self.lead,
            profile=prof,
        )

    def _check_capacity(self) -> None:
        over = np.flatnonzero(self.hosting & (self.dir_load > self.hard + 0.5))
        fixes = self.s.balance_disks
        for d in over.tolist():
            what = (
                f"broker {self.c.broker_ids[self.dir_b[d]]} dir {self.c.dir_path[d]} ends at "
                f"{self.dir_load[d] / self.total[d]:.3f} of its size, above the capacity "
                f"threshold {self.g.capacity_threshold}"
            )
            if fixes and not self.capped:
                self.hard_failures.append(what + "; no replica could be moved off it")
            else:
                self.unmet.append(
                    {"goal": "capacity", "why": what + f" (not in {self.s.mode}'s scope)"}
                )


def plan_core(
    cluster: Cluster, prepared: Prepared, scope: Scope, *, goals: Goals, request: Request
) -> Outcome:
    """Run the greedy; raise nothing (the caller turns hard failures into a refused plan)."""
    if cluster.n_replicas and prepared.order.shape[0] != cluster.n_replicas:
        raise SnapshotError("prepared order does not cover every replica")
    return Planner(cluster, prepared, scope, goals=goals, request=request).run()


def reordered_leaders(
    cluster: Cluster,
    request: Request,
    goals: Goals,
    placement: tuple[np.ndarray, np.ndarray],
    leader: np.ndarray,
) -> np.ndarray:
    """Which replica leads each partition once the greedy's zero-byte leader steps (one hop,
    then along chains) have run over ``placement`` with ``leader``: the repair leaves the
    leader bands to preferred-leader changes, which move no bytes and no replica."""
    after = executed(cluster, placement, leader)
    scope = build_scope(after, request)
    pl = Placer(after, prepare_local(after, scope), scope, goals=goals, request=request)
    reorder_leaders(pl)
    reorder_paths(pl)
    return np.asarray(pl.lead, bool).copy()
