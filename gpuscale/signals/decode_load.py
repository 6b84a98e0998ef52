"""Decode load: replicas' worth of decode work, output tokens/s x each token's step time at its sequence's KV share."""

from __future__ import annotations

from typing import Literal

from gpuscale.signals import promql, vllm_metrics
from gpuscale.signals.base import RATE_WINDOW, CostedSignal, SignalCoefficients, SignalSizing, total
from gpuscale.signals.promql import Expr, Matcher


def decode_token_cost(sel: tuple[Matcher, ...], c: SignalCoefficients) -> Expr:
    """Replicas' worth of one output token per second: ``s/token + s per KV share x KV use / running requests``
    (``clamp_min``: no running request is not a NaN)."""
    kv, running = promql.Series(vllm_metrics.KV_CACHE, sel), promql.ClampMin(promql.Series(vllm_metrics.RUNNING, sel), 1.0)
    return promql.Number(c.decode_s_per_token) + promql.Number(c.decode_s_per_kv_share) * kv / running


def decode_work(sel: tuple[Matcher, ...], c: SignalCoefficients) -> Expr:
    """``sum(rate(output tokens[1m])) x decode_token_cost``: the KV read of each token grows with its context, so long
    contexts weigh more."""
    return promql.Series(vllm_metrics.GENERATION_TOKENS, sel, RATE_WINDOW) * decode_token_cost(sel, c)


class DecodeLoad(CostedSignal):
    """Decode step-seconds per second (the ``decode`` role's load signal, backend keda)."""

    kind: Literal["decode_load"] = "decode_load"
    metric: Literal["vllm:generation_tokens_total"] = "vllm:generation_tokens_total"

    @property
    def label(self) -> str:
        return f"decode s/s (rate({vllm_metrics.GENERATION_TOKENS}[{RATE_WINDOW}]) x cost per token at its KV share)"

    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        return total(decode_work(sel, self.coefficients))

    @classmethod
    def sized(cls, n: SignalSizing) -> DecodeLoad:
        return cls(
            target=n.utilisation, coefficients=n.coefficients,
            why=(
                f"replicas' worth of decode work: output tokens/s x each token's step time at the KV share of its sequence "
                f"(KV use / running requests), so a token of a long context weighs more; 1.0 is a replica at the "
                f"{n.decode_batch}-sequence batch that meets the ITL p99 target, targeted at {n.percent}. An output-token "
                "rate target assumes the workload's context length and is out of reach at long contexts"
            ),
        )
