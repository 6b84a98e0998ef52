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


def search(run: RunFixed, ceiling_counts: Counts, ceiling: PolicyResult) -> tuple[Counts, PolicyResult, int]:
    """The cheapest (GPU-hours, then fewest replicas) constant counts meeting the goal, its result, and how many runs
    the search made. ``ceiling`` is the result at ``ceiling_counts`` (reused, not run again)."""
    done: dict[tuple[int, ...], PolicyResult] = {tuple(ceiling_counts.values()): ceiling}
    roles = list(ceiling_counts)
    runs = 0

    def result(counts: Counts) -> PolicyResult:
        nonlocal runs
        key = tuple(counts[r] for r in roles)
        if key not in done:
            runs += 1
            done[key] = run(counts)
        return done[key]

    def ok(counts: Counts) -> bool:
        return meets_goal(result(counts), ceiling)

    def smallest(role: str, fixed: Counts, lo: int, hi: int) -> int:
        """Smallest count of ``role`` in [lo, hi] meeting the goal with the others at ``fixed`` (hi is known to)."""
        while lo < hi:
            mid = (lo + hi) // 2
            if ok({**fixed, role: mid}):
                hi = mid
            else:
                lo = mid + 1
        return hi

    floor = {r: smallest(r, ceiling_counts, 1, ceiling_counts[r]) for r in roles}
    best = dict(ceiling_counts)
    if len(roles) == 1:
        best = floor
    else:
        first, rest = roles[0], roles[1:]
        for n in range(floor[first], min(floor[first] + EXTRA_STEPS, ceiling_counts[first]) + 1):
            counts = {**ceiling_counts, first: n}
            for r in rest:  # the others one after another, each down to its smallest with the rest as found
                counts[r] = smallest(r, counts, floor[r], ceiling_counts[r])
            if ok(counts) and _cost(result(counts), counts) < _cost(result(best), best):
                best = counts
    return best, result(best), runs


def _cost(r: PolicyResult, counts: Counts) -> tuple[float, int]:
    return r.gpu_hours, sum(counts.values())
