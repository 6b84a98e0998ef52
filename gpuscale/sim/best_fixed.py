"""The best fixed allocation in hindsight: the cheapest constant replica count per role that meets the attainment goal
on the very run it is scored on (an achievable reference beside the ceiling and the lower bound).

It is found by search over runs of the simulator's ``fixed`` policy (``policies.FixedPolicy``, the ceiling's policy),
bounded: per role a bisection of its smallest count that meets the goal with every other role at the ceiling's count
(attainment does not fall when a role gets more replicas, so bisection is exact under that monotonicity), then, with
two roles, the first role from that minimum up to ``EXTRA_STEPS`` above it, each with a bisection of the second role
between its own minimum and the cheapest pair found so far. Every count is tried at most once (memoised), so a
disaggregated model costs about ``2 log2(max) + EXTRA_STEPS x log2(max)`` runs, an aggregated one ``log2(max)``.

The goal is the goal table's (``ATTAINMENT_GOAL_POINTS``): servable attainment within one point of the ceiling's. The
ceiling meets it by definition, so a best fixed allocation always exists (at worst the ceiling itself).

Two references come out of one memoised search (``search_both``):

* ``best-fixed``: counts **within the spec's limits**, each role from its warm minimum (``guardrails.warm_minimum``:
  2 for a critical SLO; at least 1, since a fixed allocation of 0 serves nothing) up to the ceiling's count. A fixed
  allocation below the spec's own minimum is not one the user may run, so this is the reference of the GPU-hours goal
  (``gpuscale.tune.goals``);
* ``best-fixed-unconstrained``: from 1 replica per role (the reference before the warm minimum was taken into account),
  reported beside it. Both are the same run whenever the unconstrained counts already sit at or above every warm
  minimum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuscale.sim.metrics import PolicyResult

BEST_FIXED = "best-fixed"
"""Policy name and ``bound`` of the best fixed allocation in hindsight within the spec's limits."""
BEST_FIXED_UNCONSTRAINED = "best-fixed-unconstrained"
"""Policy name and ``bound`` of the best fixed allocation in hindsight from one replica per role, below the spec's warm
minimum where that is cheaper."""
ATTAINMENT_GOAL_POINTS = 0.01
"""The attainment goal: servable attainment at most this far below the ceiling's (one point)."""
EXTRA_STEPS = 2
"""With two roles: how far above its own minimum the first role is tried (a small grid, not a full one)."""

Counts = dict[str, int]
RunFixed = Callable[[Counts], PolicyResult]
"""Runs the fixed policy at these counts on the scenario's arrivals and returns its result."""


def meets_goal(r: PolicyResult, ceiling: PolicyResult) -> bool:
    """Servable attainment within ``ATTAINMENT_GOAL_POINTS`` of the ceiling's."""
    return r.slo_attainment_servable >= ceiling.slo_attainment_servable - ATTAINMENT_GOAL_POINTS - 1e-9


class _Search:
    """Memoised runs of the fixed policy and the bisections over them."""

    def __init__(self, run: RunFixed, ceiling_counts: Counts, ceiling: PolicyResult) -> None:
        self.run, self.ceiling, self.roles = run, ceiling, list(ceiling_counts)
        self.done: dict[tuple[int, ...], PolicyResult] = {tuple(ceiling_counts[r] for r in self.roles): ceiling}
        self.runs = 0

    def result(self, counts: Counts) -> PolicyResult:
        key = tuple(counts[r] for r in self.roles)
        if key not in self.done:
            self.runs += 1
            self.done[key] = self.run(counts)
        return self.done[key]

    def ok(self, counts: Counts) -> bool:
        return meets_goal(self.result(counts), self.ceiling)

    def smallest(self, role: str, fixed: Counts, lo: int, hi: int) -> int:
        """Smallest count of ``role`` in [lo, hi] meeting the goal with the others at ``fixed`` (hi is taken to)."""
        while lo < hi:
            mid = (lo + hi) // 2
            if self.ok({**fixed, role: mid}):
                hi = mid
            else:
                lo = mid + 1
        return hi


def floors_within(ceiling_counts: Counts, warm_minimum: Counts) -> Counts:
    """Per role the fewest replicas a fixed allocation the spec permits runs: its warm minimum, at least 1 (a role at 0
    serves nothing), at most the ceiling's count (a pool limit may hold the ceiling below a stated minimum)."""
    return {r: min(max(1, warm_minimum.get(r, 1)), top) for r, top in ceiling_counts.items()}


@dataclass(frozen=True)
class BestFixed:
    """Both references of one search: within the spec's limits and from one replica per role."""

    counts: Counts
    result: PolicyResult
    """``best-fixed``: the cheapest constant counts meeting the goal from each role's warm minimum up."""
    unconstrained_counts: Counts
    unconstrained: PolicyResult
    """``best-fixed-unconstrained``: the same from one replica per role."""
    runs: int
    """Simulations both searches made together (memoised: a count is run once)."""

    @property
    def same(self) -> bool:
        """The unconstrained counts already keep every warm minimum (one allocation, two names)."""
        return self.counts == self.unconstrained_counts


def search_both(run: RunFixed, ceiling_counts: Counts, ceiling: PolicyResult, warm_minimum: Counts) -> BestFixed:
    """The unconstrained search, then, when its counts fall below a role's warm minimum, the search within the spec's
    limits over the same memo (its bisections reuse most runs)."""
    sr = _Search(run, ceiling_counts, ceiling)
    free = _cheapest(sr, ceiling_counts, {r: 1 for r in ceiling_counts})
    floor = floors_within(ceiling_counts, warm_minimum)
    within = free if all(free[r] >= floor[r] for r in free) else _cheapest(sr, ceiling_counts, floor)
    return BestFixed(within, sr.result(within), free, sr.result(free), sr.runs)


def search(
    run: RunFixed, ceiling_counts: Counts, ceiling: PolicyResult, floor: Counts | None = None,
) -> tuple[Counts, PolicyResult, int]:
    """The cheapest (GPU-hours, then fewest replicas) constant counts meeting the goal with each role at least
    ``floor`` (default 1), its result, and how many runs the search made. ``ceiling`` is the result at
    ``ceiling_counts`` (reused, not run again)."""
    sr = _Search(run, ceiling_counts, ceiling)
    best = _cheapest(sr, ceiling_counts, floor or {r: 1 for r in ceiling_counts})
    return best, sr.result(best), sr.runs


def _cheapest(sr: _Search, ceiling_counts: Counts, lowest: Counts) -> Counts:
    floor = {r: sr.smallest(r, ceiling_counts, min(lowest[r], ceiling_counts[r]), ceiling_counts[r]) for r in sr.roles}
    if len(sr.roles) == 1:
        return floor
    best = dict(ceiling_counts)
    first, rest = sr.roles[0], sr.roles[1:]
    for n in range(floor[first], min(floor[first] + EXTRA_STEPS, ceiling_counts[first]) + 1):
        counts = {**ceiling_counts, first: n}
        for r in rest:  # the others one after another, each down to its smallest with the rest as found
            counts[r] = sr.smallest(r, counts, floor[r], ceiling_counts[r])
        if sr.ok(counts) and _cost(sr.result(counts), counts) < _cost(sr.result(best), best):
            best = counts
    return best


def _cost(r: PolicyResult, counts: Counts) -> tuple[float, int]:
    return r.gpu_hours, sum(counts.values())
