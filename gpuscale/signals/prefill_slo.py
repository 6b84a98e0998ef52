"""Prefill replicas needed for the TTFT p99 target: prefill work + Erlang-C queueing headroom + burst headroom."""

from __future__ import annotations

from typing import Literal

from gpuscale.signals import slo_target, vllm_metrics
from gpuscale.signals.base import RATE_WINDOW, CostedSignal, SignalSizing, total
from gpuscale.signals.prefill_load import prefill_work
from gpuscale.signals.promql import Expr, Matcher


class PrefillSlo(CostedSignal):
    """Replicas the prefill role needs (the ``prefill`` role's load signal when its target is derived, backend keda);
    the target is one replica within the HPA's tolerance."""

    kind: Literal["prefill_slo"] = "prefill_slo"
    metric: Literal["vllm:prompt_tokens_total"] = "vllm:prompt_tokens_total"
    ttft_s: float
    queue_factor: float
    """Allen-Cunneen ``(1 + cs^2) / 2`` of the prompt mix."""
    tail_ratio: float
    """p99 / mean of the prompt mix: the tail prompt is this times the observed mean."""

    @property
    def label(self) -> str:
        return f"prefill replicas for TTFT (rate({vllm_metrics.PROMPT_TOKENS}[{RATE_WINDOW}]) x cost + queueing + burst)"

    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        work = prefill_work(sel, self.coefficients)
        queueing = slo_target.queueing_headroom(
            sel, self.coefficients, work, ttft_s=self.ttft_s, factor=self.queue_factor, tail_ratio=self.tail_ratio,
        )
        return total(work + queueing + slo_target.burst_headroom(work))

    @classmethod
    def sized(cls, n: SignalSizing) -> PrefillSlo:
        return cls(
            target=slo_target.TARGET_REPLICAS, coefficients=n.coefficients, ttft_s=n.ttft_p99_s,
            queue_factor=round(slo_target.queue_factor(n.prompt_tokens_mean, n.prompt_tokens_p99), 4),
            tail_ratio=round(max(n.prompt_tokens_p99 / n.prompt_tokens_mean, 1.0), 4),
            why=(
                f"prefill replicas the {n.ttft_p99_s:g} s TTFT p99 needs for the prompts arriving: their work (prompt "
                "tokens/s x the cost of a token at the recent mean prompt), plus the Erlang-C headroom that keeps 99 % of "
                "prompts from waiting past the budget the p99 prompt's own prefill leaves, plus the rise of work seen "
                "within a cold start over the last hour (2.33 x sqrt(2) x its standard deviation); target one replica within the HPA's 10 % tolerance"
            ),
        )
