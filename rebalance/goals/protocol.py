"""What goals read of the planners that use them: the greedy's live state (``State``) and the
exact model being built (``ExactModel``), as small protocols.

Why protocols: a goal answers questions about a placement (is this move inside my band, what
are my rows in the program); it needs a few figures of whoever asks, not the optimiser
itself. With the goals importing ``search.state`` or ``exact.mip`` the dependency pointed the
wrong way (the optimisers depend on the goals, not the reverse) and a new goal had to know
the optimiser's module layout. ``search.state.PlannerState`` and ``exact.mip.Model`` satisfy
these structurally (mypy checks it where they are passed to a goal); a goal that needs one
more figure adds it here and where it is computed.

May import ``input`` only.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from spindle.rebalance.input.model import Cluster
from spindle.rebalance.input.scope import Scope


class State(Protocol):
    """The greedy's live figures a goal's ``accepts`` and bands read, and the bands a goal's
    ``set_targets`` writes (``search.state``)."""

    #: The snapshot and the request's scope.
    c: Cluster
    s: Scope
    #: The snapshot's mean utilisation over hosting capacity, and mean serving replicas and
    #: leaders per hosting broker (what the bands centre on).
    mean_util: float
    mean_reps: float
    mean_leaders: float
    #: Per broker: hosting capacity, and its capacity threshold's bytes.
    b_cap: np.ndarray
    b_hard: np.ndarray
    #: Per replica: whether it leads its partition now.
    lead: np.ndarray
    #: Per directory: its broker, capacity, capacity threshold's bytes, whether Active.
    dir_b: np.ndarray
    total: np.ndarray
    hard: np.ndarray
    active: np.ndarray
    #: Per broker: bytes on Active dirs now, their capacity (inf where none), the byte band's
    #: floor as a utilisation, and the top of the byte band in bytes.
    a_load: np.ndarray
    _a_cap_safe: np.ndarray
    _lo_util: np.ndarray
    b_lo: np.ndarray
    b_hi: np.ndarray
    #: Per broker: serving replicas and leaders now, and the count bands.
    b_reps: np.ndarray
    b_leaders: np.ndarray
    c_lo: int
    c_hi: int
    l_lo: int
    l_hi: int


class Rows(Protocol):
    """The constraint-row buffer (``highs.Rows``)."""

    def add_merged(self, cols: list[int], vals: list[float], lo: float, hi: float) -> None: ...


class ExactModel(Protocol):
    """The mixed-integer program being built, as a goal's ``exact_rows`` adds to it
    (``exact.mip.Model``): columns and figures in units of the largest disk."""

    cluster: Cluster
    scope: Scope
    inf: float
    #: Per directory: external bytes, capacity, capacity threshold's bytes, bytes in the
    #: snapshot, whether Active, whether it may receive; its load column (hosting dirs).
    ext: np.ndarray
    total: np.ndarray
    hard: np.ndarray
    load0: np.ndarray
    active: np.ndarray
    recv: np.ndarray
    load_col: dict[int, int]
    #: Directories whose disk band is left out (out of reach).
    excused_dirs: frozenset[int]
    #: Per placement column: its broker, and whether its replica leads; columns per dir.
    xb: np.ndarray
    x_lead: np.ndarray
    by_d: list[list[int]]
    #: Per broker: hosting capacity, and the mean its rack can reach over ``mean``.
    b_cap: np.ndarray
    rack_share: np.ndarray
    mean: float
    mean_replicas: float
    mean_leaders: float
    #: Slack prices of a count band and a byte band.
    w_count: float
    w_bytes: float
    #: Per partition: its rack limit, and whether the rack rule binds it.
    limits: np.ndarray
    keep_rack: np.ndarray

    @property
    def rows(self) -> Rows:
        """Where a goal's own rows go (read-only here: a goal adds rows, never swaps the
        buffer)."""
        ...

    def band(
        self, cols: list[int], vals: list[float], lo: float, hi: float, weight: float
    ) -> None: ...

    def one_sided(
        self, cols: list[int], vals: list[float], bound: float, *, upper: bool
    ) -> None: ...

    def dirs_of(self, b: int) -> list[int]: ...

    def partition(self, p: int) -> tuple[list[int], list[int]]: ...


__all__ = ["ExactModel", "Rows", "State"]
