"""The targets derived from the SLO (``gpuscale.signals.slo_target``): each term behaves as its derivation says, and
the simulator's controller feeds the burst term the past it has seen."""

from __future__ import annotations

import math
from dataclasses import replace

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


def bursty_past(hpa: HpaRole, rate: float, swing: float, mean_prompt: float, until: int = 900) -> None:
    """Scrapes with a steady 1 m rate whose 15 s intervals alternate ``rate x (1 +- swing)``."""
    for t in range(0, until, 15):
        short = rate * (1.0 + swing if (t // 15) % 2 else 1.0 - swing)
        hpa.decide(float(t), RoleObservation("prefill", 5, 5, 0.0, 0.0, 0.0, 0.0, 0.0, prompt_rate=rate,
                                             done_rate_5m=1.0, done_prompt_rate_5m=mean_prompt, prompt_rate_short=short))


def test_sub_minute_bursts_scale_the_queueing_headroom_by_the_observed_index_of_dispersion(prod_spec: PlatformSpec) -> None:
    hpa = build_controller(GpuscalePolicy(), prod_context(prod_spec)).roles["prefill"]  # type: ignore[attr-defined]
    sig = hpa.rules[0].source
    assert isinstance(sig, PrefillSlo)
    m = 1500.0
    rate = 2.0 / sig.coefficients.prefill_s(m)  # two replicas of work
    now = obs(rate, m)
    calm = signal_value(sig, now)  # no past: Poisson arrivals of the workload's mix (the floor)
    queueing_floor = calm - 2.0
    bursty_past(hpa, rate, 0.1, m)
    # the query's instant is the next interval of the same pattern: forty points, twenty on each side
    need = signal_value(sig, replace(now, prompt_rate_short=rate * 0.9), t=900.0, past=hpa.past)
    # the 15 s rate deviates from the 1 m one by +-10 %: Var = (0.1 rate)^2, which the deviation from a 3-interval
    # mean keeps 2/3 of; ca^2 + cs^2 = 15 s x Var / (1 - 1/3) / (mean rate x mean prompt)
    observed = 15.0 * (0.1 * rate) ** 2 / (2.0 / 3.0) / (rate * m)
    assert observed > 2.0 * sig.queue_factor  # above the Poisson floor
    assert need - 2.0 == pytest.approx(queueing_floor * observed / (2.0 * sig.queue_factor), rel=1e-6)
    # the same past at no traffic: nothing needed (the role may scale to zero), and no NaN from 0 x the factor
    assert signal_value(sig, RoleObservation("prefill", 5, 5, 0.0, 0.0, 0.0, 0.0, 0.0), t=900.0, past=hpa.past) == 0.0


def test_a_smooth_past_and_a_ramp_read_the_poisson_floor(prod_spec: PlatformSpec) -> None:
    # intervals that follow the minute's rate (Poisson-smooth at this scale) and a slow ramp are not burstiness
    hpa = build_controller(GpuscalePolicy(), prod_context(prod_spec)).roles["prefill"]  # type: ignore[attr-defined]
    sig = hpa.rules[0].source
    m = 1500.0
    rate = 2.0 / sig.coefficients.prefill_s(m)
    for t in range(0, 900, 15):
        ramp = rate * (0.5 + t / 1800.0)
        hpa.decide(float(t), RoleObservation("prefill", 5, 5, 0.0, 0.0, 0.0, 0.0, 0.0, prompt_rate=ramp, done_rate_5m=1.0,
                                             done_prompt_rate_5m=m, prompt_rate_short=ramp))
    q = slo_target.dispersion((), sig.coefficients, 2.0 * sig.queue_factor)
    assert slo_target.promql.evaluate(q, slo_target_samples(hpa, obs(rate, m))) == pytest.approx(2.0 * sig.queue_factor)


def slo_target_samples(hpa: HpaRole, o: RoleObservation) -> object:
    from gpuscale.sim.policies import ObservedSeries

    return ObservedSeries(o, None, 900.0, hpa.past)


def test_the_dispersion_query_renders_and_parses_back(prod_spec: PlatformSpec) -> None:
    from gpuscale.signals import promql

    sig = prefill(prod_spec)
    sel = (("namespace", "=", "ns"), ("gpuscale_io_role", "=", "prefill"))
    text = sig.expr(sel).render()
    assert 'avg_over_time((sum(rate(vllm:prompt_tokens_total{namespace="ns",gpuscale_io_role="prefill"}[1m])))[10m:15s])' in text
    assert 'stddev_over_time((sum(rate(vllm:prompt_tokens_total{namespace="ns",gpuscale_io_role="prefill"}[30s])) - ' in text
    assert promql.parse(text).render() == text  # what the KEDA model reads back from the emitted ScaledObject


@pytest.mark.parametrize("context_tokens", [300, 2_000, 8_000, 30_000])
def test_the_decode_target_is_the_step_models_itl_capacity_at_the_kv_share_in_use(prod_spec: PlatformSpec, context_tokens: int) -> None:
    from gpuscale import perf, sizing
    from gpuscale.signals.decode_slo import DecodeSlo
    from gpuscale.spec.catalogue import CATALOGUE

    ms = size_platform(prod_spec).model("llama-70b-fp8")
    sig = ms.role("decode").signals[0]
    assert isinstance(sig, DecodeSlo) and sig.coefficients.decode_itl_lines
    m = prod_spec.models[0]
    inst = CATALOGUE[ms.shape.instance_type]
    cost = perf.step_cost(m.architecture, inst.gpu, ms.shape.tensor_parallel_size, ms.shape.pipeline_parallel_size,
                          prefill_rate=ms.prefill_tokens_per_s)
    budget = m.slo.itl_p99_s * sizing.ITL_HEADROOM
    # brute force through the perf model's own step: the largest batch within the budget, at most max_num_seqs
    batch = 0
    while batch < ms.max_num_seqs and cost.step_s(batch + 1, (batch + 1) * context_tokens) <= budget:
        batch += 1
    assert batch >= 1
    per_token = cost.step_s(batch, batch * context_tokens) / batch  # replica-seconds per output token there
    tokens_per_s = 1000.0
    o = RoleObservation("decode", 2, 2, 0.0, 0.0, 0.0, kv_sum=context_tokens / ms.kv_capacity_tokens, running=1.0,
                        generation_rate=tokens_per_s)
    # the signal holds the replicas the ITL target allows at that context (continuous batch: within one sequence)
    assert signal_value(sig, o) == pytest.approx(tokens_per_s * per_token, rel=1.5 / batch + 1e-6)
