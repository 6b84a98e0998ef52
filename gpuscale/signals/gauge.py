"""A single vLLM gauge summed over the role's pods: queue depth, KV-cache use or running requests.

One metric per pod, so prometheus-adapter can serve it to a plain HPA (backend ``hpa``); with KEDA it is the decode
and aggregated roles' KV saturation signal, or what a stack file's ``autoscaling.<role>.metric`` names.
"""

from __future__ import annotations

import math
from typing import Literal

from gpuscale.signals import promql, vllm_metrics
from gpuscale.signals.base import SignalSizing, SingleMetric, total
from gpuscale.signals.prompt_backlog import BACKLOG_TTFT_SHARE
from gpuscale.signals.promql import Expr, Matcher


class VllmGauge(SingleMetric):
    kind: Literal["gauge"] = "gauge"
    @property
    def label(self) -> str:
        return self.metric

    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        return total(promql.Series(self.metric, sel))

    @classmethod
    def sized(cls, n: SignalSizing, metric: str) -> VllmGauge:
        if metric == vllm_metrics.QUEUE:
            backlog_s = BACKLOG_TTFT_SHARE * n.ttft_p99_s
            prompt = n.prompt_tokens_mean
            return cls(
                metric=metric, target=max(1.0, math.floor(backlog_s * n.prefill_tokens_per_s / prompt)), purpose="burst",
                why=(
                    f"burst mode: the {prompt:g}-token prompts one replica clears in {backlog_s:g} s ({BACKLOG_TTFT_SHARE:g} x "
                    "the TTFT p99); it reads 0 whenever capacity suffices, so it only ever adds replicas"
                ),
            )
        if metric == vllm_metrics.KV_CACHE:
            b = n.decode_batch
            return cls(
                metric=metric, target=n.kv_target, purpose="saturation",
                why=(
                    f"KV use of the {b}-sequence batch that meets the ITL p99 target ({b} x {n.mean_decode_context:,.0f} "
                    f"tokens / {n.kv_capacity_tokens:,} tokens, at most {n.kv_ceiling:g}): above it the batch "
                    "outgrows the ITL target or preempts, whatever the load signal says"
                ),
            )
        if metric == vllm_metrics.RUNNING:
            b = n.decode_batch
            return cls(
                metric=metric, target=float(max(b, 1)),
                why=f"running sequences per replica: the {b}-sequence batch that meets the ITL p99 target",
            )
        raise ValueError(f"{metric}: not a vLLM gauge an autoscaler may target; use one of {', '.join(sorted(vllm_metrics.GAUGES))}")
