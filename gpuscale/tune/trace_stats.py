"""What a request trace says about its workload: rates, token sizes, bursts, and a daily pattern if it has one.

``profile(arrivals)`` measures; ``workload_of(profile)`` turns the measurements into the stack file's ``workload:``
section (``gpuscale workload`` prints it, ``gpuscale tune`` sizes its defaults from it); ``daily_warm_windows`` turns
a daily pattern into predictive warm-up windows (KEDA cron triggers).

Definitions (every number below is measured on the arrivals as replayed, i.e. after ``--compress``):

* base / peak: the 10th percentile and the maximum of the request rate over 5-minute windows; peak hours: the share
  of 5-minute windows above the midpoint of the two, times 24.
* bursts: 15-second windows (one scrape) whose token load (prompt + output tokens) is at least ``BURST_MIN_RATIO``
  times that of the 5 minutes before them (what a load signal on a 1-minute rate has settled on), with a request count
  above Poisson noise at three standard deviations; consecutive windows are one burst. Multiplier: mean load ratio
  inside bursts; duration: mean length; per hour.
* daily pattern: at least two days of trace time, an hourly profile whose day-to-day correlation (the mean over every
  pair of days) is at least ``DAILY_CORRELATION`` and whose busiest hour is at least twice its quietest.

Every statistic takes time linear in the trace and in its span (the trace reader bounds both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpuscale.sim.traffic import Arrivals, TraceError
from gpuscale.spec.model import WakeSchedule
from gpuscale.spec.workload import BurstSpec, TokenDistribution, WorkloadSpec

RATE_WINDOW_S = 300.0
"""Windows of the base and peak rates."""
BURST_WINDOW_S = 15.0
"""A burst is measured on one scrape interval."""
BURST_MIN_RATIO = 1.5
"""A window is part of a burst when its rate is at least this many times the rate of the 5 minutes before it."""
BURST_SIGMAS = 3.0
"""... and its count exceeds the expected count by this many Poisson standard deviations."""
DAY_S = 86_400.0
DAILY_CORRELATION = 0.7
"""Least correlation between the hourly profiles of two days for the trace to show a daily pattern."""
DAILY_MIN_SWING = 2.0
"""Least ratio of the busiest to the quietest hour of the daily profile."""


@dataclass(frozen=True)
class Bursts:
    count: int
    multiplier: float
    duration_s: float
    per_hour: float


@dataclass(frozen=True)
class TraceProfile:
    """Measurements of one replayed trace."""

    requests: int
    span_s: float
    """Simulated seconds from the first to the last arrival (after compression)."""
    compress: float
    base_rps: float
    peak_rps: float
    peak_hours_per_day: float
    prompt_mean: float
    prompt_p99: float
    output_mean: float
    output_p99: float
    bursts: Bursts
    hourly_rps: tuple[float, ...] | None
    """Mean rate per hour of the (trace-time) day when the trace shows a daily pattern, else None."""

    @property
    def daily_pattern(self) -> bool:
        return self.hourly_rps is not None


def _window_rates(t: np.ndarray, span: float, width: float) -> np.ndarray:
    n = max(1, math.ceil(span / width))
    counts = np.bincount(np.minimum((t // width).astype(np.int64), n - 1), minlength=n)
    # a last window cut short by the end of the trace would read low: drop it when the trace has others
    if n > 1 and span - (n - 1) * width < width / 2:
        counts = counts[:-1]
    out: np.ndarray = counts / width
    return out


def _bursts(t: np.ndarray, tokens: np.ndarray, span: float) -> Bursts:
    """Bursts of token load (prompt + output tokens: a few long prompts load a replica like many short ones), each
    window also above Poisson noise in requests."""
    idx_t = (t // BURST_WINDOW_S).astype(np.int64)
    counts = np.bincount(idx_t).astype(float)
    load = np.bincount(idx_t, weights=tokens).astype(float)
    lookback = int(RATE_WINDOW_S / BURST_WINDOW_S)
    first = int(60.0 / BURST_WINDOW_S)  # at the start, the rate of whatever minute or more came before
    if counts.size <= first:
        return Bursts(0, 1.0, 0.0, 0.0)
    idx = np.arange(first, counts.size)
    back = np.minimum(idx, lookback)

    def trailing(x: np.ndarray) -> np.ndarray:
        c = np.concatenate([[0.0], np.cumsum(x)])
        out: np.ndarray = (c[idx] - c[idx - back]) / back
        return out

    expected_n, expected_load = trailing(counts), trailing(load)
    observed_n, observed_load = counts[idx], load[idx]
    noise = observed_n > expected_n + BURST_SIGMAS * np.sqrt(np.maximum(expected_n, 1.0))
    hot = noise & (observed_load >= BURST_MIN_RATIO * expected_load) & (expected_load > 0)
    if not hot.any():
        return Bursts(0, 1.0, 0.0, 0.0)
    starts = np.flatnonzero(hot & ~np.concatenate([[False], hot[:-1]]))
    ends = np.flatnonzero(hot & ~np.concatenate([hot[1:], [False]]))
    lengths = (ends - starts + 1) * BURST_WINDOW_S
    ratio = observed_load[hot] / expected_load[hot]
    hours = max(span, BURST_WINDOW_S) / 3600.0
    return Bursts(
        count=int(starts.size), multiplier=float(np.mean(ratio)), duration_s=float(np.mean(lengths)),
        per_hour=float(starts.size / hours),
    )


def _hourly(t_trace: np.ndarray, span_trace: float, compress: float) -> tuple[float, ...] | None:
    """Mean rate (after compression) per hour of the trace-time day, if the days look alike."""
    days = int(span_trace // DAY_S)
    if days < 2:
        return None
    keep = t_trace < days * DAY_S
    hour = (t_trace[keep] // 3600.0).astype(np.int64)
    per_hour = np.bincount(hour, minlength=days * 24).reshape(days, 24) / (3600.0 / compress)
    profile = per_hour.mean(axis=0)
    if profile.max() <= 0 or profile.max() < DAILY_MIN_SWING * max(profile.min(), 1e-12):
        return None
    corr = _mean_pairwise_correlation(per_hour)
    if corr is None or corr < DAILY_CORRELATION:
        return None
    return tuple(float(x) for x in profile)


def _mean_pairwise_correlation(rows: np.ndarray) -> float | None:
    """Mean Pearson correlation over every pair of rows, in time linear in the rows: with each row centred and scaled
    to unit length (z_i), corr(i, j) = z_i . z_j, and the sum over pairs i < j is (|sum z_i|^2 - sum |z_i|^2) / 2.
    None when a row is constant (its correlation is undefined)."""
    centred = rows - rows.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(centred, axis=1)
    if rows.shape[0] < 2 or np.any(norms <= 0):
        return None
    z = centred / norms[:, None]
    total = z.sum(axis=0)
    pairs = rows.shape[0] * (rows.shape[0] - 1) / 2
    return float((total @ total - rows.shape[0]) / 2 / pairs)


def profile(arrivals: Arrivals, compress: float = 1.0) -> TraceProfile:
    """Measure a replayed trace (``arrivals`` as the simulator generates them, compressed ``compress`` times)."""
    t = arrivals.arrival_s
    if len(arrivals) == 0:
        raise TraceError("the trace has no requests")
    span = max(float(t[-1]), BURST_WINDOW_S)
    rates = _window_rates(t, span, min(RATE_WINDOW_S, span))
    base, peak = float(np.percentile(rates, 10)), float(rates.max())
    mid = (base + peak) / 2.0
    share = float(np.mean(rates > mid)) if peak > base else 1.0
    p, o = arrivals.prompt_tokens.astype(float), arrivals.output_tokens.astype(float)
    return TraceProfile(
        requests=len(arrivals), span_s=span, compress=compress, base_rps=base, peak_rps=peak,
        peak_hours_per_day=share * 24.0,
        prompt_mean=float(p.mean()), prompt_p99=float(np.percentile(p, 99)),
        output_mean=float(o.mean()), output_p99=float(np.percentile(o, 99)),
        # the daily pattern is read over the trace's own span (not the 15-s floor above, which a large compress would
        # turn into thousands of fake days)
        bursts=_bursts(t, p + o, span), hourly_rps=_hourly(t * compress, float(t[-1]) * compress, compress),
    )


def _sig(x: float, digits: int = 3) -> float:
    """Round to ``digits`` significant figures (a stack file reads better without float noise)."""
    if x == 0 or not math.isfinite(x):
        return 0.0
    return round(x, max(digits - 1 - math.floor(math.log10(abs(x))), 0))


def workload_of(prof: TraceProfile) -> WorkloadSpec:
    """The ``workload:`` section a stack file would state for this trace (no ``trace:`` key)."""
    b = prof.bursts
    burst = (
        BurstSpec(multiplier=_sig(max(b.multiplier, 1.0), 2), duration_s=_sig(b.duration_s, 2), per_hour=_sig(b.per_hour, 2))
        if b.count else BurstSpec(per_hour=0.0)
    )
    prompt_mean, output_mean = _sig(prof.prompt_mean), _sig(prof.output_mean)
    peak = max(_sig(prof.peak_rps), 1e-3)
    return WorkloadSpec(
        base_rps=min(_sig(prof.base_rps), peak), peak_rps=peak,
        peak_hours_per_day=round(prof.peak_hours_per_day * 2) / 2,
        prompt_tokens=TokenDistribution(mean=prompt_mean, p99=max(_sig(prof.prompt_p99), prompt_mean)),
        output_tokens=TokenDistribution(mean=output_mean, p99=max(_sig(prof.output_p99), output_mean)),
        burst=burst,
    )


def daily_warm_windows(
    hourly_rps: tuple[float, ...], replicas_per_rps: float, base_replicas: int, lead_s: float, timezone: str = "UTC",
) -> list[WakeSchedule]:
    """Warm-up windows from a daily profile: each run of hours that needs more replicas than ``base_replicas`` holds
    that many from ``lead_s`` (a cold start) before it starts until it ends. Cron fields are in trace time (hour 0 is
    the trace's midnight)."""
    need = [max(math.ceil(r * replicas_per_rps - 1e-9), 0) for r in hourly_rps]
    out: list[WakeSchedule] = []
    h = 0
    while h < 24:
        n = need[h]
        if n <= base_replicas:
            h += 1
            continue
        end = h
        while end + 1 < 24 and need[end + 1] == n:
            end += 1
        start_min = int((h * 3600 - lead_s) // 60) % (24 * 60)
        out.append(WakeSchedule(
            timezone=timezone, start=f"{start_min % 60} {start_min // 60} * * *", end=f"0 {(end + 1) % 24} * * *",
            replicas=n,
        ))
        h = end + 1
    return out
