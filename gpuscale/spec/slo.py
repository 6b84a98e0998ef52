"""Service-level objectives of one served model."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gpuscale.problems import at
from gpuscale.spec.base import Spec

Criticality = Literal["critical", "standard", "best_effort"]


class SloSpec(Spec):
    """Latency and goodput targets; criticality decides the warm minimum."""

    ttft_p99_s: float = Field(gt=0, le=3600)
    """Time to first token, 99th percentile, seconds."""
    itl_p99_s: float = Field(gt=0, le=60)
    """Inter-token latency, 99th percentile, seconds."""
    request_timeout_s: float = Field(gt=0, le=86_400)
    """The router/client gives up on a request after this many seconds; also the drain budget on scale-down (at most
    a day)."""
    goodput_target: float = Field(default=0.95, gt=0, le=1)
    """Fraction of requests that must meet both TTFT and ITL targets."""
    criticality: Criticality = "standard"
    """``critical`` paths keep at least one warm replica per role (a cold start is node + image + weights + engine)."""

    @model_validator(mode="after")
    def _timeout_covers_ttft(self) -> SloSpec:
        if self.request_timeout_s <= self.ttft_p99_s:
            raise at("request_timeout_s",
                f"request_timeout_s ({self.request_timeout_s}) must exceed ttft_p99_s ({self.ttft_p99_s}): "
                "a request cannot time out before its first token is due"
            )
        return self
