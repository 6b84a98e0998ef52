"""The best fixed allocation in hindsight: found by search over the fixed policy, cheapest among the counts that meet
the attainment goal, and minimal (one replica fewer of any role misses the goal or costs no less)."""

from __future__ import annotations

from functools import cache

import pytest

from gpuscale.sim import best_fixed as BF
from gpuscale.sim import traffic
from gpuscale.sim.metrics import PolicyResult, ScenarioResult
from gpuscale.sim.policies import FixedPolicy
from gpuscale.sim.runner import Runner, servable_of
from gpuscale.sim.scenarios import Scenario, build_scenario
from gpuscale.sim.simulation import Simulation
from tests.sim.conftest import spec_of


@cache
def result(stack: str) -> ScenarioResult:
    sc = build_scenario("stack", spec_of(stack), duration_s=300.0)
    return Runner(sc, seed=0, best_fixed=True).run()


def counts_of(r: PolicyResult) -> dict[str, int]:
    return {k: int(v) for k, v in r.replicas_max.items()}


@pytest.mark.parametrize("stack", ["tiny-aggregated", "tiny-disaggregated"])
def test_best_fixed_meets_the_goal_cheaper_than_the_ceiling(stack: str) -> None:
    res = result(stack)
    ceiling, best = res.ceiling, res.best_fixed
    assert ceiling is not None and best is not None
    assert best.name == BF.BEST_FIXED and best.bound == BF.BEST_FIXED and best.policy == "fixed"
    assert best not in res.policies  # a reference, not a policy to choose
    assert BF.meets_goal(best, ceiling)
    assert best.gpu_hours <= ceiling.gpu_hours
    assert best.arrived == ceiling.arrived and best.completed + best.unanswered == best.arrived
    assert best.scale_events == 0 and best.lower_bound_gpu_hours is not None
    assert best.gpu_hours >= best.lower_bound_gpu_hours
    assert all(counts_of(best)[k] <= v for k, v in counts_of(ceiling).items())


@pytest.mark.parametrize("stack", ["tiny-aggregated", "tiny-disaggregated"])
def test_one_replica_fewer_misses_the_goal_or_saves_nothing(stack: str) -> None:
    res = result(stack)
    best, ceiling = res.best_fixed, res.ceiling
    assert best is not None and ceiling is not None
    sc = build_scenario("stack", spec_of(stack), duration_s=300.0)
    found = counts_of(best)
    for role, n in found.items():
        if n <= 1:
            continue
        fewer = {**found, role: n - 1}
        r = _fixed_run(sc, fewer)
        assert not BF.meets_goal(r, ceiling) or r.gpu_hours >= best.gpu_hours, (role, fewer, r.slo_attainment_servable)


def _fixed_run(sc: Scenario, counts: dict[str, int]) -> PolicyResult:
    """The fixed policy at ``counts`` on the ceiling's variant, as the search runs it."""
    ceiling = next(v for v in sc.variants if v.bound == "ceiling")
    v = ceiling.model_copy(update={"policy": FixedPolicy(per_role=counts), "initial_replicas": counts, "bound": None})
    a = traffic.generate(sc.traffic, 0, sc.setup.duration_s)
    return Simulation(sc.setup, v, a, 0, servable_of(sc.setup, a)).run()


def test_search_is_bounded_and_picks_the_cheapest_meeting_pair() -> None:
    """On a made-up attainment surface: prefill needs 3 with decode 2, or 5 with decode 1; a decode replica costs three
    prefill ones, so the grid above prefill's own minimum finds the cheaper (5, 1)."""
    ceiling = result("tiny-aggregated").ceiling
    assert ceiling is not None
    runs: list[tuple[int, int]] = []

    def run(c: dict[str, int]) -> PolicyResult:
        p, d = c["prefill"], c["decode"]
        runs.append((p, d))
        ok = p >= 3 and (d >= 2 or (p >= 5 and d >= 1))
        att = ceiling.slo_attainment_servable - (0.0 if ok else 0.05)
        return ceiling.model_copy(update={"slo_attainment_servable": att, "gpu_hours": float(p + 3 * d)})

    top = {"prefill": 8, "decode": 8}
    counts, r, n = BF.search(run, top, ceiling.model_copy(update={"gpu_hours": 24.0}))
    assert counts == {"prefill": 5, "decode": 1} and r.gpu_hours == 8.0
    assert n == len(runs) == len(set(runs)) and n <= 16  # memoised, a few bisections


def test_within_the_spec_no_role_is_below_its_warm_minimum_and_the_unconstrained_one_is_reported() -> None:
    """One replica of each role meets the goal, but the spec's warm minimum is 2 (a critical SLO): ``best-fixed`` is
    the cheapest allocation the spec permits (2, 2), ``best-fixed-unconstrained`` today's (1, 1); one memo serves
    both searches."""
    ceiling = result("tiny-aggregated").ceiling
    assert ceiling is not None
    runs: list[tuple[int, int]] = []

    def run(c: dict[str, int]) -> PolicyResult:
        runs.append((c["prefill"], c["decode"]))
        return ceiling.model_copy(update={"gpu_hours": float(c["prefill"] + c["decode"])})

    top = {"prefill": 5, "decode": 5}
    found = BF.search_both(run, top, ceiling.model_copy(update={"gpu_hours": 10.0}), {"prefill": 2, "decode": 2})
    assert found.unconstrained_counts == {"prefill": 1, "decode": 1} and found.unconstrained.gpu_hours == 2.0
    assert found.counts == {"prefill": 2, "decode": 2} and found.result.gpu_hours == 4.0 and not found.same
    assert found.runs == len(runs) == len(set(runs))  # memoised across both searches
    # a warm minimum the unconstrained counts already keep: one allocation under both names, no further run
    again = BF.search_both(run, top, ceiling.model_copy(update={"gpu_hours": 10.0}), {"prefill": 1, "decode": 0})
    assert again.same and again.counts == {"prefill": 1, "decode": 1}


def test_floors_within_the_spec_are_at_least_one_and_at_most_the_ceiling() -> None:
    assert BF.floors_within({"aggregated": 4}, {"aggregated": 0}) == {"aggregated": 1}  # 0 replicas serve nothing
    assert BF.floors_within({"prefill": 1, "decode": 3}, {"prefill": 2, "decode": 2}) == {"prefill": 1, "decode": 2}


@pytest.mark.parametrize("stack", ["tiny-aggregated", "tiny-disaggregated"])
def test_the_simulators_best_fixed_keeps_the_warm_minimum(stack: str) -> None:
    res = result(stack)
    best = res.best_fixed
    assert best is not None
    sc = build_scenario("stack", spec_of(stack), duration_s=300.0)
    minimum = {r.role: max(1, r.sizing.min_replicas) for r in sc.setup.roles}
    assert all(counts_of(best)[k] >= v for k, v in minimum.items())
    free = next((r for r in res.results if r.bound == BF.BEST_FIXED_UNCONSTRAINED), None)
    # reported only when it is another allocation, then below a warm minimum and no dearer
    assert free is None or (any(counts_of(free)[k] < v for k, v in minimum.items()) and free.gpu_hours <= best.gpu_hours)
