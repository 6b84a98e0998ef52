"""The autoscaling policy gpuscale emits, in the simulator: proportional signals hold capacity, the decode target keeps
ITL, and the policy scores at least as well as the queue-depth and duty-cycle HPAs (``docs/simulator.md``)."""

from __future__ import annotations

from itertools import pairwise

import pytest

from gpuscale.sim.metrics import PolicyResult, ScenarioResult
from gpuscale.sim.scenarios import unanswered_between
from tests.sim.conftest import PROD_STACK, run_scenario

BASELINES = ("queue-depth", "dcgm-duty-cycle")


@pytest.fixture(scope="module")
def prod_stack() -> ScenarioResult:
    return run_scenario(*PROD_STACK)


def ready_changes(r: PolicyResult, role: str, lo: float, hi: float) -> int:
    """How often the role's ready replica count changed between lo and hi."""
    series = next(s for s in r.series.roles if s.role == role)
    vals = [x for t, x in zip(r.series.t_s, series.ready, strict=True) if lo <= t < hi]
    return sum(1 for a, b in pairwise(vals) if a != b)


@pytest.mark.parametrize("run", ["peak", "prod_stack"])
def test_gpuscale_scores_at_least_as_well_as_the_baselines(run: str, request: pytest.FixtureRequest) -> None:
    res: ScenarioResult = request.getfixturevalue(run)
    ours = res.result("gpuscale")
    for name in BASELINES:
        other = res.result(name)
        assert ours.score >= other.score, f"{name} {other.score} > gpuscale {ours.score}"


def test_prod_stack_answers_everything_and_keeps_itl_better(prod_stack: ScenarioResult) -> None:
    ours, queue = prod_stack.result("gpuscale"), prod_stack.result("queue-depth")
    # the decode KV target of the ITL batch (0.43) plus the output-token rate hold ITL better than the generic KV 0.8
    assert ours.itl_attainment > queue.itl_attainment
    assert ours.unanswered == 0 < queue.unanswered


def test_prefill_does_not_oscillate_at_the_peak(prod_stack: ScenarioResult) -> None:
    # finding 1: at a steady peak queue depth reads 0, so the queue-only HPA drops prefill replicas and re-buys them;
    # the prompt-token rate holds them (peak from 30% to 70% of the run)
    d = prod_stack.duration_s
    lo, hi = 0.3 * d + 900.0, 0.7 * d
    ours = ready_changes(prod_stack.result("gpuscale"), "prefill", lo, hi)
    queue = ready_changes(prod_stack.result("queue-depth"), "prefill", lo, hi)
    assert ours < queue


def test_peak_hour_drops_nothing_after_the_first_cold_start(peak: ScenarioResult) -> None:
    # the first cold start is the same for every policy (nothing reacting to the surge serves before it); after it the
    # prompt-token rate holds the replicas, while the queue-only HPA falls back to its minimum and re-buys them
    p = peak.parameters
    lo = float(p["peak_from_s"]) + float(p["cold_start_s"]) + 120.0
    ours = peak.result("gpuscale")
    assert unanswered_between(ours, lo, peak.duration_s) == 0
    assert unanswered_between(peak.result("queue-depth"), lo, peak.duration_s) > 0
    assert ours.replicas_max["aggregated"] >= int(p["replicas_at_peak"])
