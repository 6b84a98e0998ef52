"""What ``gpuscale workload`` measures on a trace: rates, token sizes, bursts, a daily pattern."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpuscale.sim.traffic import Arrivals
from gpuscale.tune import trace_stats


def arrivals(t: np.ndarray, prompt: np.ndarray | int = 1000, output: np.ndarray | int = 100) -> Arrivals:
    t = np.sort(t)
    return Arrivals(t, np.broadcast_to(np.asarray(prompt), t.shape).astype(np.int64),
                    np.broadcast_to(np.asarray(output), t.shape).astype(np.int64))


def test_rates_tokens_and_bursts_of_a_known_trace() -> None:
    rng = np.random.default_rng(0)
    base = np.sort(rng.uniform(0, 3600, 3600 * 2))  # 2 rps for an hour
    # four 30 s bursts at 4x (6 extra requests per second)
    extra = np.concatenate([rng.uniform(s, s + 30, 180) for s in (600, 1500, 2400, 3300)])
    prompts = rng.integers(500, 1501, base.size + extra.size)
    prof = trace_stats.profile(arrivals(np.concatenate([base, extra]), prompts, 100))
    w = trace_stats.workload_of(prof)
    assert w.base_rps == pytest.approx(2.0, rel=0.1)
    assert w.prompt_tokens.mean == pytest.approx(1000, rel=0.05) and w.prompt_tokens.p99 >= w.prompt_tokens.mean
    assert w.output_tokens.mean == 100 and w.output_tokens.p99 == 100
    assert 3 <= prof.bursts.count <= 5
    assert w.burst.multiplier == pytest.approx(4.0, rel=0.3)
    assert 15 <= w.burst.duration_s <= 45 and w.burst.per_hour == pytest.approx(prof.bursts.count, rel=0.1)
    assert not prof.daily_pattern  # an hour says nothing about days


def test_a_steady_trace_has_no_bursts_and_equal_base_and_peak() -> None:
    prof = trace_stats.profile(arrivals(np.arange(0.0, 1800.0, 0.5)))
    w = trace_stats.workload_of(prof)
    assert prof.bursts.count == 0 and w.burst.per_hour == 0
    assert w.base_rps == w.peak_rps == pytest.approx(2.0, rel=0.01)


def test_compression_multiplies_rates() -> None:
    t = np.arange(0.0, 3600.0, 1.0)
    one, five = trace_stats.profile(arrivals(t)), trace_stats.profile(arrivals(t / 5), compress=5)
    assert five.base_rps == pytest.approx(5 * one.base_rps, rel=0.02)


def daily(days: int, busy_rps: float, quiet_rps: float) -> np.ndarray:
    rng = np.random.default_rng(1)
    parts = []
    for d in range(days):
        for h in range(24):
            rate = busy_rps if 9 <= h < 17 else quiet_rps
            parts.append(d * 86400 + h * 3600 + rng.uniform(0, 3600, int(rate * 3600)))
    return np.concatenate(parts)


def test_a_daily_pattern_becomes_warm_up_windows_a_cold_start_early() -> None:
    prof = trace_stats.profile(arrivals(daily(3, 2.0, 0.2)))
    assert prof.daily_pattern and prof.hourly_rps is not None
    assert prof.hourly_rps[10] == pytest.approx(2.0, rel=0.05) and prof.hourly_rps[3] == pytest.approx(0.2, rel=0.1)
    windows = trace_stats.daily_warm_windows(prof.hourly_rps, replicas_per_rps=1.5, base_replicas=1, lead_s=420)
    assert len(windows) == 1
    (w,) = windows
    # 2 rps x 1.5 replicas per rps = 3 replicas from 08:53 (a 7-minute cold start before 09:00) to 17:00
    assert (w.start, w.end, w.replicas) == ("53 8 * * *", "0 17 * * *", math.ceil(2.0 * 1.5))


def test_days_that_differ_show_no_daily_pattern() -> None:
    rng = np.random.default_rng(2)
    t = np.concatenate([d * 86400 + rng.uniform(0, 86400, 20_000 * (1 + d % 2)) for d in range(3)])
    assert not trace_stats.profile(arrivals(t)).daily_pattern  # flat days: no hour is twice another


def test_an_empty_trace_is_refused() -> None:
    with pytest.raises(ValueError, match="no requests"):
        trace_stats.profile(Arrivals(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)))


def test_the_daily_correlation_is_the_mean_over_every_pair_of_days_computed_linearly() -> None:
    rng = np.random.default_rng(3)
    days = rng.random((12, 24)) + np.sin(np.arange(24) / 24 * 2 * np.pi)  # a shared daily shape plus noise
    pairwise = [np.corrcoef(days[i], days[j])[0, 1] for i in range(12) for j in range(i + 1, 12)]
    got = trace_stats._mean_pairwise_correlation(days)
    assert got == pytest.approx(float(np.mean(pairwise)), abs=1e-12)
    days[5] = 1.0  # a constant day has no correlation
    assert trace_stats._mean_pairwise_correlation(days) is None


def test_the_days_are_counted_over_the_trace_not_the_15_s_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    """A millisecond of replay compressed 10^9 times is 11.6 trace days; the 15-s window floor times the factor would be
    173,611 days (whose pairwise correlation never ends)."""
    seen: list[int] = []
    real = trace_stats._mean_pairwise_correlation
    monkeypatch.setattr(trace_stats, "_mean_pairwise_correlation", lambda rows: (seen.append(rows.shape[0]), real(rows))[1])
    rng = np.random.default_rng(1)
    hours = np.arange(int(11.6 * 24))
    per_hour = np.where(hours % 24 >= 9, 40, 4)  # a daily pattern in trace time
    t_trace = np.concatenate([h * 3600.0 + rng.uniform(0, 3600, n) for h, n in zip(hours, per_hour, strict=True)])
    prof = trace_stats.profile(arrivals(t_trace / 1e9), compress=1e9)
    assert seen == [11] and prof.daily_pattern
