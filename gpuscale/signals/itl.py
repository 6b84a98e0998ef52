"""ITL guard: vLLM's mean inter-token latency over the last minute."""

from __future__ import annotations

from typing import Literal

from gpuscale.signals.base import SignalSizing
from gpuscale.signals.latency_guard import LatencyGuard


class ItlGuard(LatencyGuard):
    kind: Literal["itl"] = "itl"
    metric: Literal["vllm:inter_token_latency_seconds"] = "vllm:inter_token_latency_seconds"

    @classmethod
    def sized(cls, n: SignalSizing) -> ItlGuard:
        return cls(
            target=round(n.itl_headroom * n.itl_p99_s, 4),
            why=(
                f"SLO guard: vLLM's mean inter-token latency of the last minute against {n.itl_headroom:g} x the ITL p99 "
                "target, the step decode batches are sized to (metricType Value), whatever the context lengths"
            ),
        )
