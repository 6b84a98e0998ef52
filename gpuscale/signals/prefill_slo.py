"""Prefill replicas needed for the TTFT p99 target: prefill work + Erlang-C queueing headroom + burst headroom."""

from __future__ import annotations

from typing import Literal

from gpuscale.signals import slo_target, vllm_metrics
from gpuscale.signals.base import RATE_WINDOW, SignalSizing
from gpuscale.signals.prefill_load import prefill_work
from gpuscale.signals.promql import Expr, Matcher
from gpuscale.signals.slo_target import QueuedSignal


class PrefillSlo(QueuedSignal):
    """Replicas the prefill role needs (the ``prefill`` role's load signal when its target is derived, backend keda);
    the target is one replica within the HPA's tolerance."""

    kind: Literal["prefill_slo"] = "prefill_slo"
    metric: Literal["vllm:prompt_tokens_total"] = "vllm:prompt_tokens_total"

    @property
    def label(self) -> str:
        return f"prefill replicas for TTFT (rate({vllm_metrics.PROMPT_TOKENS}[{RATE_WINDOW}]) x cost + queueing + burst)"

    def work(self, sel: tuple[Matcher, ...]) -> Expr:
        return prefill_work(sel, self.coefficients)

    def counts(self, sel: tuple[Matcher, ...]) -> tuple[slo_target.TokenCount, ...]:
        return (slo_target.prompt_count(sel, self.coefficients, self.prompt_cs2),)

    @classmethod
    def sized(cls, n: SignalSizing) -> PrefillSlo:
        return cls(
            **cls.shape(n), coefficients=n.coefficients,
            why=(
                f"prefill replicas the {n.ttft_p99_s:g} s TTFT p99 needs for the prompts arriving: their work (prompt "
                f"tokens/s x the cost of a token at the recent mean prompt), plus {slo_target.QUEUEING_WHY}, plus "
                f"{slo_target.burst_why(slo_target.burst_offset(n.cold_start_s))}; {slo_target.TARGET_WHY}"
            ),
        )
