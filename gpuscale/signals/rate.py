"""A single vLLM counter's rate summed over the role's pods: prompt or output tokens per second.

Per-pod rates, then summed (a pod restart resets only its own counter); one metric per pod, so prometheus-adapter can
serve it to a plain HPA as ``<name>_per_second``. Its target assumes the workload's token mix.
"""

from __future__ import annotations

from typing import Literal

from gpuscale.signals import promql, vllm_metrics
from gpuscale.signals.base import RATE_WINDOW, SignalSizing, SingleMetric, total
from gpuscale.signals.promql import Expr, Matcher


class VllmRate(SingleMetric):
    kind: Literal["rate"] = "rate"
    @property
    def label(self) -> str:
        return f"rate({self.metric}[{RATE_WINDOW}])"

    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        return total(promql.Series(self.metric, sel, RATE_WINDOW))

    @classmethod
    def sized(cls, n: SignalSizing, metric: str) -> VllmRate:
        if metric == vllm_metrics.PROMPT_TOKENS:
            prefill_tps = n.prefill_tokens_per_s
            aggregated = n.role == "aggregated"
            return cls(
                metric=metric,
                target=round(n.prompt_tokens_mean / n.replicas_per_rps) if aggregated else round(n.utilisation * prefill_tps),
                why=(
                    f"prompt tokens/s per replica at {n.percent} of the {prefill_tps:,.0f} tok/s prefill rate"
                    + (f", less the decoding of {n.output_tokens_mean:g}-token outputs and the decode steps each prefill "
                       f"chunk holds (x{n.coefficients.prefill_stall:.2f})" if aggregated else "")
                    + "; it grows with load and holds capacity while nothing queues, but assumes the workload's token mix"
                ),
            )
        if metric == vllm_metrics.GENERATION_TOKENS:
            return cls(
                metric=metric, target=max(round(n.decode_tokens_per_s * n.utilisation), 1),
                why=(
                    f"output tokens/s per replica at {n.percent} of the {n.decode_tokens_per_s:,.0f} tok/s of the "
                    f"{n.decode_batch}-sequence ITL batch; it grows with load (KV use alone grows faster than load near the ITL "
                    "limit and oscillates), but assumes the workload's context length"
                ),
            )
        raise ValueError(f"{metric}: not a vLLM counter an autoscaler may rate(); use one of {', '.join(sorted(vllm_metrics.COUNTERS))}")
