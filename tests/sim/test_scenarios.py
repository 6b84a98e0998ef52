"""The user's four failure scenarios, each asserted with numbers; oracle bound, conservation, determinism."""

from __future__ import annotations

import statistics

import pytest

from gpuscale.sim.metrics import PolicyResult, ScenarioResult
from gpuscale.sim.scenarios import SCENARIOS, ScenarioError, build_scenario, replicas_reached_at, unanswered_between
from tests.sim.conftest import CONSOLIDATION, GANG, PEAK, STACK_RUNS, TWO_AM, run_scenario


def window(r: PolicyResult, values: list[float | None], lo: float, hi: float) -> list[float]:
    return [v for t, v in zip(r.series.t_s, values, strict=True) if lo <= t < hi and v is not None]


# ---------------------------------------------------------------------------- peak hour


def test_peak_duty_cycle_sits_at_100_percent_and_barely_scales(peak: ScenarioResult) -> None:
    p = peak.parameters
    duty, queue = peak.result("dcgm-duty-cycle"), peak.result("queue-depth")
    util = window(duty, duty.series.roles[0].duty_cycle, float(p["peak_from_s"]), peak.duration_s)
    assert statistics.mean(util) >= 0.95  # saturated however deep the queue is
    need, surge = int(p["replicas_at_peak"]), float(p["ramp_start_s"])
    t_duty = replicas_reached_at(duty, "aggregated", need, surge)
    t_queue = replicas_reached_at(queue, "aggregated", need, surge)
    assert t_queue is not None and t_queue - surge <= 600  # the backlog asks for every replica at once
    assert t_duty is None or t_duty - surge >= 2 * (t_queue - surge)  # ceil(1.25 x ready) per cold start
    # TTFT climbs until requests hit the client timeout
    assert duty.ttft_p99_s is not None and duty.ttft_p99_s >= 0.9 * peak.slo.request_timeout_s


def test_peak_manual_replica_lowers_ttft_but_not_the_metric(peak: ScenarioResult) -> None:
    p = peak.parameters
    duty, manual = peak.result("dcgm-duty-cycle"), peak.result("dcgm-duty-cycle+manual")
    lo = float(p["manual_add_at_s"]) + float(p["cold_start_s"])
    hi = lo + 600.0
    ttft_without = statistics.median(window(duty, duty.series.ttft_p50_s, lo, hi))
    ttft_with = statistics.median(window(manual, manual.series.ttft_p50_s, lo, hi))
    assert ttft_with < 0.8 * ttft_without
    for r in (duty, manual):
        assert statistics.mean(window(r, r.series.roles[0].duty_cycle, lo, hi)) >= 0.95
    at = float(p["manual_add_at_s"]) + 30.0  # the operator's replica is asked for at once
    asked = [next(d for t, d in zip(r.series.t_s, r.series.roles[0].desired, strict=True) if t >= at) for r in (duty, manual)]
    assert asked[1] > asked[0]


def test_peak_queue_depth_drops_less_than_half_once_the_first_cold_start_is_over(peak: ScenarioResult) -> None:
    # The first cold start is the same for every policy (nothing reacting to the surge can serve before it);
    # after it, the queue-depth policy has the replicas and the duty-cycle HPA is still growing by a quarter.
    p = peak.parameters
    lo = float(p["peak_from_s"]) + float(p["cold_start_s"])
    hi = lo + 900.0
    duty = unanswered_between(peak.result("dcgm-duty-cycle"), lo, hi)
    queue = unanswered_between(peak.result("queue-depth"), lo, hi)
    assert duty > 100
    assert queue < 0.5 * duty


# ---------------------------------------------------------------------------- 2 a.m.


def test_2am_cluster_autoscaler_node_arrives_in_about_3_min_and_the_prompt_times_out(two_am: ScenarioResult) -> None:
    ca = two_am.result("cluster-autoscaler")
    assert ca.nodes.first_ready_latency_s is not None and 140 <= ca.nodes.first_ready_latency_s <= 250
    huge = ca.tracked_request("huge-prompt")
    assert huge.prompt_tokens == 1_000_000
    assert huge.outcome == "timed_out"


def test_2am_karpenter_alone_is_faster_but_still_cold(two_am: ScenarioResult) -> None:
    k = two_am.result("karpenter")
    ca = two_am.result("cluster-autoscaler")
    assert k.nodes.first_ready_latency_s is not None and ca.nodes.first_ready_latency_s is not None
    assert k.nodes.first_ready_latency_s < ca.nodes.first_ready_latency_s - 45
    assert k.tracked_request("huge-prompt").outcome == "timed_out"  # image + weights + engine still come on top


def test_2am_karpenter_plus_warm_pool_answers(two_am: ScenarioResult) -> None:
    warm = two_am.result("karpenter+warm-pool")
    huge = warm.tracked_request("huge-prompt")
    assert huge.outcome == "completed"
    assert huge.ttft_s is not None and huge.ttft_s < huge.timeout_s
    assert warm.nodes.launched == 0


# ---------------------------------------------------------------------------- gang


def test_gang_7_of_8_default_scheduler_holds_gpus_gang_holds_none(gang: ScenarioResult) -> None:
    default, kai = gang.result("default-scheduler"), gang.result("kai-gang")
    # 7 GPUs bound for at least the minute a new node takes
    assert default.idle_gpu_minutes.gang_wait >= 7 * 1.0
    assert kai.idle_gpu_minutes.gang_wait < 0.1 * default.idle_gpu_minutes.gang_wait
    for r in (default, kai):
        assert any(e.kind == "ready" for e in r.events)  # the replica does start in both cases
        assert r.nodes.launched == 1


# ---------------------------------------------------------------------------- consolidation


def test_consolidation_underutilized_loses_requests_when_empty_1h_loses_none(consolidation: ScenarioResult) -> None:
    keep = consolidation.result("when-empty-1h")
    repack = consolidation.result("when-empty-or-underutilized")
    assert keep.evictions == 0 and keep.lost_in_flight == 0 and keep.eviction_reload_gpu_minutes == 0
    assert repack.evictions > 0 and repack.lost_in_flight > 0
    assert repack.eviction_reload_gpu_minutes > 0
    per_day = float(consolidation.parameters["per_day_factor"])
    assert any(f"{repack.lost_in_flight * per_day:.0f} requests lost in flight per day" in f for f in consolidation.findings)


def test_shorter_when_empty_gives_nodes_back_without_evicting(consolidation: ScenarioResult) -> None:
    keep = consolidation.result("when-empty-1h")
    (short,) = [r for r in consolidation.results if r.name.startswith("when-empty-") and r.name.endswith("m")]
    assert short.evictions == 0 and short.lost_in_flight == 0  # WhenEmpty never touches a serving pod
    assert short.idle_gpu_minutes.empty < keep.idle_gpu_minutes.empty  # empty nodes go back sooner
    assert short.gpu_hours < keep.gpu_hours


# ---------------------------------------------------------------------------- cross-cutting


ALL_RUNS = (PEAK, TWO_AM, GANG, CONSOLIDATION, *STACK_RUNS)


@pytest.mark.parametrize("run", ALL_RUNS, ids=lambda r: f"{r[0]}-{r[1]}")
def test_conservation(run: tuple) -> None:  # type: ignore[type-arg]
    for r in run_scenario(*run).results:
        assert r.arrived == r.completed + r.dropped + r.lost_in_flight + r.still_queued, r.name
        assert r.idle_gpu_minutes.total + r.serving_gpu_minutes == pytest.approx(r.gpu_hours * 60, rel=1e-3, abs=0.05)


@pytest.mark.parametrize("run", (PEAK, *STACK_RUNS), ids=lambda r: f"{r[0]}-{r[1]}")
def test_oracle_is_never_beaten_on_gpu_hours_at_equal_slo(run: tuple) -> None:  # type: ignore[type-arg]
    res = run_scenario(*run)
    oracle = res.result("oracle")
    for r in res.results:
        if r.slo_attainment >= oracle.slo_attainment - 1e-9:
            assert r.gpu_hours >= oracle.gpu_hours * 0.999, r.name
        assert r.gpu_hours_vs_oracle == pytest.approx(r.gpu_hours / oracle.gpu_hours, rel=1e-3)


def test_determinism_same_seed_same_result() -> None:
    a = run_scenario.__wrapped__("staging", "stack", 900.0, 7)
    b = run_scenario.__wrapped__("staging", "stack", 900.0, 7)
    c = run_scenario.__wrapped__("staging", "stack", 900.0, 8)
    assert a.model_dump(mode="json") == b.model_dump(mode="json")
    assert a.model_dump(mode="json") != c.model_dump(mode="json")


def test_result_round_trips_through_json(gang: ScenarioResult) -> None:
    data = gang.model_dump(mode="json")
    assert data["score_formula"].startswith("score = 100 x slo_attainment")
    assert all("dropped" in r and "unanswered" in r for r in data["results"])
    assert ScenarioResult.model_validate(data) == gang


def test_score_follows_the_printed_formula(peak: ScenarioResult) -> None:
    ref = peak.reference_gpu_hours
    for r in peak.results:
        expected = 100 * r.slo_attainment - 100 * r.unanswered / r.arrived - 20 * max(0.0, r.gpu_hours / ref - 1)
        assert r.score == pytest.approx(expected, abs=0.01)


def test_unknown_scenario_lists_choices(prod_spec) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ScenarioError, match="choose one of: " + ", ".join(SCENARIOS)):
        build_scenario("rush-hour", prod_spec)
    with pytest.raises(ScenarioError, match="this stack serves: llama-70b-fp8, search-8b"):
        build_scenario("stack", prod_spec, model="gpt-5")
