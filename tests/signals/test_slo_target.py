"""The targets derived from the SLO (``gpuscale.signals.slo_target``): each term behaves as its derivation says, and
the simulator's controller feeds the burst term the past it has seen."""

from __future__ import annotations

import math
from collections.abc import Callable
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


def prefill_role(spec: PlatformSpec) -> tuple[HpaRole, PrefillSlo]:
    hpa: HpaRole = build_controller(GpuscalePolicy(), prod_context(spec)).roles["prefill"]  # type: ignore[attr-defined]
    sig = hpa.rules[0].source
    assert isinstance(sig, PrefillSlo)
    return hpa, sig


def prefill_at(replicas: float, sig: PrefillSlo) -> RoleObservation:
    """A scrape with ``replicas`` of prefill work at the workload's mean prompt (no request finished: the fallback)."""
    return RoleObservation("prefill", 5, 5, 0.0, 0.0, 0.0, 0.0, 0.0,
                           prompt_rate=replicas / sig.coefficients.prefill_s(sig.coefficients.prompt_tokens_fallback))


def burst_after(spec: PlatformSpec, work: Callable[[float], float], until: int = 1800) -> tuple[float, HpaRole, PrefillSlo]:
    """The burst headroom the prefill trigger reads at ``until`` after scrapes every 15 s whose work (replicas) is
    ``work(t)``: what it asks for there minus what the same scrape asks for without a past."""
    hpa, sig = prefill_role(spec)
    for t in range(0, until, 15):
        hpa.decide(float(t), prefill_at(work(float(t)), sig))
    now = prefill_at(work(float(until)), sig)
    hpa.decide(float(until), now)
    return signal_value(sig, now, t=float(until), past=hpa.past) - signal_value(sig, now), hpa, sig


def test_the_burst_headroom_is_the_upper_quantile_of_the_works_change_over_a_cold_start(prod_spec: PlatformSpec) -> None:
    cold = size_platform(prod_spec).model("llama-70b-fp8").cold_start.total_s
    _, sig = prefill_role(prod_spec)
    c = slo_target.promql.duration_s(sig.burst_offset)
    assert c >= cold and c - cold < 60.0  # the cold start, rounded up to the subquery's step
    # work that jumps every minute to a level of a fixed pseudo-random sequence (between 2 and 6 replicas)
    levels = [2.0 + 4.0 * ((k * 7919) % 101) / 100.0 for k in range(31)]
    headroom, hpa, _ = burst_after(prod_spec, lambda t: levels[int(t // 60)])
    # the same statistic computed here: every whole minute of the half hour seen whose minute C before was seen too
    lag = int(c // 60)
    change = [levels[k] - levels[k - lag] for k in range(30, -1, -1) if k - lag >= 0]
    mean = math.fsum(change) / len(change)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in change) / len(change))
    assert len(change) == 31 - c // 60 and sd > 0.5
    # less the counting noise both ends of each change have: a Poisson stream of the workload's prompts at that work
    # counts ``work x m (1 + cs^2) x cost / 45 s`` of variance into a rate over 45 s
    w = prod_spec.models[0].workload.prompt_tokens
    m = sig.coefficients.prompt_tokens_fallback
    per_work = m * (1.0 + slo_target.lognormal_cs2(w.mean, w.p99)) * sig.coefficients.prefill_s(m) / 45.0
    noise = math.fsum((levels[k] + levels[k - lag]) * per_work for k in range(30, -1, -1) if k - lag >= 0) / len(change)
    assert 0.0 < noise < 0.1 * sd * sd
    expected = max(mean + slo_target.BURST_Z * math.sqrt(max(sd * sd - noise, 0.0)), 0.0)
    assert headroom == pytest.approx(expected, rel=1e-4)
    assert len(hpa.past) <= (sig.expr(()).reach_s() + 60.0) / 15 + 2  # the past is bounded by what the query reads


def test_a_ramp_holds_its_rise_within_a_cold_start_not_its_hours_spread(prod_spec: PlatformSpec) -> None:
    _, sig = prefill_role(prod_spec)
    c = slo_target.promql.duration_s(sig.burst_offset)
    slope = 4.0 / 1800.0  # replicas per second: 2 to 6 over the half hour
    headroom, _, _ = burst_after(prod_spec, lambda t: 2.0 + slope * t)
    assert headroom == pytest.approx(slope * c, rel=1e-6)  # every change over C is the same rise
    # the old rule, z sqrt(2) x the half hour's standard deviation of the work, counted the whole trend
    spread = slope * 1800.0 * math.sqrt((31 * 31 - 1) / 12.0) / 30.0
    assert slo_target.BURST_Z * math.sqrt(2.0) * spread > 3.0 * headroom
    # a steady load, and a falling one, hold none
    assert burst_after(prod_spec, lambda t: 4.0)[0] == pytest.approx(0.0, abs=1e-9)
    assert burst_after(prod_spec, lambda t: 6.0 - slope * t)[0] == 0.0


def test_no_minute_with_a_cold_start_of_past_reads_no_headroom(prod_spec: PlatformSpec) -> None:
    _, sig = prefill_role(prod_spec)
    c = int(slo_target.promql.duration_s(sig.burst_offset))
    # a fresh Prometheus: less than a cold start of past, the term reads 0 (not empty, which would empty the query)
    headroom, _, _ = burst_after(prod_spec, lambda t: 2.0 + t / 60.0, until=c - 15)
    assert headroom == 0.0


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
    offset = r.signals[0].burst_offset  # type: ignore[union-attr]
    assert r.burst_headroom_replicas == pytest.approx(slo_target.expected_burst_headroom(
        work, w.burst.multiplier, w.burst.duration_s, w.burst.per_hour, offset), abs=0.01)
    assert r.burst_headroom_replicas > 0
    assert slo_target.expected_burst_headroom(work, 1.0, 60.0, 2.0, offset) == 0.0  # no bursts, no headroom


def one_minute_rate(level: Callable[[float], float], t: float) -> float:
    """The mean of ``level`` over the minute before ``t`` (a rate over a 1 m window), by a fine Riemann sum."""
    return sum(level(t - 60.0 + (i + 0.5) * 0.25) for i in range(240)) / 240.0


@pytest.mark.parametrize(("multiplier", "duration_s", "per_hour"), [(3.0, 120.0, 2.0), (2.0, 20.0, 6.0), (5.0, 600.0, 1.0)])
def test_the_priced_headroom_is_the_query_on_the_bursts_one_minute_work(multiplier: float, duration_s: float, per_hour: float) -> None:
    work, offset = 2.0, "5m"
    period, c = 3600.0 / per_hour, 300.0

    def level(t: float) -> float:
        return work * (multiplier if t % period < duration_s else 1.0)

    # independently: at each instant of one period (15 s apart), mean + z x sd of the one-minute work's change over C
    # at the hour's sixty one-minute points, averaged over the instants
    values = []
    for i in range(int(period // 15)):
        t = 10 * period + i * 15.0
        change = [one_minute_rate(level, t - 60 * k) - one_minute_rate(level, t - 60 * k - c) for k in range(60)]
        mean = sum(change) / 60
        sd = math.sqrt(sum((x - mean) ** 2 for x in change) / 60)
        values.append(max(mean + slo_target.BURST_Z * sd, 0.0))
    expected = sum(values) / len(values)
    assert expected > 0.1
    assert slo_target.expected_burst_headroom(work, multiplier, duration_s, per_hour, offset) == pytest.approx(expected, rel=1e-3)


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


class _Prompt:
    """One gauge, the prompt: what ``prefill_seconds`` is given in the trigger (a vector)."""

    def __init__(self, tokens: float) -> None:
        self.tokens = tokens

    def gauge_sum(self, metric: str, matchers: tuple[tuple[str, str, str], ...]) -> float | None:
        return self.tokens

    def rate_sum(self, metric: str, matchers: tuple[tuple[str, str, str], ...], window: str) -> float | None:
        return None


@pytest.mark.parametrize("prompt", [300.0, 2048.0, 10_000.0])
def test_the_tail_prompt_s_service_under_pipeline_parallelism_is_the_engine_s_lone_prompt(
    stack_specs: dict[str, PlatformSpec], prompt: float,
) -> None:
    """The queueing bound's budget is what the TTFT target leaves once the p99 prompt has been prefilled alone. Under
    pipeline parallelism the engine streams a lone prompt's chunks through the stages and its last chunk still crosses
    the stages after the first (``perf.StepCost.pipelined_prefill_s``): sizing's coefficients count that fill, so the
    two agree where the prompt is compute-bound; at the pipeline's full rate alone, a one-chunk prompt reads about
    half. Without pipeline parallelism there is no fill."""
    from gpuscale import perf
    from gpuscale.signals import promql
    from gpuscale.sizing import signal_coefficients
    from gpuscale.spec.catalogue import CATALOGUE

    spec = stack_specs["staging"]
    model = spec.models[0]
    gpu, chunk = CATALOGUE["p4de.24xlarge"].gpu, 2048
    tokens = promql.Series("prompt", ())

    def seconds(c: object) -> float:
        value = promql.evaluate(slo_target.prefill_seconds(tokens, c), _Prompt(prompt))  # type: ignore[arg-type]
        assert value is not None
        return value

    cost = perf.step_cost(model.architecture, gpu, 4, 2)
    coef = signal_coefficients(model, cost, 8, 100_000, 256, chunk)
    engine = cost.pipelined_prefill_s(prompt, float(chunk))
    assert seconds(coef) == pytest.approx(engine, rel=0.1)
    if prompt <= chunk:
        assert seconds(coef.model_copy(update={"prefill_fill_s_per_token": 0.0})) < 0.6 * engine
    flat = perf.step_cost(model.architecture, gpu, 8, 1)
    plain = signal_coefficients(model, flat, 8, 100_000, 256, chunk)
    assert plain.prefill_fill_s_per_token == 0.0 and plain.prefill_chunk_tokens == 0
    assert seconds(plain) == pytest.approx(
        prompt * plain.prefill_s_per_token + prompt * prompt * plain.prefill_s_per_pair / 2.0,
    )
