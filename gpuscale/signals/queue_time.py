"""Queue-time guard: vLLM's mean time in the WAITING state of the requests that finished in the last minute."""

from __future__ import annotations

from typing import Literal

from gpuscale.signals.base import SignalSizing
from gpuscale.signals.latency_guard import LatencyGuard

QUEUE_TIME_TTFT_SHARE = 0.5
"""Mean queue time the SLO guard targets, as a share of the TTFT p99 target."""


class QueueTimeGuard(LatencyGuard):
    kind: Literal["queue_time"] = "queue_time"
    metric: Literal["vllm:request_queue_time_seconds"] = "vllm:request_queue_time_seconds"

    @classmethod
    def sized(cls, n: SignalSizing) -> QueueTimeGuard:
        return cls(
            target=round(QUEUE_TIME_TTFT_SHARE * n.ttft_p99_s, 3),
            why=(
                f"SLO guard: vLLM's mean queue time of the last minute against {QUEUE_TIME_TTFT_SHARE:g} x the TTFT p99 "
                "target (metricType Value: replicas grow with the ratio), whatever the prompts look like; vLLM observes it "
                "when a request finishes, so a minute in which none finished reads 0"
            ),
        )
