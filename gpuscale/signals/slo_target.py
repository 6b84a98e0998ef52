"""The per-replica target derived from the SLO and the traffic arriving, shared by the SLO-derived load signals.

A role needs ``work + queueing headroom + burst headroom`` replicas, each term a PromQL expression over what vLLM
exports, so the trigger's query answers *replicas needed* and its ``AverageValue`` target is one replica (KEDA: desired
``ceil(sum / 1)``). The terms:

* **work** (replicas' worth): prefill ``rate(vllm:prompt_tokens_total[1m]) x cost per token at the recent mean prompt``
  (linear layers plus the causal-attention term, ``vllm:request_prompt_tokens`` sum over count over 5m); decode
  ``rate(vllm:generation_tokens_total[1m]) x step time at the KV share in use`` (``vllm:kv_cache_usage_perc`` over
  ``vllm:num_requests_running``), 1.0 being a replica at the batch whose step is ``ITL_HEADROOM`` of the ITL p99.
* **queueing headroom** (prefill, Erlang-C tail bound): prefill replicas form an M/G/c queue of prompts whose mean
  service is ``E[S] = mean prompt x cost per token`` and offered load ``a`` (the work term). For M/M/c,
  ``P(wait > t) = C(c, a) exp(-(c - a) t / E[S])``, and the Erlang-C probability of waiting falls with ``c``, so
  ``C(c, a) <= C(1, a) = min(a, 1)``: ``c - a >= E[S] / t x ln(min(a, 1) / eps)`` keeps the TTFT tail within ``eps``
  (the SLO's 1 % for a p99), and it is 0 at no load (a role with no traffic holds no headroom and may sleep). The
  Allen-Cunneen factor ``(ca^2 + cs^2) / 2`` carries it to bursty arrivals and general prompt mixes: observed as the
  index of dispersion of the prompt tokens over 15 s intervals (``dispersion``), at least the Poisson value
  ``(1 + cs^2) / 2`` with ``cs^2`` of the lognormal the workload's mean and p99 fit. ``t`` is the TTFT budget left after the service of the p99 prompt
  (``p99 / mean`` of the workload times the observed mean), at least ``SLACK_FLOOR_SHARE`` of the TTFT target (a p99
  prompt that alone takes more than that is a prompt no replica count helps).
* **burst headroom** (every role): replicas added by a scale-up answer only after a cold start ``C``, so the warm
  replicas must carry the rise of load that can come within one. It is observed, not assumed: the change of the work
  over one cold start, ``d(t) = work(t) - work(t - C)`` (the same query with every selector ``offset C``), at each
  minute of the last hour, and its upper ``eps`` quantile read as ``mean(d) + BURST_Z x sd``, at least 0, ``sd`` the
  standard deviation of ``d`` less the one-minute rate's own counting noise (``sqrt(var(d) - noise)``: two minutes of
  a constant-rate Poisson stream differ by that much, which is no rise of load; ``counting_variance``). A
  ramp's rise within ``C`` is the mean and counts in full; a trend slower than ``C`` (the daily curve) counts only by
  what it rises within ``C`` (the hour's standard deviation of the work itself counted all of it); noise with a
  correlation time shorter than ``C`` gives ``stddev(d) = sqrt(2) sigma``, the old rule, and slower variation less.
  ``C`` is the role's cold start on a fresh node (``ModelSizing.cold_start``: node, GPU, image, weights, engine),
  rounded up to the subquery's step (``burst_offset``). A minute whose work, now or ``C`` before, had no series (the
  role at zero, a fresh Prometheus) has no point; no point at all reads 0. It is scaled by ``min(work / IDLE_WORK,
  1)``, so a role whose traffic has stopped holds no headroom for the hour its past still varies (at zero, the front
  door or a cron trigger wakes it).
"""

from __future__ import annotations

import functools
import math
import operator
from abc import abstractmethod
from collections.abc import Sequence
from typing import NamedTuple

from gpuscale.signals import promql, vllm_metrics
from gpuscale.signals.base import (
    RATE_WINDOW,
    CostedSignal,
    SignalCoefficients,
    SignalSizing,
    mean_prompt,
    prefill_cost,
    total,
)
from gpuscale.signals.keda_model import HPA_TOLERANCE
from gpuscale.signals.promql import Expr, Matcher

TARGET_REPLICAS = round(1.0 / (1.0 + HPA_TOLERANCE), 4)
"""The derived signals' ``AverageValue`` target: the HPA holds the count while ``|needed / (target x replicas) - 1|``
is within its tolerance (``keda_model.HPA_TOLERANCE``, 10 %), so a target of one replica would let a role sit 10 %
below what it needs; ``1 / (1 + tolerance)`` keeps every replica at or below one replica's worth of need (the band is
82-100 % of it)."""
TTFT_TAIL = 0.01
"""Share of requests the TTFT p99 target lets miss it: the ``eps`` of the queueing bound."""
BURST_Z = 2.326
"""Upper 1 % quantile of a standard normal (the same ``eps``): how many standard deviations of the load's change
within a cold start, above its mean change, the warm replicas carry."""
BURST_LOOKBACK = "1h"
BURST_STEP = "1m"
"""The subquery over which the work's change within a cold start is observed: an hour of one-minute points (the rate
window)."""
SLACK_FLOOR_SHARE = 0.5
"""Least share of the TTFT p99 target the queueing bound assumes is left for waiting."""
IDLE_WORK = 0.01
"""Work (replicas' worth) below which a role counts as idle for the burst headroom: a hundredth of a replica."""
PERCENTILE_Z = 2.326
"""z of the p99 in the lognormal fit of the workload's mean and p99."""
DISPERSION_WINDOW = "30s"
DISPERSION_INTERVAL_S = 15.0
"""The sub-minute rate the arrivals' variance is read from: ``rate(vllm:prompt_tokens_total[30s])`` holds the last two
scrapes at the default 15 s ``observability.scrape_interval_s``, so each point is the prompt tokens of one 15 s
interval (Prometheus extrapolates the two samples' increase to the window: ``promql/functions.go``
``extrapolatedRate``); the subquery steps by the same interval, so its points are disjoint intervals."""
DISPERSION_STEP = "15s"
DISPERSION_LOOKBACK = "10m"
"""The subquery over which the sub-minute variance is observed: forty 15 s intervals."""
RATE_INTERVALS = 3
"""15 s intervals a ``rate(...[1m])`` spans (four scrapes within the minute: 45 s between the first and the last)."""
RATE_SPAN_S = RATE_INTERVALS * DISPERSION_INTERVAL_S
"""Seconds of counting one ``rate(...[1m])`` holds: the increase between the window's first and last scrape, 45 s
apart. Prometheus extends that increase to the window (each end by its gap to the window's edge while the gap is under
1.1 x the mean scrape interval, which a 15 s scrape in a left-open 1 m window always is, so the two gaps sum to 15 s) and
divides by the window's 60 s (``promql/functions.go`` ``extrapolatedRate``, v3.14.0 L540-549 and L614-625): the 45 s
increase over 45 s. The simulator's scrape divides the same increase by the same span (``sim.simulation
._counter_rates``). So the rate's counting noise is that of 45 s (``counting_variance``)."""
DISPERSION_MAX = 1000.0
"""Largest ``ca^2 + cs^2`` the queueing bound takes: only keeps the factor finite (``0 x Inf`` is NaN in PromQL, and a
role with no traffic must read 0). Not a tuning knob: the Azure code trace's prompt tokens read 50-170 at x1 (its
requests arrive in clumps), the conversation trace's about 2 (Poisson with its mix); ``docs/simulator.md``."""


def burst_why(offset: str) -> str:
    """How the signals' rationale states the burst headroom, from the constants it is computed with."""
    return (
        f"the rise of work within a cold start ({offset}) seen over the last {BURST_LOOKBACK}: the upper "
        f"{TTFT_TAIL:.0%} of work(t) - work(t - {offset}) at {BURST_STEP} steps (mean + {BURST_Z:.3g} x standard "
        "deviation, less what counting a constant-rate Poisson stream over a minute's rate alone gives)"
    )


TARGET_WHY = f"target one replica within the HPA's {HPA_TOLERANCE:.0%} tolerance ({TARGET_REPLICAS:g})"
"""How the signals' rationale states the derived target."""
QUEUEING_WHY = (
    f"the Erlang-C headroom that keeps {1 - TTFT_TAIL:.0%} of prompts from waiting past the budget the p99 prompt's own "
    f"prefill leaves, scaled by the arrivals' burstiness and the prompt mix ((ca^2 + cs^2) / 2, ca^2 + cs^2 the "
    f"prompt tokens' index of dispersion over {DISPERSION_STEP} intervals)"
)
"""How the signals' rationale states the queueing headroom."""


def lognormal_cs2(mean: float, p99: float) -> float:
    """Squared coefficient of variation of the lognormal with this mean and p99: ``ln(p99 / mean) = z s - s^2 / 2``
    solved for the smaller ``s``; ``exp(s^2) - 1``. A ratio beyond the lognormal's largest (``exp(z^2 / 2)``) takes
    ``s = z``."""
    r = max(p99 / mean, 1.0)
    disc = PERCENTILE_Z * PERCENTILE_Z - 2.0 * math.log(r)
    s = PERCENTILE_Z - math.sqrt(disc) if disc > 0 else PERCENTILE_Z
    return math.expm1(s * s)


def queue_factor(prompt_mean: float, prompt_p99: float) -> float:
    """The Allen-Cunneen factor ``(1 + cs^2) / 2`` of the workload's prompt mix with Poisson arrivals (``ca^2 = 1``):
    the least the queueing bound takes (``dispersion``)."""
    return (1.0 + lognormal_cs2(prompt_mean, prompt_p99)) / 2.0


def dispersion(sel: tuple[Matcher, ...], c: SignalCoefficients, floor: float) -> Expr:
    """``ca^2 + cs^2`` of the prompt work arriving, observed: the index of dispersion of the prompt tokens counted over
    15 s intervals, over the mean prompt ``m``, at least ``floor`` (``2 x queue_factor``: Poisson arrivals of the
    workload's mix), at most ``DISPERSION_MAX``.

    For prompts of ``X`` tokens arriving as a renewal process of rate ``lambda``, the tokens of an interval ``T`` have
    ``Var = lambda T E[X]^2 (ca^2 + cx^2)`` and mean ``lambda T E[X]``, so ``T Var(rate) / (mean rate x m)`` is
    ``ca^2 + cx^2``: the Allen-Cunneen numerator, bursts and prompt mix together, in what vLLM already counts. The
    variance is of the 15 s rate about the 1 m rate at the same instant, so a change of load slower than a minute (a
    ramp, the daily curve: the work term follows it) is not counted as burstiness; the 1 m rate averages
    ``RATE_INTERVALS`` intervals, one of them the 15 s one, so the deviation keeps ``1 - 1 / RATE_INTERVALS`` of the
    15 s variance. No traffic (or no past: sizing's steady series, a fresh Prometheus) reads the floor."""
    short = promql.Series(vllm_metrics.PROMPT_TOKENS, sel, DISPERSION_WINDOW)
    minute = promql.Series(vllm_metrics.PROMPT_TOKENS, sel, RATE_WINDOW)
    spread = promql.StddevOverTime(short - minute, DISPERSION_LOOKBACK, DISPERSION_STEP)
    mean = promql.Above(promql.AvgOverTime(minute, DISPERSION_LOOKBACK, DISPERSION_STEP), 0.0)
    scale = DISPERSION_INTERVAL_S / (1.0 - 1.0 / RATE_INTERVALS)
    observed = promql.Otherwise(promql.Number(scale) * spread * spread / (mean * mean_prompt(sel, c.prompt_tokens_fallback)), 0.0)
    return promql.ClampMax(promql.ClampMin(observed, floor), DISPERSION_MAX)


def prefill_seconds(tokens: Expr, c: SignalCoefficients) -> Expr:
    """Seconds one replica takes to prefill a prompt of ``tokens`` alone: ``L x (s/token + s/pair / 2 x L)``, and under
    pipeline parallelism the pipeline's fill, ``(pp - 1) x s/token x min(L, chunk)``
    (``SignalCoefficients.prefill_fill_s_per_token``), as the engine steps a lone prompt."""
    alone = tokens * promql.Number(c.prefill_s_per_token) + tokens * tokens * promql.Number(c.prefill_s_per_pair / 2.0)
    if c.prefill_fill_s_per_token <= 0.0:
        return alone
    return alone + promql.Number(c.prefill_fill_s_per_token) * promql.ClampMax(tokens, float(c.prefill_chunk_tokens))


def queueing_headroom(
    sel: tuple[Matcher, ...], c: SignalCoefficients, work: Expr, *, ttft_s: float, factor: float, tail_ratio: float,
) -> Expr:
    """``(ca^2 + cs^2) / 2 x E[S] / max(TTFT - S(p99 prompt), floor x TTFT) x max(ln(min(work, 1) / eps), 0)`` over
    the observed mean prompt (``clamp_min``: ``ln(0)`` is ``-Inf``); ``factor`` is the Poisson floor of the first
    (``dispersion``)."""
    m = mean_prompt(sel, c.prompt_tokens_fallback)
    mean_service = m * prefill_cost(sel, c)
    tail_service = prefill_seconds(m * promql.Number(tail_ratio), c)
    slack = promql.ClampMin(promql.Number(ttft_s) - tail_service, SLACK_FLOOR_SHARE * ttft_s)
    tail = promql.ClampMin(promql.Ln(promql.ClampMax(work, 1.0) / promql.Number(TTFT_TAIL)), 0.0)
    return dispersion(sel, c, 2.0 * factor) / promql.Number(2.0) * mean_service / slack * tail


def burst_offset(cold_start_s: float) -> str:
    """The cold start ``C`` the burst headroom looks back over, as a PromQL duration: rounded up to whole subquery
    steps (a replica asked for at a scrape answers a cold start after it, later still after the poll), at least one."""
    step = promql.duration_s(BURST_STEP)
    return promql.duration(max(1, math.ceil(cold_start_s / step - 1e-9)) * step)


class TokenCount(NamedTuple):
    """One vLLM token counter's part of a role's work, ``rate x cost``, with what its counting noise is made of."""

    rate: Expr
    """``sum(rate(<tokens counter>[1m]))``: tokens per second."""
    cost: Expr
    """Replicas' worth of one token per second (the work is ``rate x cost``)."""
    size: Expr
    """Mean tokens per request of this counter (the recent mean prompt; the workload's mean output)."""
    cs2: float
    """Squared coefficient of variation of the tokens per request (``lognormal_cs2`` of the workload's mean and p99)."""


def counting_variance(counts: Sequence[TokenCount]) -> Expr:
    """The variance the one-minute work has from counting alone: what a constant-rate Poisson stream of the workload's
    requests gives ``sum_i rate_i x cost_i`` with every ``rate_i`` a ``rate(...[1m])``.

    Requests arrive at ``lambda`` and request ``r`` adds ``X_ri`` tokens to counter ``i``, so the work counted over a
    span ``T`` is a compound Poisson sum of ``W_r = sum_i cost_i X_ri``, and ``Var(work) = lambda E[W^2] / T`` (the
    variance of a compound Poisson sum over ``T`` is ``lambda T E[W^2]``, divided by ``T^2`` for a rate). With the
    counters' sizes independent, ``E[X_i^2] = m_i^2 (1 + cs_i^2)`` and ``E[X_i X_j] = m_i m_j``, and ``lambda m_i`` is
    the counter's rate, so ``lambda E[W^2] = sum_i cost_i^2 rate_i m_i (1 + cs_i^2) + 2 sum_{i<j} cost_i cost_j rate_i
    m_j``: every factor something vLLM exports or the workload states. ``T`` is ``RATE_SPAN_S``. Two requests' prompt
    and output tokens fall in the same rate window (a TTFT and a decode are seconds; the window 45 s), hence the cross
    term. Poisson arrivals (``ca^2 = 1``), not the observed dispersion: the clumping of arrivals is burst, which the
    headroom is for. Output tokens are counted as they are generated, spread over the request's decode rather than at
    one instant, which lowers their count's variance by about a third of the decode's share of the window (a few per
    cent for seconds-long decodes): the term is that small amount above what the output count shows."""
    terms: list[Expr] = []
    for i, k in enumerate(counts):
        terms.append(k.rate * k.size * promql.Number(1.0 + k.cs2) * k.cost * k.cost)
        terms.extend(promql.Number(2.0) * k.rate * other.size * k.cost * other.cost for other in counts[i + 1:])
    return functools.reduce(operator.add, terms) / promql.Number(RATE_SPAN_S)


def prompt_count(sel: tuple[Matcher, ...], c: SignalCoefficients, cs2: float, weight: float = 1.0) -> TokenCount:
    """The prompt tokens' part of a role's work (``prefill_load.prefill_work``, times ``weight``: the aggregated
    role's ``prefill_stall``): ``rate(vllm:prompt_tokens_total[1m])`` at the recent mean prompt's cost per token."""
    cost = prefill_cost(sel, c)
    return TokenCount(
        promql.Series(vllm_metrics.PROMPT_TOKENS, sel, RATE_WINDOW), cost if weight == 1.0 else cost * promql.Number(weight),
        mean_prompt(sel, c.prompt_tokens_fallback), cs2,
    )


def output_count(sel: tuple[Matcher, ...], cost: Expr, output_mean: float, output_cs2: float) -> TokenCount:
    """The output tokens' part of a role's work: ``rate(vllm:generation_tokens_total[1m])`` at ``cost`` per token, of
    the workload's output mix."""
    return TokenCount(
        promql.Series(vllm_metrics.GENERATION_TOKENS, sel, RATE_WINDOW), cost, promql.Number(output_mean), output_cs2,
    )


def output_shape(n: SignalSizing) -> dict[str, float]:
    """The output mix a decoding role's counting noise is read with (``output_count``): the workload's mean output and
    its ``cs^2``."""
    return {
        "output_mean": n.output_tokens_mean,
        "output_cs2": round(lognormal_cs2(n.output_tokens_mean, n.output_tokens_p99), 4),
    }


def burst_rise(work: Expr, noise: Expr, offset: str) -> Expr:
    """The upper ``eps`` quantile of the work's rise over ``offset`` less its counting noise, observed over the last
    hour: ``clamp_min(avg_over_time(d[1h:1m]) + z x sqrt(clamp_min(stddev_over_time(d[1h:1m])^2 - avg_over_time((n +
    n offset C)[1h:1m]), 0)), 0)``, ``d = work - work offset C``, ``n`` the work's counting variance (``noise``,
    ``counting_variance``), 0 when no minute of the hour has both ends.

    ``d``'s two ends are rates over disjoint spans (``C`` is at least a minute, a rate spans ``RATE_SPAN_S``), so their
    counting noise is independent and adds ``n(t) + n(t - C)`` to the variance of ``d``: at a constant rate two minutes
    differ by that much, which is not a rise of load (the queueing term covers a Poisson stream's own variation). Its
    mean over the same points (``n`` has a point where ``d`` has one) is what it adds to the hour's variance; the rest is
    the variation of the load itself. ``clamp_min``: an hour whose sampled variance falls below the expected noise
    holds no spread."""
    change = work - promql.shifted(work, offset)
    mean = promql.AvgOverTime(change, BURST_LOOKBACK, BURST_STEP)
    spread = promql.StddevOverTime(change, BURST_LOOKBACK, BURST_STEP)
    counted = promql.AvgOverTime(noise + promql.shifted(noise, offset), BURST_LOOKBACK, BURST_STEP)
    load = promql.Sqrt(promql.ClampMin(spread * spread - counted, 0.0))
    return promql.Otherwise(promql.ClampMin(mean + promql.Number(BURST_Z) * load, 0.0), 0.0)


def burst_headroom(work: Expr, noise: Expr, offset: str) -> Expr:
    """``burst_rise(work, noise, offset) x min(work / idle, 1)``: no headroom for a role with no work now."""
    busy = promql.ClampMax(work / promql.Number(IDLE_WORK), 1.0)
    return burst_rise(work, noise, offset) * busy


class SteadySamples:
    """The series a role's pods would report under steady traffic of ``rps`` requests per second of the workload's
    mix (what sizing reads the load signal on to size base and peak): token rates, finished requests, and a KV share
    per running request of ``context_share``; no queue, no past (no burst headroom: that is observed, not assumed)."""

    def __init__(self, rps: float, prompt_mean: float, output_mean: float, context_share: float) -> None:
        self.rates = {
            vllm_metrics.PROMPT_TOKENS: rps * prompt_mean,
            vllm_metrics.GENERATION_TOKENS: rps * output_mean,
            f"{vllm_metrics.REQUEST_PROMPT_TOKENS}_sum": rps * prompt_mean,
            f"{vllm_metrics.REQUEST_PROMPT_TOKENS}_count": rps,
        }
        self.gauges = {vllm_metrics.KV_CACHE: context_share, vllm_metrics.RUNNING: 1.0}

    def gauge_sum(self, metric: str, matchers: tuple[Matcher, ...]) -> float | None:
        return self.gauges.get(metric, 0.0)

    def rate_sum(self, metric: str, matchers: tuple[Matcher, ...], window: str) -> float | None:
        return self.rates.get(metric, 0.0)


BURST_SERIES = "gpuscale:burst_work"
"""The one series of the bursts' work that ``expected_burst_headroom`` reads the burst headroom's query on."""
BURST_PHASE_STEP_S = 15.0
"""Instants at which ``expected_burst_headroom`` reads the query, over one period of the bursts (a scrape interval)."""


class _BurstWork:
    """The one-minute work of a load at ``work`` replicas that ``multiplier`` raises for ``duration_s`` every
    ``period_s`` seconds (bursts from ``0``), as Prometheus would hold it at ``t``: the rate window's mean
    (``RATE_WINDOW``) of the level, so a burst shorter than the window is averaged over it. A ``RangeSamples``."""

    def __init__(self, work: float, multiplier: float, duration_s: float, period_s: float, t: float,
                 memo: dict[float, _BurstWork]) -> None:
        self.work, self.multiplier, self.duration_s, self.period_s, self.t, self._memo = (
            work, multiplier, duration_s, period_s, t, memo)
        self.subquery_memo: dict[str, promql.Result] = {}
        """Subquery points evaluated on this instant (``promql.OverTime.points``): the instants share their past."""

    def _burst_share(self) -> float:
        """Share of the rate window ``(t - w, t]`` inside a burst (bursts longer than the period overlap: always)."""
        window = promql.duration_s(RATE_WINDOW)
        if self.duration_s >= self.period_s:
            return 1.0
        start = self.t - window
        inside = 0.0
        k = math.floor(start / self.period_s)
        while k * self.period_s < self.t:
            lo, hi = k * self.period_s, k * self.period_s + self.duration_s
            inside += max(0.0, min(hi, self.t) - max(lo, start))
            k += 1
        return inside / window

    def gauge_sum(self, metric: str, matchers: tuple[Matcher, ...]) -> float | None:
        if metric != BURST_SERIES:
            raise KeyError(metric)
        return self.work * (1.0 + (self.multiplier - 1.0) * self._burst_share())

    def rate_sum(self, metric: str, matchers: tuple[Matcher, ...], window: str) -> float | None:
        raise KeyError(metric)

    def at(self, ago_s: float) -> _BurstWork:
        t = self.t - ago_s
        if t not in self._memo:
            self._memo[t] = _BurstWork(self.work, self.multiplier, self.duration_s, self.period_s, t, self._memo)
        return self._memo[t]


@functools.lru_cache(maxsize=256)  # sizing reads it for every role of every candidate tune tries
def expected_burst_headroom(work: float, multiplier: float, duration_s: float, per_hour: float, offset: str) -> float:
    """The burst headroom (replicas) the trigger holds on average under a workload whose bursts multiply the rate by
    ``multiplier`` for ``duration_s``, ``per_hour`` times an hour, at ``work`` replicas of work between them: the
    trigger's own burst term (``burst_headroom`` over ``offset``) read on the one-minute work such bursts produce
    (``_BurstWork``, bursts evenly spaced), averaged over the instants of one period. What the plan prices."""
    if work <= 0 or multiplier <= 1 or per_hour <= 0:
        return 0.0
    # the bursts' work is the rate's mean level, not a count: it has no counting noise to take out (the trigger takes out
    # the noise's expectation, so what it holds on average is this)
    query = burst_headroom(promql.Series(BURST_SERIES, ()), promql.Number(0.0), offset)
    period = 3600.0 / per_hour
    # far enough from 0 that the hour, and the offset before it, lies after the first burst
    origin = math.ceil((query.reach_s() + period) / period) * period
    memo: dict[float, _BurstWork] = {}
    instants = max(1, math.ceil(period / BURST_PHASE_STEP_S))
    values = [
        promql.evaluate(query, _BurstWork(work, multiplier, duration_s, period, origin + i * BURST_PHASE_STEP_S, memo))
        for i in range(instants)
    ]
    return math.fsum(v for v in values if v is not None) / instants


class BurstSignal(CostedSignal):
    """A derived load signal whose answer carries the burst headroom of its work: the work and the token counters it is
    made of, and the cold start the headroom looks back over."""

    burst_offset: str
    """The role's cold start as a PromQL duration (``burst_offset``): the burst headroom's look-back."""

    @abstractmethod
    def work(self, sel: tuple[Matcher, ...]) -> Expr:
        """The role's work (replicas' worth): ``sum(rate x cost)`` over ``counts``."""

    @abstractmethod
    def counts(self, sel: tuple[Matcher, ...]) -> tuple[TokenCount, ...]:
        """The token counters the work is made of (its counting noise, ``counting_variance``)."""

    def burst(self, sel: tuple[Matcher, ...]) -> Expr:
        """The burst headroom of the work, its counting noise taken out."""
        return burst_headroom(self.work(sel), counting_variance(self.counts(sel)), self.burst_offset)


class QueuedSignal(BurstSignal):
    """A derived load signal whose role queues prompts (prefill, aggregated): its work plus the queueing and burst
    headroom, over ``TARGET_REPLICAS``."""

    ttft_s: float
    queue_factor: float
    """Allen-Cunneen ``(1 + cs^2) / 2`` of the workload's prompt mix under Poisson arrivals: the floor of the observed
    ``(ca^2 + cs^2) / 2`` (``dispersion``)."""
    tail_ratio: float
    """p99 / mean of the prompt mix: the tail prompt is this times the observed mean."""

    @property
    def prompt_cs2(self) -> float:
        """``cs^2`` of the prompt mix: ``queue_factor`` is ``(1 + cs^2) / 2``."""
        return 2.0 * self.queue_factor - 1.0

    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        work = self.work(sel)
        queueing = queueing_headroom(
            sel, self.coefficients, work, ttft_s=self.ttft_s, factor=self.queue_factor, tail_ratio=self.tail_ratio,
        )
        return total(work + queueing + self.burst(sel))

    @staticmethod
    def shape(n: SignalSizing) -> dict[str, float | str]:
        """The fields sizing's numbers give every queued signal: its target, TTFT budget, prompt-mix shape and the
        cold start its burst headroom looks back over."""
        return {
            "target": TARGET_REPLICAS, "ttft_s": n.ttft_p99_s,
            "queue_factor": round(queue_factor(n.prompt_tokens_mean, n.prompt_tokens_p99), 4),
            "tail_ratio": round(max(n.prompt_tokens_p99 / n.prompt_tokens_mean, 1.0), 4),
            "burst_offset": burst_offset(n.cold_start_s),
        }
