"""Traffic pattern of one served model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator, Field, model_validator

from gpuscale.problems import at
from gpuscale.spec.base import INT32_MAX, Spec


def _path(value: object) -> object:
    # a YAML string is the path; strict validation would otherwise want a Path object
    if isinstance(value, str):
        if not value or "\0" in value:
            raise ValueError(f"{value!r} is not a file path")
        return Path(value)
    return value


class TokenDistribution(Spec):
    """Token-count distribution of prompts or outputs (lognormal fitted to mean and p99)."""

    mean: float = Field(gt=0, le=INT32_MAX)
    """Mean tokens per request."""
    p99: float = Field(gt=0, le=INT32_MAX)
    """99th percentile tokens per request."""

    @model_validator(mode="after")
    def _ordered(self) -> TokenDistribution:
        if self.p99 < self.mean:
            raise at("p99", f"p99 ({self.p99}) must be >= mean ({self.mean})")
        return self


class BurstSpec(Spec):
    """Short bursts on top of the daily pattern."""

    multiplier: float = Field(default=3.0, ge=1, le=1000)
    """A burst multiplies the current rate by this factor."""
    duration_s: float = Field(default=60.0, gt=0, le=86_400)
    """How long one burst lasts, seconds."""
    per_hour: float = Field(default=2.0, ge=0, le=3600)
    """Bursts per hour (Poisson)."""


class TraceSpec(Spec):
    """A request trace to replay instead of (or beside) the synthetic pattern."""

    path: Annotated[Path, BeforeValidator(_path)]
    """CSV with ``arrival_s,input_tokens,output_tokens`` (``*_norm.csv``) or the Azure 2023 upstream format."""
    compress: float = Field(default=1.0, gt=0, le=1e6)
    """Divide arrival times by this factor to turn a light trace into a scale-out test."""


class WorkloadSpec(Spec):
    """Requests per second over a day, token sizes and burstiness."""

    base_rps: float = Field(ge=0, le=1e9)
    """Off-peak request rate, requests per second."""
    peak_rps: float = Field(gt=0, le=1e9)
    """Peak-hour request rate, requests per second; the node pool and queue limits must be able to carry it."""
    peak_hours_per_day: float = Field(default=8.0, ge=0, le=24)
    """Hours per day at peak rate; the rest runs at the base rate."""
    prompt_tokens: TokenDistribution
    """Prompt (input) tokens per request."""
    output_tokens: TokenDistribution
    """Generated (output) tokens per request."""
    burst: BurstSpec = BurstSpec(per_hour=0.0)
    """Short bursts; none by default."""
    trace: TraceSpec | None = None
    """Optional real trace for the simulator."""

    @model_validator(mode="after")
    def _peak_above_base(self) -> WorkloadSpec:
        if self.peak_rps < self.base_rps:
            raise at("peak_rps", f"peak_rps ({self.peak_rps}) must be >= base_rps ({self.base_rps})")
        return self
