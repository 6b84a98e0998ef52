"""The search: coordinate descent over the autoscaling parameters, each point scored by one simulation.

The objective is lexicographic: a point that meets the goal (``evaluate.Goal``: servable attainment within the slack of
the ceiling's) beats one that does not; among those that meet it, fewer GPU-hours win, counting a warm minimum raised
above the stack's own once more (``Score.floor_gpu_hours``: the floor also holds through the quiet hours the trace does
not show); among those that do not, higher attainment wins, then fewer GPU-hours.

The search tunes autoscaling before the floor: the policy's own parameters (the load target, burst mode, the SLO guard,
the scale-down window, the maximum) come first and the warm minimum last, so a budget that runs out has spent itself on
the policy, and a raised minimum wins only where no policy setting met the goal or it is cheaper even with its extra
cost. Raising the floor until the fit part is met makes a fixed allocation (no scaling decision) that fits the part it
was searched on and nothing after it (``--holdout`` showed 14 of 19 tuned results were).

Each coordinate (one parameter of one role) tries its candidates from the best point so far and moves to the best of
them (a coordinate whose candidates add capacity in order, the target, the scale-down window and the warm minimum, by
bisection: the least capacity that meets the goal); passes repeat until a pass changes nothing or the evaluation budget
is spent. The order of coordinates and candidates is fixed and ties keep the current point, so a seed gives one result;
the budget is a number of simulations, so the time is bounded by what one simulation costs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuscale.tune.params import TuneParams

UTILISATIONS: tuple[float | None, ...] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
"""Stated utilisations tried after the SLO-derived target (below 0.3 a role holds over three times its work)."""
STABILISATION_S = (300, 600, 900, 1800, 3600)
MIN_REPLICAS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 16)


@dataclass(frozen=True)
class Score:
    """How one point did."""

    met: bool
    """It meets the goal."""
    attainment: float
    """Attainment over servable requests."""
    gpu_hours: float
    floor_gpu_hours: float = 0.0
    """GPU-hours the warm minimum raised above the stack's own holds over the run (raised replicas x GPUs x hours);
    charged once more among points that meet the goal, for the quiet hours outside the trace it also holds."""

    def key(self) -> tuple[float, float, float]:
        if self.met:
            return (1.0, -(self.gpu_hours + self.floor_gpu_hours), 0.0)
        return (0.0, self.attainment, -self.gpu_hours)

    def better_than(self, other: Score) -> bool:
        return self.key() > other.key()


@dataclass(frozen=True)
class Coordinate:
    """One parameter: ``role`` (None for the pool's ``consolidate_after``), the field, the values to try."""

    role: str | None
    name: str
    candidates: tuple[Any, ...]
    monotone: tuple[Any, ...] = ()
    """Candidates ordered by the capacity they give, least first (a lower utilisation, a longer scale-down window, a
    higher warm minimum): attainment and GPU-hours do not fall along it, so the cheapest that meets the goal is found
    by bisection (``_Search.bisect``, about log2 of their number in simulations) instead of trying each. The other
    candidates are tried one by one."""

    def at(self, p: TuneParams, value: Any) -> TuneParams:
        if self.role is None:
            return p.model_copy(update={self.name: value})
        return p.replace_role(self.role, **{self.name: value})

    def value(self, p: TuneParams) -> Any:
        if self.role is None:
            return getattr(p, self.name)
        return getattr(p.roles[self.role], self.name)


@dataclass
class SearchResult:
    start: TuneParams
    start_score: Score
    best: TuneParams
    best_score: Score
    evaluations: int
    """Simulations run (cache hits and refused points excluded)."""
    history: list[tuple[str, Any, Score]] = field(default_factory=list)
    """Every move: (coordinate, value, score after it)."""


Evaluate = Callable[[TuneParams], Score | None]
"""Score one point; None when the spec refuses it."""


def coordinates(
    start: TuneParams, *, keda: bool, consolidate_after: Sequence[str], warm_options: dict[str, Sequence[Any]] | None = None,
    min_floor: dict[str, int] | None = None,
) -> list[Coordinate]:
    """The search space around ``start``, in search order: the policy first (utilisation, burst mode, SLO guard,
    stabilisation, maximum per role), then the warm minimum per role, then ``consolidate_after`` and the warm-up
    windows."""
    roles = list(start.roles)
    out: list[Coordinate] = []
    for r in roles:
        # keda: the SLO-derived target first (None), then stated utilisations; hpa serves single metrics only
        util = tuple(sorted(UTILISATIONS, key=lambda u: -(u or 0.0)))
        out.append(Coordinate(r, "target_utilisation", ((None,) if keda else ()) + util, monotone=util))
    for r in roles:
        out.append(Coordinate(r, "burst_mode", (True, False)))
    if keda:
        for r in roles:
            out.append(Coordinate(r, "slo_guard", (True, False)))
    for r in roles:
        p = start.roles[r]
        windows = tuple(sorted({p.scale_down_stabilization_s, *STABILISATION_S}))
        out.append(Coordinate(r, "scale_down_stabilization_s", windows, monotone=windows))
    for r in roles:
        top = start.roles[r].max_replicas
        out.append(Coordinate(r, "max_replicas", tuple(sorted({top, max(1, round(top * 0.75)), max(1, round(top * 0.5))}, reverse=True))))
    for r in roles:
        p = start.roles[r]
        lo = (min_floor or {}).get(r, 0)
        mins = sorted({m for m in (*MIN_REPLICAS, p.min_replicas) if lo <= m <= p.max_replicas})
        out.append(Coordinate(r, "min_replicas", tuple(mins), monotone=tuple(mins)))
    if len(consolidate_after) > 1:
        out.append(Coordinate(None, "consolidate_after", tuple(consolidate_after)))
    for r, options in (warm_options or {}).items():
        if len(options) > 1:
            out.append(Coordinate(r, "warm_schedule", tuple(options)))
    return out


class _Search:
    """One search's state: the evaluation cache, the budget spent and the best point so far."""

    def __init__(self, evaluate: Evaluate, max_evals: int, progress: Callable[[int, int], None] | None) -> None:
        self.evaluate = evaluate
        self.max_evals = max_evals
        self.progress = progress
        self.cache: dict[str, Score | None] = {}
        self.evals = 0

    def score_of(self, p: TuneParams) -> Score | None:
        k = p.key()
        if k not in self.cache:
            if self.evals >= self.max_evals:
                return None
            self.cache[k] = self.evaluate(p)
            if self.cache[k] is not None:  # a point the spec refuses costs no simulation
                self.evals += 1
                if self.progress is not None:
                    self.progress(self.evals, self.max_evals)
        return self.cache[k]

    def along(self, c: Coordinate, result: SearchResult) -> None:
        """Try the values of one coordinate from the best point so far (each of its plain candidates, a bisection over
        its monotone ones); move to the best of them."""
        base, here = result.best, c.value(result.best)
        tried = [v for v in c.candidates if v not in c.monotone] + self.bisect(c, base)
        for v in tried:
            if v == here or self.evals >= self.max_evals:
                continue
            p = c.at(base, v)
            s = self.score_of(p)
            if s is not None and s.better_than(result.best_score):
                result.best, result.best_score = p, s

    def bisect(self, c: Coordinate, base: TuneParams) -> list[Any]:
        """The monotone values worth comparing: the one of most capacity the spec accepts (if even it misses the goal,
        it has the best attainment of them) and, when it meets the goal, the least capacity that still does, found by bisection. The
        values it scores are cached, so ``along`` compares them without running them again."""
        vals = list(c.monotone)
        if not vals:
            return []

        def met(i: int) -> bool | None:
            s = self.score_of(c.at(base, vals[i]))
            return None if s is None else s.met

        top = len(vals) - 1
        while top >= 0 and (ok := met(top)) is None:  # refused by the spec (costs no simulation): the next one down
            top -= 1
        if top < 0:
            return []
        if not ok:
            return [vals[top]]
        lo, hi = 0, top  # vals[hi] meets the goal
        while lo < hi and self.evals < self.max_evals:
            mid = (lo + hi) // 2
            if met(mid):
                hi = mid
            else:
                lo = mid + 1
        return [vals[hi], vals[top]]


def search(
    start: TuneParams, evaluate: Evaluate, coords: Sequence[Coordinate], *, max_evals: int, max_passes: int = 3,
    progress: Callable[[int, int], None] | None = None,
) -> SearchResult:
    """Coordinate descent from ``start``; ``progress(evaluations, max_evals)`` after each simulation."""
    state = _Search(evaluate, max_evals, progress)
    first = state.score_of(start)
    if first is None:
        raise ValueError("the stack's own autoscaling settings could not be simulated")
    result = SearchResult(start, first, start, first, 0)
    for _ in range(max_passes):
        moved = False
        for c in coords:
            before = result.best
            state.along(c, result)
            if result.best is not before:
                moved = True
                result.history.append((f"{c.role + '.' if c.role else ''}{c.name}", c.value(result.best), result.best_score))
        if not moved or state.evals >= max_evals:
            break
    result.evaluations = state.evals
    return result
