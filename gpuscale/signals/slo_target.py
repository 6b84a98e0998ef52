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
  minute of the last hour, and its upper ``eps`` quantile read as ``mean(d) + BURST_Z x stddev(d)``, at least 0. A
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
DISPERSION_MAX = 1000.0
"""Largest ``ca^2 + cs^2`` the queueing bound takes: only keeps the factor finite (``0 x Inf`` is NaN in PromQL, and a
role with no traffic must read 0). Not a tuning knob: the Azure code trace's prompt tokens read 50-170 at x1 (its
requests arrive in clumps), the conversation trace's about 2 (Poisson with its mix); ``docs/simulator.md``."""


def burst_why(offset: str) -> str:
    """How the signals' rationale states the burst headroom, from the constants it is computed with."""
    return (
        f"the rise of work within a cold start ({offset}) seen over the last {BURST_LOOKBACK}: the upper "
        f"{TTFT_TAIL:.0%} of work(t) - work(t - {offset}) at {BURST_STEP} steps (mean + {BURST_Z:.3g} x standard "
        "deviation)"
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


def burst_rise(work: Expr, offset: str) -> Expr:
    """The upper ``eps`` quantile of the work's rise over ``offset``, observed over the last hour:
    ``clamp_min(avg_over_time(d[1h:1m]) + z x stddev_over_time(d[1h:1m]), 0)``, ``d = work - work offset C``, 0 when no
    minute of the hour has both ends."""
    change = work - promql.shifted(work, offset)
    mean = promql.AvgOverTime(change, BURST_LOOKBACK, BURST_STEP)
    spread = promql.StddevOverTime(change, BURST_LOOKBACK, BURST_STEP)
    return promql.Otherwise(promql.ClampMin(mean + promql.Number(BURST_Z) * spread, 0.0), 0.0)


def burst_headroom(work: Expr, offset: str) -> Expr:
    """``burst_rise(work, offset) x min(work / idle, 1)``: no headroom for a role with no work now."""
    busy = promql.ClampMax(work / promql.Number(IDLE_WORK), 1.0)
    return burst_rise(work, offset) * busy


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
    query = burst_headroom(promql.Series(BURST_SERIES, ()), offset)
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


class QueuedSignal(CostedSignal):
    """A derived load signal whose role queues prompts (prefill, aggregated): its work plus the queueing and burst
    headroom, over ``TARGET_REPLICAS``."""

    ttft_s: float
    queue_factor: float
    """Allen-Cunneen ``(1 + cs^2) / 2`` of the workload's prompt mix under Poisson arrivals: the floor of the observed
    ``(ca^2 + cs^2) / 2`` (``dispersion``)."""
    tail_ratio: float
    """p99 / mean of the prompt mix: the tail prompt is this times the observed mean."""
    burst_offset: str
    """The role's cold start as a PromQL duration (``burst_offset``): the burst headroom's look-back."""

    def needed(self, sel: tuple[Matcher, ...], work: Expr) -> Expr:
        queueing = queueing_headroom(
            sel, self.coefficients, work, ttft_s=self.ttft_s, factor=self.queue_factor, tail_ratio=self.tail_ratio,
        )
        return total(work + queueing + burst_headroom(work, self.burst_offset))

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
