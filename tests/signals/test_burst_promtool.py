"""The burst headroom's query under Prometheus' own evaluator (``promtool test rules``) against ours: the rendered
``offset`` inside the hour's subquery, and the counting noise taken out of the hour's variance (``sqrt``,
``avg_over_time`` of the noise at both ends), must mean what ``promql`` computes on the same data.

The data are one-minute levels: every counter's slope is constant within each minute ``(60 (m - 1), 60 m]`` and every
gauge within ``[60 m, 60 (m + 1))``, scraped every 15 s. Prometheus' subquery points fall on whole minutes, where
``rate(...[1m])`` is exactly minute ``m``'s slope and a gauge minute ``m``'s level whichever side of the window
Prometheus closes (2.x keeps the sample at the window's start, 3.x does not; both extrapolate a constant slope
exactly), and the instant is half a minute past a whole one, so the hour holds the same sixty points in both. Our
evaluator reads the same levels through ``MinuteLevels``.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpuscale.signals import promql, slo_target, vllm_metrics
from gpuscale.signals.load import aggregated_work
from gpuscale.signals.load_slo import LoadSlo
from gpuscale.signals.promql import Matcher
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from tests.alerts.promtool import expr_matches, promtool_expr_test, requires_promtool

SEL: tuple[Matcher, ...] = (("namespace", "=", "dev"), ("gpuscale_io_role", "=", "aggregated"))
LABELS = '{namespace="dev",gpuscale_io_role="aggregated"}'
MINUTES = 81
"""Minutes of data; the last is held to the end of the series (half a minute past it)."""
START = 1.0e6
"""Where every counter starts: far from 0, so Prometheus never extrapolates a rate towards zero."""
MEAN_PROMPT = 1200.0


def level(k: int, low: float, high: float, salt: int) -> float:
    """A fixed pseudo-random level of minute ``k`` in ``[low, high]`` (whole numbers: exact counters)."""
    return float(round(low + (high - low) * (((k + 1) * 7919 + salt * 104729) % 997) / 996.0))


PROMPT = [level(k, 4000, 16000, 1) for k in range(MINUTES)]
GENERATED = [level(k, 200, 900, 2) for k in range(MINUTES)]
KV = [level(k, 10, 60, 3) / 100.0 for k in range(MINUTES)]
RUNNING = [level(k, 4, 20, 4) for k in range(MINUTES)]
REQUESTS = 5.0
"""Requests finished per second, constant: the recent mean prompt is ``MEAN_PROMPT`` at every instant."""


def minute_of_slope(s: float) -> int:
    """The minute whose slope a counter has just before ``s`` (the last minute's slope holds past its end)."""
    return min(max(math.ceil(s / 60.0), 1), MINUTES - 1)


def counter(slopes: list[float] | float, interval_s: float, n: int) -> list[float]:
    values, c = [START], START
    for i in range(1, n):
        m = minute_of_slope(i * interval_s)
        c += (slopes[m] if isinstance(slopes, list) else slopes) * interval_s
        values.append(c)
    return values


def gauge(levels: list[float], interval_s: float, n: int) -> list[float]:
    return [levels[min(int(i * interval_s // 60), MINUTES - 1)] for i in range(n)]


def series(n: int) -> dict[str, list[float]]:
    """What promtool is given: every metric the aggregated work reads, scraped every 15 s."""
    return {
        f"{vllm_metrics.PROMPT_TOKENS}{LABELS}": counter(PROMPT, 15.0, n),
        f"{vllm_metrics.GENERATION_TOKENS}{LABELS}": counter(GENERATED, 15.0, n),
        f"{vllm_metrics.REQUEST_PROMPT_TOKENS}_sum{LABELS}": counter(REQUESTS * MEAN_PROMPT, 15.0, n),
        f"{vllm_metrics.REQUEST_PROMPT_TOKENS}_count{LABELS}": counter(REQUESTS, 15.0, n),
        f"{vllm_metrics.KV_CACHE}{LABELS}": gauge(KV, 15.0, n),
        f"{vllm_metrics.RUNNING}{LABELS}": gauge(RUNNING, 15.0, n),
    }


class MinuteLevels:
    """The same data as our evaluator's samples at ``t`` seconds: minute ``floor(t / 60)``'s levels (a rate needs two
    scrapes, so minute 0 has none)."""

    def __init__(self, t: float) -> None:
        self.t = t
        self.minute = min(int(t // 60), MINUTES - 1)

    def gauge_sum(self, metric: str, matchers: tuple[Matcher, ...]) -> float | None:
        return {vllm_metrics.KV_CACHE: KV, vllm_metrics.RUNNING: RUNNING}[metric][self.minute]

    def rate_sum(self, metric: str, matchers: tuple[Matcher, ...], window: str) -> float | None:
        if self.minute < 1:
            return None
        if metric == vllm_metrics.PROMPT_TOKENS:
            return PROMPT[self.minute]
        if metric == vllm_metrics.GENERATION_TOKENS:
            return GENERATED[self.minute]
        return {f"{vllm_metrics.REQUEST_PROMPT_TOKENS}_sum": REQUESTS * MEAN_PROMPT,
                f"{vllm_metrics.REQUEST_PROMPT_TOKENS}_count": REQUESTS}[metric]

    def at(self, ago_s: float) -> MinuteLevels | None:
        return MinuteLevels(self.t - ago_s) if self.t - ago_s >= 0 else None


@pytest.fixture(scope="module")
def dev_signal(stack_specs: dict[str, PlatformSpec]) -> LoadSlo:
    sig = size_platform(stack_specs["dev"]).models[0].role("aggregated").signals[0]
    assert isinstance(sig, LoadSlo)
    return sig


@requires_promtool
def test_the_burst_headroom_query_answers_in_prometheus_what_our_evaluator_computes(
    tmp_path: Path, dev_signal: LoadSlo,
) -> None:
    # what Prometheus is sent: the query as rendered (its numbers at six significant digits), which the KEDA model
    # also reads back; the counting noise it takes out reads every rate and gauge the work does, at both ends
    query = promql.parse(dev_signal.burst(SEL).render())
    uncorrected = slo_target.burst_headroom(aggregated_work(SEL, dev_signal.coefficients), promql.Number(0.0),
                                            dev_signal.burst_offset)
    c_min = int(promql.duration_s(dev_signal.burst_offset) // 60)
    checks: list[tuple[str, str]] = []
    ours: dict[float, float] = {}
    # a full hour of points; an hour of which only some minutes have a cold start of past before them; none have
    for minutes in (MINUTES - 1 + 0.5, c_min + 3.5, c_min - 0.5):
        t = minutes * 60.0
        value = promql.evaluate(query, MinuteLevels(t))
        assert value is not None  # the term is never empty while the role reports
        ours[minutes] = value
        checks.append((f"{t:g}s", expr_matches(query.render(), value)))
    assert ours[MINUTES - 0.5] > 0.2 and ours[c_min + 3.5] > 0.0 and ours[c_min - 0.5] == 0.0
    # the noise term is large enough here that Prometheus evaluating it wrongly (or not at all) misses the tolerance
    full = promql.evaluate(uncorrected, MinuteLevels((MINUTES - 0.5) * 60.0))
    assert full is not None and full - ours[MINUTES - 0.5] > 1e-3
    n = int((MINUTES - 0.5) * 60 / 15) + 1
    result = promtool_expr_test(tmp_path, series(n), checks)
    assert result.returncode == 0, f"ours: {ours}\n{result.stdout}\n{result.stderr}"
