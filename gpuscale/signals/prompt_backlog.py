"""Prompt backlog (burst mode): queued prefill seconds, an instant gauge."""

from __future__ import annotations

from typing import Literal

from gpuscale.signals import promql, vllm_metrics
from gpuscale.signals.base import (
    CostedSignal,
    SignalPurpose,
    SignalSizing,
    mean_prompt,
    prefill_cost,
    total,
)
from gpuscale.signals.promql import Expr, Matcher

BACKLOG_TTFT_SHARE = 0.5
"""Queued prefill work one replica may hold, as a share of the TTFT p99 target (the backlog trigger's target)."""


class PromptBacklog(CostedSignal):
    """``waiting requests x recent mean prompt x cost per token``, in seconds of prefill."""

    kind: Literal["prompt_backlog"] = "prompt_backlog"
    metric: Literal["vllm:num_requests_waiting"] = "vllm:num_requests_waiting"
    purpose: SignalPurpose = "burst"

    @property
    def label(self) -> str:
        return f"queued prefill s ({vllm_metrics.QUEUE} x mean prompt x cost per token)"

    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        c = self.coefficients
        return total(promql.Series(vllm_metrics.QUEUE, sel) * mean_prompt(sel, c.prompt_tokens_fallback) * prefill_cost(sel, c))

    @classmethod
    def sized(cls, n: SignalSizing) -> PromptBacklog:
        backlog_s = BACKLOG_TTFT_SHARE * n.ttft_p99_s
        return cls(
            target=round(backlog_s, 3), coefficients=n.coefficients,
            why=(
                f"burst mode: queued prefill seconds (waiting requests x recent mean prompt x cost per token), {backlog_s:g} s "
                f"per replica ({BACKLOG_TTFT_SHARE:g} x the {n.ttft_p99_s:g} s TTFT p99): an instant gauge, so a burst shorter "
                "than the 1-minute rate window still scales, and a few long prompts count as much work as many short ones"
            ),
        )
