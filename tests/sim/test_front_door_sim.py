"""The simulated front door: hold while the model wakes, 503 with Retry-After at the bound or the hold limit, a Service
without endpoints at zero, cron windows, the pre-warming placeholder; and the ``scale-from-zero`` scenario."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from gpuscale import sizing
from gpuscale.sim.inputs import FrontDoorSim
from gpuscale.sim.metrics import PolicyResult, ScenarioResult
from gpuscale.sim.policies import GpuscalePolicy, WakeWindow
from gpuscale.sim.runner import Runner, servable_of
from gpuscale.sim.scenarios import REGISTRY, build_scenario, plan_runs
from gpuscale.sim.scenarios.base import make_setup, variant
from gpuscale.sim.scenarios.scale_from_zero import FIRST_LABEL, at_zero
from gpuscale.sim.simulation import Simulation
from gpuscale.sim.traffic import HugePrompt, RatePoint, SyntheticTraffic, generate
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.workload import TokenDistribution
from tests.specs import model, small_spec

TOKENS = TokenDistribution(mean=500, p99=1000)


@cache
def zero_spec() -> PlatformSpec:
    slo = {"ttft_p99_s": 2.0, "itl_p99_s": 0.05, "request_timeout_s": 600, "criticality": "best_effort"}
    return small_spec(models=[model(criticality="best_effort", slo=slo)])


def requests_at(*times: float) -> SyntheticTraffic:
    return SyntheticTraffic(
        profile=[RatePoint(t_s=0, rps=0)], prompt_tokens=TOKENS, output_tokens=TokenDistribution(mean=20, p99=40),
        huge_prompts=[HugePrompt(at_s=t, prompt_tokens=500, output_tokens=20, label=f"r{i}") for i, t in enumerate(times)],
    )


def run_one(traffic: SyntheticTraffic, duration_s: float, **kw: Any) -> PolicyResult:
    """One variant on the zero model, from no replica and no node."""
    spec = zero_spec()
    m = spec.models[0]
    ms = sizing.size_model(spec, m)
    assert ms.front_door is not None
    policy = kw.pop("policy", GpuscalePolicy(min_replicas=0, activation_threshold=0.0,
                                             front_door_per_replica=ms.front_door.per_replica))
    setup = make_setup(spec, m, ms, duration_s, initial=lambda r: 0)
    arrivals = generate(traffic, 0, duration_s)
    return Simulation(setup, variant("v", "v", policy, spec, m, **kw), arrivals, 0, servable_of(setup, arrivals)).run()


def conserved(r: PolicyResult) -> bool:
    return r.arrived == r.completed + r.dropped_timeout + r.dropped_rejected + r.lost_in_flight + r.refused


def door(**kw: Any) -> FrontDoorSim:
    return FrontDoorSim(**{"hold_limit_s": 590.0, "queue_bound": 100, "retry_after_s": 260.0, "poll_s": 5.0, **kw})


def test_the_door_holds_requests_at_zero_and_wakes_the_model() -> None:
    r = run_one(requests_at(10.0, 20.0, 30.0), 900.0, front_door=door())
    assert r.completed == 3 and r.refused == 0 and conserved(r)
    cold = sizing.size_model(zero_spec(), zero_spec().models[0]).cold_start.total_s
    first = r.tracked_request("r0")
    assert first.ttft_s is not None and 0.7 * cold < first.ttft_s < 1.3 * cold + 15  # held through one cold start
    assert r.first_answer_s == pytest.approx(first.ttft_s, abs=1e-3)
    assert r.retry_after_s is None  # nothing refused


def test_the_door_answers_503_at_once_when_its_queue_is_at_the_bound() -> None:
    r = run_one(requests_at(*[10.0 + 0.1 * i for i in range(10)]), 900.0, front_door=door(queue_bound=3, retry_after_s=123))
    assert r.refused == 7 and r.completed == 3 and conserved(r)
    assert r.retry_after_s == 123
    assert all(t.outcome == ("completed" if int(t.label[1:]) < 3 else "refused") for t in r.tracked)


def test_the_door_answers_503_when_the_hold_limit_runs_out_before_the_model_is_up() -> None:
    r = run_one(requests_at(10.0, 500.0), 1200.0, front_door=door(hold_limit_s=60.0))
    outcomes = {t.label: t.outcome for t in r.tracked}
    assert outcomes == {"r0": "refused", "r1": "completed"}  # the wake takes minutes; the second comes after it
    assert r.dropped_timeout == 0 and conserved(r)  # refused at the limit, never left to the client's timeout


def test_without_a_door_a_service_at_zero_refuses_the_connection() -> None:
    r = run_one(requests_at(10.0, 20.0), 600.0, at_zero="connection-refused",
                policy=GpuscalePolicy(min_replicas=0, activation_threshold=0.0))
    assert r.completed == 0 and r.lost_in_flight == r.no_endpoint == 2 and r.refused == 0 and conserved(r)
    assert r.misses.cold_start == 2 and r.misses.lost_in_flight == 0  # never in flight: a cold-start miss
    assert r.replicas_max["aggregated"] == 0  # nothing woke it: its own gauges vanished with the last pod


def test_a_cron_window_holds_replicas_and_zero_returns_after_the_cooldown() -> None:
    policy = GpuscalePolicy(min_replicas=0, activation_threshold=0.0, cooldown_s=60.0,
                            wake_windows=[WakeWindow(start_s=100.0, end_s=700.0, replicas=1)])
    r = run_one(requests_at(5.0, 800.0), 1200.0, at_zero="connection-refused", policy=policy)
    outcomes = {t.label: t.outcome for t in r.tracked}
    assert outcomes["r0"] == "lost"  # before the window opens: no endpoint
    t, desired = r.series.t_s, r.series.roles[0].desired
    assert max(d for x, d in zip(t, desired, strict=True) if 150 <= x < 700) == 1
    assert desired[-1] == 0 and min(d for x, d in zip(t, desired, strict=True) if x < 90) == 0


def test_prewarming_asks_for_a_node_at_the_first_hold() -> None:
    plain = run_one(requests_at(10.0), 900.0, front_door=door())
    warm = run_one(requests_at(10.0), 900.0, front_door=door(), prewarm=True)
    pre = next(e for e in warm.events if e.kind == "prewarm")
    scale = next(e for e in warm.events if e.kind == "scale")
    assert pre.t_s == pytest.approx(10.0) and pre.t_s < scale.t_s  # before KEDA has created the model's pod
    assert warm.nodes.launched == plain.nodes.launched == 1  # the placeholder's node serves the model
    assert warm.first_answer_s is not None and plain.first_answer_s is not None
    # it can only gain the detection delay (one scrape and one poll at most)
    assert plain.first_answer_s - 15.0 <= warm.first_answer_s <= plain.first_answer_s + 1.0


# ------------------------------------------------------------------------------------------ the scenario


@cache
def day() -> ScenarioResult:
    return Runner(build_scenario("scale-from-zero", zero_spec(), duration_s=3600.0)).run()


def test_scale_from_zero_is_registered_for_every_model_that_may_scale_to_zero() -> None:
    d = REGISTRY["scale-from-zero"]
    assert d.plan_section == "cold-start" and d.plan_models is not None
    assert plan_runs(zero_spec(), "scale-from-zero") == [("m8b", "scale-from-zero--m8b")]
    assert plan_runs(small_spec(), "scale-from-zero") == []  # a warm model is not quoted
    what_if = build_scenario("scale-from-zero", small_spec(), duration_s=600.0)  # but can be simulated
    assert what_if.parameters["what_if"] is True and "what-if" in what_if.description
    assert at_zero(small_spec().models[0]).may_scale_to_zero


def test_scale_from_zero_compares_cron_the_door_and_the_fastest_cold_start() -> None:
    res = day()
    by = {r.name: r for r in res.results}
    assert list(by) == ["cron-only", "front-door", "front-door+fastest", "front-door+fastest+prewarm", "warm-minimum"]
    for r in res.results:
        assert conserved(r), r.name
    cron, door_, fast = by["cron-only"], by["front-door"], by["front-door+fastest"]
    assert cron.tracked_request(FIRST_LABEL).outcome == "lost" and cron.no_endpoint > 0  # early birds find no endpoint
    assert door_.tracked_request(FIRST_LABEL).outcome == "completed" and door_.completed > cron.completed
    assert fast.first_answer_s is not None and door_.first_answer_s is not None
    assert fast.first_answer_s < door_.first_answer_s  # the fastest cold start the stack allows
    assert float(res.parameters["fastest_cold_start_s"]) < float(res.parameters["cold_start_s"])
    warm = by["warm-minimum"]
    assert warm.first_answer_s is not None and warm.first_answer_s < 1.0
    idle = float(res.parameters["first_request_s"])
    for r in (cron, door_, fast):  # nothing runs, nothing is paid for, through the idle hours
        assert all(g == 0 for t, g in zip(r.series.t_s, r.series.gpus, strict=True) if t < idle), r.name
    assert all(g >= 1 for t, g in zip(warm.series.t_s, warm.series.gpus, strict=True) if t < idle)


def test_scale_from_zero_findings_quote_the_results() -> None:
    res = day()
    text = "\n".join(res.findings)
    for r in res.results:
        assert f"{r.completed:,} answered" in text and f"{r.refused:,} refused" in text
    door_ = res.result("front-door")
    assert f"first answer {door_.first_answer_s:.1f} s" in text
    assert "pre-warming a node at the first hold changes the first answer by" in text
