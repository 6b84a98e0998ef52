"""The SLO guards' common shape: a vLLM latency histogram's mean over the last minute (``metricType: Value``)."""

from __future__ import annotations

from typing import ClassVar

from gpuscale.signals import promql
from gpuscale.signals.base import RATE_WINDOW, MetricType, Signal, SignalPurpose, total
from gpuscale.signals.promql import Expr, Matcher


class LatencyGuard(Signal):
    """``rate(<h>_sum[1m]) / (rate(<h>_count[1m]) > 0)``, 0 when nothing was observed in the minute: a guard reads no
    latency rather than NaN, which KEDA would turn into an error that holds the replica count (issue 22.3)."""

    purpose: SignalPurpose = "guard"
    metric_type: ClassVar[MetricType] = "Value"

    @property
    def label(self) -> str:
        return f"mean {self.metric} [{RATE_WINDOW}]"

    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        observed = promql.Above(promql.Series(f"{self.metric}_count", sel, RATE_WINDOW), 0.0)
        return total(promql.Series(f"{self.metric}_sum", sel, RATE_WINDOW) / observed)
