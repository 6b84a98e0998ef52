"""Prefill load: replicas' worth of prefill work, prompt tokens/s x what a token costs at the recent mean prompt."""

from __future__ import annotations

from typing import Literal

from gpuscale.signals import promql, vllm_metrics
from gpuscale.signals.base import RATE_WINDOW, CostedSignal, SignalCoefficients, SignalSizing, prefill_cost, total
from gpuscale.signals.promql import Expr, Matcher


def prefill_work(sel: tuple[Matcher, ...], c: SignalCoefficients) -> Expr:
    """``sum(rate(prompt tokens[1m])) x (s/token + s/pair / 2 x mean prompt)``: the attention term keeps it right for
    long prompts."""
    return promql.Series(vllm_metrics.PROMPT_TOKENS, sel, RATE_WINDOW) * prefill_cost(sel, c)


class PrefillLoad(CostedSignal):
    """Prefill seconds per second (the ``prefill`` role's load signal, backend keda)."""

    kind: Literal["prefill_load"] = "prefill_load"
    metric: Literal["vllm:prompt_tokens_total"] = "vllm:prompt_tokens_total"

    @property
    def label(self) -> str:
        return f"prefill s/s (rate({vllm_metrics.PROMPT_TOKENS}[{RATE_WINDOW}]) x cost per token)"

    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        return total(prefill_work(sel, self.coefficients))

    @classmethod
    def sized(cls, n: SignalSizing) -> PrefillLoad:
        c = n.coefficients
        return cls(
            target=n.utilisation, coefficients=c,
            why=(
                f"replicas' worth of prefill work: prompt tokens/s x the seconds a token costs ({c.prefill_s_per_token * 1e6:.1f} "
                f"us of linear layers plus attention over half the recent mean prompt), at {n.percent} of a replica; it grows "
                "with load, holds the count while nothing queues, and weighs a long prompt by its attention"
            ),
        )
