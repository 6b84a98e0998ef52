"""The targets derived from the SLO (``gpuscale.signals.slo_target``): each term behaves as its derivation says, and
the simulator's controller feeds the burst term the past it has seen."""

from __future__ import annotations

import math

import pytest

from gpuscale.signals import slo_target
from gpuscale.signals.prefill_slo import PrefillSlo
from gpuscale.sim.policies import GpuscalePolicy, HpaRole, RoleObservation, build_controller, signal_value
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import validate_config
from tests.sim.test_policies import prod_context


def test_the_lognormal_fit_recovers_its_shape() -> None:
    # a lognormal with s = 0.8: mean exp(s^2 / 2), p99 exp(2.326 s), cs^2 = exp(s^2) - 1
    s = 0.8
    assert slo_target.lognormal_cs2(math.exp(s * s / 2), math.exp(2.326 * s)) == pytest.approx(math.expm1(s * s), rel=1e-3)
    assert slo_target.lognormal_cs2(100.0, 100.0) == 0.0  # every prompt alike


def prefill(spec: PlatformSpec) -> PrefillSlo:
    sig = size_platform(spec).model("llama-70b-fp8").role("prefill").signals[0]
    assert isinstance(sig, PrefillSlo)
    return sig


def obs(prompt_rate: float, mean_prompt: float) -> RoleObservation:
    return RoleObservation("prefill", 3, 3, 0.0, 0.0, 0.0, 0.0, 0.0, prompt_rate=prompt_rate, done_rate_5m=1.0,
                           done_prompt_rate_5m=mean_prompt)


def test_long_prompts_need_more_headroom_than_short_ones_at_the_same_work(raw_stack) -> None:  # type: ignore[no-untyped-def]
    sig = prefill(validate_config(raw_stack("prod"), "t"))
    c = sig.coefficients

    def needed(mean: float) -> float:
        return signal_value(sig, obs(3.0 / c.prefill_s(mean), mean))  # three replicas of work at this mean prompt

    short, long = needed(1500.0), needed(12_000.0)
    assert 3.0 < short < 3.5 < long  # the same work, but one long prompt is a large share of the TTFT budget
    # a utilisation target of 0.7 holds 3 / 0.7 = 4.3 replicas for both: too many for short, too few for long prompts
    assert short < 3.0 / 0.7 and long / sig.target > 3.0 / 0.7


def test_a_wider_prompt_mix_gets_more_queueing_headroom(raw_stack) -> None:  # type: ignore[no-untyped-def]
    narrow = raw_stack("prod")
    wide = raw_stack("prod")
    wide["models"][0]["workload"]["prompt_tokens"]["p99"] = 14_000
    a, b = prefill(validate_config(narrow, "t")), prefill(validate_config(wide, "t"))
    assert b.queue_factor > a.queue_factor > 1.0 and b.tail_ratio > a.tail_ratio


def test_the_controller_holds_burst_headroom_from_the_work_it_has_seen(prod_spec: PlatformSpec) -> None:
    c = build_controller(GpuscalePolicy(), prod_context(prod_spec))
    hpa: HpaRole = c.roles["prefill"]  # type: ignore[attr-defined]
    assert hpa.keeps_past
    sig = hpa.rules[0].source
    assert isinstance(sig, PrefillSlo)
    steady = 4.0 / sig.coefficients.prefill_s(1500)  # four replicas of work
    now = RoleObservation("prefill", 5, 5, 0.0, 0.0, 0.0, 0.0, 0.0, prompt_rate=steady)
    for t in range(0, 1800, 15):
        calm = hpa.decide(float(t), now)
    calm_need = signal_value(sig, now, t=1800.0, past=hpa.past)
    # half an hour in which the work swings between 2 and 6 replicas every two minutes: the same load now needs more
    fresh = build_controller(GpuscalePolicy(), prod_context(prod_spec)).roles["prefill"]  # type: ignore[attr-defined]
    for t in range(0, 1800, 15):
        swing = steady * (0.5 if (t // 120) % 2 else 1.5)
        fresh.decide(float(t), RoleObservation("prefill", 5, 5, 0.0, 0.0, 0.0, 0.0, 0.0, prompt_rate=swing))
    bursty = fresh.decide(1800.0, now)
    need = signal_value(sig, now, t=1800.0, past=fresh.past)
    assert calm == 5 and calm_need == pytest.approx(signal_value(sig, now))  # a steady past: no burst headroom
    # four replicas of work + their queueing headroom + 2.326 x sqrt(2) x 2 (the swing's standard deviation)
    assert need - calm_need == pytest.approx(2.326 * math.sqrt(2) * 2.0, rel=0.05)
    assert bursty == hpa.max_replicas == 7  # asks for all it may have
    assert len(fresh.past) <= slo_target.promql.duration_s(slo_target.BURST_LOOKBACK) / 15 + 6  # the past is bounded


def test_a_role_without_traffic_holds_no_headroom(prod_spec: PlatformSpec) -> None:
    hpa = build_controller(GpuscalePolicy(), prod_context(prod_spec)).roles["prefill"]  # type: ignore[attr-defined]
    busy = 4.0 / hpa.rules[0].source.coefficients.prefill_s(1500)
    for t in range(0, 600, 15):
        hpa.decide(float(t), RoleObservation("prefill", 5, 5, 0.0, 0.0, 0.0, 0.0, 0.0, prompt_rate=busy * (t % 60 == 0)))
    quiet = RoleObservation("prefill", 5, 5, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert signal_value(hpa.rules[0].source, quiet, t=600.0, past=hpa.past) == 0.0


def test_the_plan_prices_the_burst_headroom(prod_spec: PlatformSpec) -> None:
    m = size_platform(prod_spec).model("llama-70b-fp8")
    r = m.role("prefill")
    w = prod_spec.models[0].workload
    work = r.replicas_per_rps * w.peak_rps
    assert r.burst_headroom_replicas == pytest.approx(
        slo_target.expected_burst_headroom(work, w.burst.multiplier, w.burst.duration_s, w.burst.per_hour), abs=0.01)
    assert r.burst_headroom_replicas > 0
    assert slo_target.expected_burst_headroom(work, 1.0, 60.0, 2.0) == 0.0  # no bursts, no headroom
