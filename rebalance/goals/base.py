"""What every planner goal answers, and the figures a placement is judged by.

Why one interface (Cruise Control's ``analyzer/goals/Goal.java``): the greedy, the exact
model, the report and the reachability check each need the same few answers about a goal --
is it in the mode's scope, what is its band, which brokers or directories are outside it,
how does it rank a destination, what are its rows in the mixed-integer program. With one
object per goal those answers sit together, so a new goal is one module, and the callers
loop over goals instead of naming them.

``Placed`` is a placement's loads recomputed from replica positions alone: the report's
independent view, which shares nothing with the greedy's running totals.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import numpy.typing as npt
from spindle.rebalance.goals.bands import band_floor
from spindle.rebalance.goals.protocol import ExactModel, State
from spindle.rebalance.input.model import OFFLINE, Cluster, Goals
from spindle.rebalance.input.scope import Scope

if TYPE_CHECKING:
    from spindle.rebalance.goals.reach import Reach

Value = TypeVar("Value", float, npt.NDArray[np.float64])

#: How much a taker's byte fullness counts next to its count in the count goals' scores:
#: a tie-breaker between takers of equal count.
UTIL_WEIGHT = 1e-3
#: How much a directory's own fullness counts in the count goals' destination score: a
#: tie-breaker between the taker's directories.
DIR_UTIL_WEIGHT = 1e-6

#: Every broker, as ``SoftGoal.take_room``'s ``at``.
ALL = slice(None)

#: Why an offender is out of band when it sits on a broker with an Offline directory.
BLOCKED = (
    "broker has an Offline directory: Kafka answers AlterReplicaLogDirs there with "
    "KAFKA_STORAGE_ERROR, so its disks are not rebalanced and it receives no replicas"
)
#: Why an offender is out of band otherwise.
GENERIC = (
    "no single move of an unmoved replica fixes it without breaking a hard rule or another band"
)


def dir_loads(cluster: Cluster, scope: Scope, cur_dir: np.ndarray) -> np.ndarray:
    """Bytes on each directory for a placement: replicas plus external bytes; directories
    that do not host (Offline, emptied) count their replicas only."""
    rep = np.bincount(cur_dir, weights=cluster.rep_size, minlength=cluster.n_dirs)
    return rep + np.where(scope.hosting, cluster.dir_external(), 0)


def broker_loads(
    cluster: Cluster, scope: Scope, cur_dir: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-directory load and capacity, then per-broker load and capacity over hosting
    directories, and which brokers host at all: what every balance figure starts from."""
    host = scope.hosting
    load = dir_loads(cluster, scope, cur_dir)
    total = cluster.dir_total.astype(float)
    n_b = cluster.n_brokers
    b_load = np.bincount(cluster.dir_broker, weights=load * host, minlength=n_b)
    b_cap = np.bincount(cluster.dir_broker, weights=total * host, minlength=n_b)
    return load, total, b_load, b_cap, b_cap > 0


@dataclass(frozen=True, kw_only=True)
class Placed:
    """A placement and its loads, recomputed from where each replica ends."""

    cluster: Cluster
    scope: Scope
    goals: Goals
    cur_broker: np.ndarray
    cur_dir: np.ndarray
    #: Which replica leads each partition (None: as in the snapshot).
    leader: np.ndarray | None
    load: np.ndarray
    total: np.ndarray
    b_load: np.ndarray
    b_cap: np.ndarray
    #: Brokers with at least one hosting directory.
    hb: np.ndarray

    @classmethod
    def of(
        cls,
        cluster: Cluster,
        scope: Scope,
        goals: Goals,
        cur_broker: np.ndarray,
        cur_dir: np.ndarray,
        leader: np.ndarray | None = None,
    ) -> Placed:
        load, total, b_load, b_cap, hb = broker_loads(cluster, scope, cur_dir)
        return cls(
            cluster=cluster,
            scope=scope,
            goals=goals,
            cur_broker=cur_broker,
            cur_dir=cur_dir,
            leader=leader,
            load=load,
            total=total,
            b_load=b_load,
            b_cap=b_cap,
            hb=hb,
        )

    def offline_brokers(self) -> np.ndarray:
        out = np.zeros(self.cluster.n_brokers, bool)
        out[self.cluster.dir_broker[self.cluster.dir_state == OFFLINE]] = True
        return out


@dataclass(slots=True, kw_only=True)
class Move:
    """A candidate move as the destination search judges it: replica ``r`` of ``s`` bytes
    onto directories ``cand`` on brokers ``b`` (one per candidate, or one for all), leaving
    those brokers with ``b_after`` bytes and the directories with ``dir_after``."""

    r: int
    s: float
    cand: np.ndarray
    b: Any
    b_after: Any
    dir_after: np.ndarray


def band_figures(
    values: np.ndarray, factor: float, *, integer: bool, mean: float | None = None
) -> dict[str, Any]:
    """A balance goal's figures over per-broker values: mean, extremes, how many are out of
    the band around the mean, and whether none is."""
    if len(values) == 0:
        return {"mean": 0, "max": 0, "min": 0, "met": True}
    m = float(values.mean()) if mean is None else mean
    hi = np.ceil(factor * m) if integer else factor * m
    lo = np.floor(band_floor(factor, m)) if integer else band_floor(factor, m)
    tol = 0 if integer else 1e-9 * max(m, 1e-12)
    out = int(((values > hi + tol) | (values < lo - tol)).sum())
    return {
        "mean": round(m, 6),
        "max": round(float(values.max()), 6),
        "min": round(float(values.min()), 6),
        "maxOverMean": round(float(values.max()) / m, 6) if m else 0.0,
        "minOverMean": round(float(values.min()) / m, 6) if m else 0.0,
        "outOfBand": out,
        "met": out == 0,
    }


def broker_offenders(
    placed: Placed, bad: np.ndarray, values: np.ndarray, limit: int
) -> list[dict[str, Any]]:
    """Offending brokers as the summary lists them, each with the most specific reason."""
    offline_b = placed.offline_brokers()
    ids = placed.cluster.broker_ids
    return [
        {
            "broker": int(ids[b]),
            "value": round(float(values[b]), 4),
            "why": BLOCKED if offline_b[b] else GENERIC,
        }
        for b in bad[:limit].tolist()
    ]


class Goal(ABC):
    """One planner goal. Hard goals (``hard``) must hold or the plan is refused; soft goals
    keep a figure inside a band where the hard rules allow."""

    #: The summary's key for this goal (``goalStatus``, ``before``/``after``, ``unmet``).
    name: ClassVar[str]
    hard: ClassVar[bool] = False
    #: What its rows in the exact model are per (``exact_rows``' index): ``"broker"``,
    #: ``"dir"`` (added with each directory's load column) or ``"partition"`` (with each
    #: partition's one-replica-per-broker rows).
    exact_unit: ClassVar[str] = "broker"
    #: Where among one broker's rows its own go (lower first): HiGHS's search path depends
    #: on row order, so the order the rows have always had is kept (a new goal goes last).
    exact_rank: ClassVar[int] = 100
    #: What its offenders and out-of-reach entries are keyed by: ``"broker"`` or ``"dir"``.
    offends: ClassVar[str] = "broker"
    #: The greedy's steps that work on this goal, by key (``search.core.STEP_KINDS``), run
    #: in the goals' order: the goal names them, the search implements them (a goal never
    #: imports the optimiser). None: its band is kept by the steps of the goals before it
    #: and worked on by none of its own.
    steps: ClassVar[tuple[str, ...]] = ()

    def __init__(self, settings: Goals) -> None:
        self.settings = settings

    @abstractmethod
    def in_scope(self, scope: Scope) -> bool:
        """Whether the mode works on this goal (a goal out of scope is reported, not fixed)."""

    @abstractmethod
    def violations(self, placed: Placed, *, limit: int) -> list[Any]:
        """What breaks the goal in a placement (at most ``limit`` entries), each saying why."""

    def exact_rows(self, model: ExactModel, b: int) -> None:
        """Add this goal's rows for broker ``b`` to the exact model (none by default)."""
        del model, b

    def excuses(self, rc: Reach, out: dict[str, dict[Any, str]]) -> None:
        """What this hard goal puts out of the soft goals' reach, added to their entries in
        ``out`` (by goal name) after their own (``SoftGoal.out_of_reach``); none by default."""
        del rc, out


class SoftGoal(Goal):
    """A balance goal: a figure per broker (or directory) within a band around its mean.

    ``vetoes``: which balancing moves must keep this goal's band (``accepts``): ``"bytes"``,
    every balancing move (byte and count moves: the byte goals run first and the count
    moves after them may not undo them); ``"counts"``, only count moves (the count goals
    run last; a byte move is only ranked by them, ``scoring``). A move that must go
    somewhere (an evacuation) is ranked by every goal and vetoed by none."""

    vetoes: ClassVar[str] = "bytes"

    @abstractmethod
    def figures(self, placed: Placed) -> dict[str, Any]:
        """The summary's balance figures of this goal for a placement."""

    def out_of_reach(self, rc: Reach, out: dict[Any, str]) -> None:
        """The brokers (or directories) whose band no plan obeying the hard rules reaches,
        with why, added to ``out`` (``reach.unachievable``; none by default: every band is
        taken as reachable, which errs towards calling a miss a planner shortfall)."""
        del rc, out

    def set_targets(self, st: State) -> None:
        """Set this goal's band on the greedy's state, from the snapshot's figures there
        (once a plan, before any move; none by default: a band read live)."""
        del st

    def take_room(self, st: State, *, leading: bool, at: Any = ALL) -> Any:
        """Per broker (those ``at``: an index, or all): whether it may take one more replica (a leading one: ``leading``) in
        a count move and keep this goal's band, whatever the replica's size; None: the goal
        sets no such limit (a byte band's limit depends on the size: ``accepts``). The count
        phases pick takers by these, over every goal (``PlannerState.takes_one``)."""
        del st, leading, at
        return None

    def give_room(self, st: State, *, leading: bool, at: Any = ALL) -> Any:
        """Per broker (those ``at``): whether it may lose one replica (a leading one: ``leading``) and keep
        this goal's band's floor, whatever the replica's size; None: no such limit. The count
        phases pick givers by these (``PlannerState.gives_one``)."""
        del st, leading, at
        return None

    @abstractmethod
    def accepts(self, st: State, mv: Move) -> Any:
        """Whether the move keeps this goal's band, per candidate: a balancing move must
        (goals already met veto it); a move that must go somewhere is only ranked by it."""
