"""The ceiling and the lower bound: no policy beats either, over seeds, stacks, scenarios and disruptions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscale.sim.bounds import LowerBound
from gpuscale.sim.runner import lower_bound_of
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.traffic import Arrivals, generate
from tests.sim.conftest import run_scenario, spec_of

ATTAINMENT_SLACK = 0.005
"""Attainments are shares of a few hundred requests; the ceiling can lose one or two to a burst's exact timing."""


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(min_value=0, max_value=10_000),
    stack=st.sampled_from(["tiny-aggregated", "tiny-disaggregated"]),
    scenario=st.sampled_from(["stack", "peak-hour"]),
    spot=st.sampled_from([None, 4.0]),
)
def test_no_policy_beats_the_lower_bound_or_the_ceiling(seed: int, stack: str, scenario: str, spot: float | None) -> None:
    res = run_scenario(stack, scenario, 420.0, seed, (), spot)
    ceiling = res.ceiling
    assert ceiling is not None
    for r in res.results:
        assert r.lower_bound_gpu_hours is not None
        assert r.gpu_hours >= r.lower_bound_gpu_hours, (r.name, r.gpu_hours, r.lower_bound_gpu_hours)
        assert r.slo_attainment <= ceiling.slo_attainment + ATTAINMENT_SLACK, (r.name, r.slo_attainment)


def test_the_bound_rises_with_attainment_and_with_load() -> None:
    sc = build_scenario("stack", spec_of("tiny-aggregated"), duration_s=600.0)
    light = generate(sc.traffic, 0, 600.0)
    bound = lower_bound_of(sc.setup, light)
    values = [bound.gpu_hours(a / 10) for a in range(11)]
    assert values[0] == 0.0 and values == sorted(values) and values[-1] > 0
    heavy = Arrivals(
        np.sort(np.concatenate([light.arrival_s, light.arrival_s + 0.25])),
        np.repeat(light.prompt_tokens, 2), np.repeat(light.output_tokens, 2),
    )
    assert lower_bound_of(sc.setup, heavy).gpu_hours(1.0) > bound.gpu_hours(1.0)


def test_light_load_needs_a_replica_present_between_requests() -> None:
    # one short request every 10 s for an hour: the work is tiny but a restart costs more than a gap
    sc = build_scenario("stack", spec_of("tiny-aggregated"), duration_s=3600.0)
    t = np.arange(0.0, 3600.0, 10.0)
    a = Arrivals(t, np.full(t.size, 200, dtype=np.int64), np.full(t.size, 20, dtype=np.int64))
    s = sc.setup
    bound = LowerBound(
        a, np.ones(t.size, dtype=bool), s.replica, ttft_slo_s=s.ttft_slo_s, itl_slo_s=s.itl_slo_s, disaggregated=False,
        gpus_per_replica=1, shortest_load_s=s.startup.best_load_s,
    )
    assert bound.gpu_hours(1.0) == pytest.approx(1.0, rel=0.02)  # one GPU for the whole hour


def test_a_fixed_schedule_never_undercuts_the_bound_on_a_real_trace_shape() -> None:
    res = run_scenario("tiny-disaggregated", "stack", 600.0, 3)
    for r in res.results:
        assert r.gpu_hours >= (r.lower_bound_gpu_hours or 0.0)
    assert [p.attainment for p in res.lower_bound] == sorted(p.attainment for p in res.lower_bound)
