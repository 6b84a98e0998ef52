"""The burst headroom takes out the one-minute rate's own counting noise (``slo_target.counting_variance``): a
constant-rate Poisson stream, scraped as the simulator scrapes (``sim.simulation._counter_rates``), holds next to no
burst headroom, while the uncorrected term holds a clear amount; a real step of load still gets its headroom.

Requests arrive from the simulator's own traffic generator (Poisson, the stack's prompt and output mix) and each adds
its prompt and output tokens to the engine's counters at once: a prefill or a decode delays them by seconds, which
leaves a Poisson stream Poisson."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest

from gpuscale.signals import promql, slo_target
from gpuscale.signals.slo_target import QueuedSignal
from gpuscale.sim.policies import (
    GpuscalePolicy,
    HpaRole,
    ObservedSeries,
    RoleObservation,
    build_controller,
)
from gpuscale.sim.simulation import _counter_rates
from gpuscale.sim.traffic import RatePoint, SyntheticTraffic, generate
from gpuscale.spec.platform import PlatformSpec
from tests.sim.test_policies import prod_context

SCRAPE_S = 15.0
KV_SUM, RUNNING = 0.4, 8.0
"""A fixed KV use and running count (the decode cost per token is read at their ratio)."""


@dataclass
class Engine:
    """The counters ``_counter_rates`` reads off an engine."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    done_requests: int = 0
    done_prompt_tokens: int = 0
    queue_time_sum: float = 0.0
    itl_sum: float = 0.0
    itl_count: int = 0
    replica: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(counter_samples=deque()))


def controller(spec: PlatformSpec, role: str) -> tuple[HpaRole, QueuedSignal]:
    hpa: HpaRole = build_controller(GpuscalePolicy(), prod_context(spec)).roles[role]  # type: ignore[attr-defined]
    sig = hpa.rules[0].source
    assert isinstance(sig, QueuedSignal)
    return hpa, sig


def scraped(spec: PlatformSpec, role: str, rps: list[RatePoint], until_s: float, seed: int = 7):
    """Scrapes every 15 s of one replica's counters under Poisson arrivals at ``rps``, fed to the role's controller;
    yields ``(t, observation, controller)`` at every whole minute after the first 75."""
    m = spec.models[0]
    w = m.workload
    arrivals = generate(SyntheticTraffic(profile=rps, prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens,
                                         ), seed, until_s)
    hpa, _ = controller(spec, role)
    e, i, n = Engine(), 0, len(arrivals)
    for k in range(int(until_s // SCRAPE_S) + 1):
        t = k * SCRAPE_S
        while i < n and arrivals.arrival_s[i] <= t:
            e.prompt_tokens += int(arrivals.prompt_tokens[i])
            e.generation_tokens += int(arrivals.output_tokens[i])
            e.done_requests += 1
            e.done_prompt_tokens += int(arrivals.prompt_tokens[i])
            i += 1
        rates = _counter_rates(e.replica, t, e)  # type: ignore[arg-type]
        obs = RoleObservation(role, 4, 4, 0.0, 0.0, 0.0, KV_SUM, RUNNING, *rates)
        hpa.decide(t, obs)
        if t >= 75 * 60 and t % 60 == 0:
            yield t, obs, hpa


def burst_terms(spec: PlatformSpec, role: str, rps: list[RatePoint], until_s: float) -> tuple[np.ndarray, np.ndarray, float]:
    """At each whole minute after 75: the trigger's burst term, the same term without the correction (``noise`` 0),
    and the mean work."""
    _, sig = controller(spec, role)
    work = sig.work(())
    terms = (sig.burst(()), slo_target.burst_headroom(work, promql.Number(0.0), sig.burst_offset), work)
    values: list[list[float]] = [[], [], []]
    for t, obs, hpa in scraped(spec, role, rps, until_s):
        now = ObservedSeries(obs, None, t, hpa.past)
        for row, term in zip(values, terms, strict=True):
            value = promql.evaluate(term, now)
            assert value is not None
            row.append(value)
    ours, uncorrected, works = values
    return np.array(ours), np.array(uncorrected), float(np.mean(works))


CASES = [("prod", "prefill", 10.0), ("dev", "aggregated", 2.0)]
"""Prod's 70B prefill role and dev's aggregated 8B (prompt and output tokens counted together), at their peak rps."""


@pytest.mark.parametrize(("stack", "role", "rps"), CASES)
def test_a_constant_rate_poisson_stream_holds_no_burst_headroom(
    stack_specs: dict[str, PlatformSpec], stack: str, role: str, rps: float,
) -> None:
    ours, uncorrected, work = burst_terms(stack_specs[stack], role, [RatePoint(t_s=0.0, rps=rps)], 105 * 60.0)
    # the counting noise alone reads as a burst without the correction: a sizeable share of the work, every minute
    assert uncorrected.min() > 0.05 * work and uncorrected.mean() > 0.15 * work
    # with it, the hour's spread of the change is mostly the noise the rate's count has at that rate: what is left is the
    # sampling error of sixty points' variance and the mean change, a small fraction of what the noise read as
    assert ours.mean() < 0.25 * uncorrected.mean()
    assert np.median(ours) < 0.25 * np.median(uncorrected)


@pytest.mark.parametrize(("stack", "role", "rps"), CASES)
def test_a_step_of_load_still_gets_its_headroom(
    stack_specs: dict[str, PlatformSpec], stack: str, role: str, rps: float,
) -> None:
    spec = stack_specs[stack]
    # the rate doubles at minute 85; minutes 90-92 see the rise within a cold start of their past
    step = [RatePoint(t_s=0.0, rps=rps), RatePoint(t_s=85 * 60.0, rps=rps), RatePoint(t_s=85 * 60.0 + 1, rps=2 * rps)]
    ours, uncorrected, _ = burst_terms(spec, role, step, 92 * 60.0)
    flat, flat_uncorrected, work = burst_terms(spec, role, [RatePoint(t_s=0.0, rps=rps)], 92 * 60.0)
    after, after_uncorrected = ours[-3:], uncorrected[-3:]
    assert after.min() > 0.6 * work  # the rise is the work's own size: the term holds most of it
    assert after.min() > 2.5 * flat.max()
    # the correction takes out of a step no more than it takes out of the same stream without one: the noise
    assert (after_uncorrected - after).max() <= (flat_uncorrected - flat).max()


@pytest.mark.parametrize("stack", ["dev", "prod"])  # staging's backend is hpa: no derived signal
def test_a_signals_work_is_the_sum_of_the_token_counts_its_noise_is_read_from(
    stack_specs: dict[str, PlatformSpec], stack: str,
) -> None:
    """``work()`` and ``counts()`` are built apart (the work through the load signals' own helpers), so they are held
    together here: the counting noise is that of the work the trigger answers, ``sum(rate x cost)``."""
    from gpuscale.signals import vllm_metrics as vm
    from gpuscale.sizing import size_platform
    from tests.signals.test_promql import Fixed

    samples = Fixed(
        {vm.KV_CACHE: 3.2, vm.RUNNING: 40.0},
        {vm.PROMPT_TOKENS: 9_000.0, vm.GENERATION_TOKENS: 2_500.0, f"{vm.REQUEST_PROMPT_TOKENS}_sum": 8_800.0,
         f"{vm.REQUEST_PROMPT_TOKENS}_count": 4.0},
    )
    seen = 0
    for model in size_platform(stack_specs[stack]).models:
        for role in model.roles:
            for sig in role.signals:
                if not isinstance(sig, slo_target.BurstSignal):
                    continue
                parts = [promql.evaluate(k.rate * k.cost, samples) for k in sig.counts(())]
                work = promql.evaluate(sig.work(()), samples)
                assert work is not None and all(p is not None for p in parts)
                assert work == pytest.approx(sum(p for p in parts if p is not None), rel=1e-12), (model.model, role.role)
                seen += 1
    assert seen > 0
