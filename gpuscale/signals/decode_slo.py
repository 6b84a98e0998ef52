"""Decode replicas needed for the ITL p99 target: decode work at the KV share in use + burst headroom."""

from __future__ import annotations

from typing import Literal

from gpuscale.signals import promql, slo_target, vllm_metrics
from gpuscale.signals.base import RATE_WINDOW, SignalCoefficients, SignalSizing, total
from gpuscale.signals.decode_load import decode_token_cost, decode_work
from gpuscale.signals.promql import Expr, Matcher


def itl_token_cost(sel: tuple[Matcher, ...], c: SignalCoefficients) -> Expr:
    """Replicas' worth of one output token per second at the ITL target and the KV share in use: ``max_i(a_i + b_i x
    KV use / running requests)`` (``SignalCoefficients.decode_itl_lines``: the step model's capacity at that context;
    the larger of two lines as ``x + clamp_min(y - x, 0)``, PromQL having no binary max)."""
    kv, running = promql.Series(vllm_metrics.KV_CACHE, sel), promql.ClampMin(promql.Series(vllm_metrics.RUNNING, sel), 1.0)
    share = kv / running
    per_token: Expr | None = None
    for a, b in c.decode_itl_lines:
        line = promql.Number(a) + promql.Number(b) * share
        per_token = line if per_token is None else per_token + promql.ClampMin(line - per_token, 0.0)
    assert per_token is not None
    return per_token


def itl_replicas(sel: tuple[Matcher, ...], c: SignalCoefficients) -> Expr:
    """Replicas whose decode keeps the ITL target at the KV share in use: ``rate(output tokens[1m]) x
    itl_token_cost``."""
    return promql.Series(vllm_metrics.GENERATION_TOKENS, sel, RATE_WINDOW) * itl_token_cost(sel, c)


class DecodeSlo(slo_target.BurstSignal):
    """Replicas the decode role needs (its load signal when the target is derived, backend keda); target one
    replica (within the HPA's tolerance), which is the batch whose step takes ``ITL_HEADROOM`` of the ITL p99 at the KV share in use."""

    kind: Literal["decode_slo"] = "decode_slo"
    metric: Literal["vllm:generation_tokens_total"] = "vllm:generation_tokens_total"
    output_mean: float
    output_cs2: float
    """The workload's output mix (``slo_target.output_shape``): the output tokens' counting noise."""

    @property
    def label(self) -> str:
        return f"decode replicas for ITL (rate({vllm_metrics.GENERATION_TOKENS}[{RATE_WINDOW}]) x step at KV share + burst)"

    def work(self, sel: tuple[Matcher, ...]) -> Expr:
        c = self.coefficients
        return itl_replicas(sel, c) if c.decode_itl_lines else decode_work(sel, c)

    def counts(self, sel: tuple[Matcher, ...]) -> tuple[slo_target.TokenCount, ...]:
        c = self.coefficients
        cost = itl_token_cost(sel, c) if c.decode_itl_lines else decode_token_cost(sel, c)
        return (slo_target.output_count(sel, cost, self.output_mean, self.output_cs2),)

    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        return total(self.work(sel) + self.burst(sel))

    @classmethod
    def sized(cls, n: SignalSizing) -> DecodeSlo:
        return cls(
            target=slo_target.TARGET_REPLICAS, coefficients=n.coefficients, burst_offset=slo_target.burst_offset(n.cold_start_s),
            **slo_target.output_shape(n),
            why=(
                f"decode replicas the {n.itl_p99_s * 1000:g} ms ITL p99 needs: output tokens/s over what one replica "
                f"decodes at the KV share of a sequence in use (KV use / running requests) with its step at "
                f"{n.itl_headroom:.0%} of the target (the step model's batch at that context; {n.decode_batch} sequences "
                f"at the workload's), plus {slo_target.burst_why(slo_target.burst_offset(n.cold_start_s))}; "
                f"{slo_target.TARGET_WHY}"
            ),
        )
