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
"""

from __future__ import annotations

from collections.abc import Callable

from gpuscale.sim.metrics import PolicyResult

BEST_FIXED = "best-fixed"
"""Policy name and ``bound`` of the best fixed allocation in hindsight."""
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


def search(run: RunFixed, ceiling_counts: Counts, ceiling: PolicyResult) -> tuple[Counts, PolicyResult, int]:
    """The cheapest (GPU-hours, then fewest replicas) constant counts meeting the goal, its result, and how many runs
    the search made. ``ceiling`` is the result at ``ceiling_counts`` (reused, not run again)."""
    sr = _Search(run, ceiling_counts, ceiling)
    floor = {r: sr.smallest(r, ceiling_counts, 1, ceiling_counts[r]) for r in sr.roles}
    if len(sr.roles) == 1:
        return floor, sr.result(floor), sr.runs
    best = dict(ceiling_counts)
    first, rest = sr.roles[0], sr.roles[1:]
    for n in range(floor[first], min(floor[first] + EXTRA_STEPS, ceiling_counts[first]) + 1):
        counts = {**ceiling_counts, first: n}
        for r in rest:  # the others one after another, each down to its smallest with the rest as found
            counts[r] = sr.smallest(r, counts, floor[r], ceiling_counts[r])
        if sr.ok(counts) and _cost(sr.result(counts), counts) < _cost(sr.result(best), best):
            best = counts
    return best, sr.result(best), sr.runs


def _cost(r: PolicyResult, counts: Counts) -> tuple[float, int]:
    return r.gpu_hours, sum(counts.values())
