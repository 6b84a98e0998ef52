"""Aggregated replicas needed for both targets: prefill + decode work, the prefill queueing headroom, burst headroom."""

from __future__ import annotations

from typing import Literal

from gpuscale.signals import slo_target
from gpuscale.signals.base import SignalSizing
from gpuscale.signals.decode_load import decode_token_cost
from gpuscale.signals.load import aggregated_work
from gpuscale.signals.promql import Expr, Matcher
from gpuscale.signals.slo_target import QueuedSignal


class LoadSlo(QueuedSignal):
    """Replicas an aggregated role needs (its load signal when the target is derived, backend keda); target one
    replica within the HPA's tolerance."""

    kind: Literal["load_slo"] = "load_slo"
    metric: Literal["vllm:prompt_tokens_total"] = "vllm:prompt_tokens_total"
    output_mean: float
    output_cs2: float
    """The workload's output mix (``slo_target.output_shape``): the output tokens' counting noise."""

    @property
    def label(self) -> str:
        return "replicas for TTFT and ITL (prefill + decode work + queueing + burst)"

    def work(self, sel: tuple[Matcher, ...]) -> Expr:
        # prompts queue behind the replica's whole step (decode shares it), so the offered load is the whole work
        return aggregated_work(sel, self.coefficients)

    def counts(self, sel: tuple[Matcher, ...]) -> tuple[slo_target.TokenCount, ...]:
        c = self.coefficients
        return (
            slo_target.prompt_count(sel, c, self.prompt_cs2, c.prefill_stall),
            slo_target.output_count(sel, decode_token_cost(sel, c), self.output_mean, self.output_cs2),
        )

    @classmethod
    def sized(cls, n: SignalSizing) -> LoadSlo:
        return cls(
            **cls.shape(n), **slo_target.output_shape(n), coefficients=n.coefficients,
            why=(
                f"replicas the {n.ttft_p99_s:g} s TTFT and {n.itl_p99_s * 1000:g} ms ITL p99 need: prefill and decode work "
                f"(each token weighed by its cost at its prompt or context length, the prefill also by the decode steps it holds, "
                f"x{n.coefficients.prefill_stall:.2f}), {slo_target.QUEUEING_WHY}, and "
                f"{slo_target.burst_why(slo_target.burst_offset(n.cold_start_s))}; {slo_target.TARGET_WHY}"
            ),
        )
