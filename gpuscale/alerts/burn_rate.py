"""SLO burn rates of a latency target, the SRE-workbook way (multiwindow, multi-burn-rate).

The SLI is the share of observations at or under the latency target: vLLM's histogram bucket at the target over its
count. The error budget is ``1 - slo.goodput_target``; a window burns at rate ``r`` when its bad share is ``r`` times
the budget. Windows and rates are the workbook's recommendation (The Site Reliability Workbook, chapter 5 "Alerting on
SLOs", table 5-8, for a 30-day SLO window): page on 2% of the budget in 1 h (14.4) or 5% in 6 h (6), ticket on 10% in
3 days (1), each gated by a short window of 1/12 the long one so the alert stops soon after the burn does.
"""

from __future__ import annotations

from gpuscale.signals import vllm_metrics
from gpuscale.signals.promql import Matcher
from gpuscale.spec.base import Spec


class BurnWindow(Spec):
    long_s: int
    short_s: int
    rate: float
    """Burn rate (multiple of the budget's steady spend) both windows must exceed."""


PAGE: tuple[BurnWindow, ...] = (
    BurnWindow(long_s=3600, short_s=300, rate=14.4),
    BurnWindow(long_s=6 * 3600, short_s=1800, rate=6.0),
)
TICKET: tuple[BurnWindow, ...] = (BurnWindow(long_s=3 * 86400, short_s=6 * 3600, rate=1.0),)


def good_bound(histogram: str, target_s: float) -> tuple[float, bool]:
    """The bucket bound observations count as good up to: the largest at or under the target (a request between it
    and the target counts as bad: the alert errs toward firing), and whether it is exact. A target under the smallest
    bucket can only use the smallest (then observations up to it count as good: stated in the alert)."""
    buckets = vllm_metrics.BUCKETS_S[histogram]
    under = [b for b in buckets if b <= target_s]
    return (max(under), max(under) == target_s) if under else (min(buckets), False)


def le_value(bound: float) -> str:
    """The ``le`` label as the Python client writes it (``floatToGoString``: ``1.0``, ``2.5``, ``2560.0``), which is
    also Prometheus 3's normalised form."""
    return repr(float(bound))


def _selector(matchers: tuple[Matcher, ...]) -> str:
    return ",".join(f'{k}{op}"{v}"' for k, op, v in matchers)


def bad_share(histogram: str, sel: tuple[Matcher, ...], bound: float, window_s: int) -> str:
    """Share of the window's observations above ``bound`` (NaN, so never firing, while nothing is observed)."""
    s = _selector(sel)
    count = f"sum(rate({histogram}_count{{{s}}}[{window_s}s]))"
    good = f'sum(rate({histogram}_bucket{{{s},le="{le_value(bound)}"}}[{window_s}s]))'
    return f"(({count} - {good}) / {count})"


def burn_expr(histogram: str, sel: tuple[Matcher, ...], bound: float, budget: float, windows: tuple[BurnWindow, ...]) -> str:
    """Fires while any window pair burns faster than its rate."""
    pairs = [
        f"({bad_share(histogram, sel, bound, w.long_s)} > {w.rate * budget:.6g}"
        f" and {bad_share(histogram, sel, bound, w.short_s)} > {w.rate * budget:.6g})"
        for w in windows
    ]
    return " or ".join(pairs)
