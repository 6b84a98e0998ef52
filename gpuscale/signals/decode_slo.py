"""Decode replicas needed for the ITL p99 target: decode work at the KV share in use + burst headroom."""

from __future__ import annotations

from typing import Literal

from gpuscale.signals import slo_target, vllm_metrics
from gpuscale.signals.base import RATE_WINDOW, CostedSignal, SignalSizing, total
from gpuscale.signals.decode_load import decode_work
from gpuscale.signals.promql import Expr, Matcher


class DecodeSlo(CostedSignal):
    """Replicas the decode role needs (its load signal when the target is derived, backend keda); target one
    replica (within the HPA's tolerance), which is the batch whose step takes ``ITL_HEADROOM`` of the ITL p99 at the KV share in use."""

    kind: Literal["decode_slo"] = "decode_slo"
    metric: Literal["vllm:generation_tokens_total"] = "vllm:generation_tokens_total"

    @property
    def label(self) -> str:
        return f"decode replicas for ITL (rate({vllm_metrics.GENERATION_TOKENS}[{RATE_WINDOW}]) x step at KV share + burst)"

    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        work = decode_work(sel, self.coefficients)
        return total(work + slo_target.burst_headroom(work))

    @classmethod
    def sized(cls, n: SignalSizing) -> DecodeSlo:
        return cls(
            target=slo_target.TARGET_REPLICAS, coefficients=n.coefficients,
            why=(
                f"decode replicas the {n.itl_p99_s * 1000:g} ms ITL p99 needs: output tokens/s x each token's step time at "
                f"the KV share of its sequence (KV use / running requests), 1.0 being a replica at the {n.decode_batch}-"
                f"sequence batch whose step is {n.itl_headroom:.0%} of the target, plus {slo_target.BURST_WHY}; "
                f"{slo_target.TARGET_WHY}"
            ),
        )
