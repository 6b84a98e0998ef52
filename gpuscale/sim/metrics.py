"""Results of a simulation: frozen models the CLI prints and the plan document renders (``model_dump(mode="json")``).

Per policy: requests completed, dropped (timed out or rejected), lost in flight, still queued; SLO attainment
per request (TTFT <= the TTFT target and mean inter-token gap <= the ITL target); TTFT p50/p99 and ITL p50/p99
(token-weighted); GPU-hours of the nodes the model holds, their cost, GPU idle minutes by cause; the ratio of
GPU-hours to the oracle's; a composite score (``SCORE_FORMULA``).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from gpuscale.spec.base import Spec

SCORE_FORMULA = (
    "score = 100 x slo_attainment - 100 x unanswered_fraction - 20 x max(0, gpu_hours / reference_gpu_hours - 1)"
)
"""The composite score, as printed."""
SCORE_EXPLANATION = (
    "slo_attainment: share of decided requests (arrived minus still queued at the end) answered with TTFT <= the "
    "TTFT target and mean inter-token gap <= the ITL target; unanswered_fraction: (dropped + lost in flight) / "
    "arrived, so an unanswered request costs twice a slow one; reference_gpu_hours: the oracle's GPU-hours when it "
    "ran, else the lowest of the policies compared; each 5% of GPU-hours above the reference costs 1 point. "
    "Higher is better; 100 is every request on time at the reference's GPU-hours."
)

# request status codes in the per-request arrays
IN_SYSTEM, COMPLETED, TIMED_OUT, REJECTED, LOST = 0, 1, 2, 3, 4
Outcome = Literal["completed", "timed_out", "rejected", "lost", "unfinished"]
OUTCOMES: dict[int, Outcome] = {IN_SYSTEM: "unfinished", COMPLETED: "completed", TIMED_OUT: "timed_out", REJECTED: "rejected", LOST: "lost"}


class IdleGpuMinutes(Spec):
    """GPU-minutes the model paid for while they could not serve, by cause."""

    provisioning: float
    """Node launched, not yet Ready with GPUs allocatable."""
    loading: float
    """Replica placed: image pull, weight load, engine init."""
    gang_wait: float
    """Pods bound while the rest of their replica has not been placed (no gang scheduling)."""
    empty: float
    """GPUs of the model's nodes no pod holds."""
    total: float = 0.0
    """Sum of the four causes (filled in; stored so the JSON reads back)."""

    @model_validator(mode="before")
    @classmethod
    def _total(cls, data: Any) -> Any:
        if isinstance(data, dict):
            parts = sum(float(data.get(k, 0.0)) for k in ("provisioning", "loading", "gang_wait", "empty"))
            data = {**data, "total": round(parts, 4)}
        return data


class RoleSeries(Spec):
    """One role over time, one value per series sample."""

    role: str
    desired: list[int]
    ready: list[int]
    queue_depth: list[float]
    """``sum(vllm:num_requests_waiting)`` plus requests the gateway holds."""
    duty_cycle: list[float | None]
    """Average GPU duty cycle of ready replicas (what ``DCGM_FI_DEV_GPU_UTIL`` reports); None with no replica."""
    kv_usage: list[float | None]
    """Average ``vllm:kv_cache_usage_perc`` of ready replicas."""


class TimeSeries(Spec):
    """Sampled state for plots; TTFT is by arrival time of the requests."""

    t_s: list[float]
    roles: list[RoleSeries]
    gpus: list[int]
    """GPUs of the model's nodes (including ones still provisioning)."""
    nodes: list[int]
    ttft_p50_s: list[float | None]
    ttft_p99_s: list[float | None]
    arrived: list[int]
    unanswered: list[int]
    """Requests arriving in the interval that were dropped or lost."""


class TrackedRequest(Spec):
    """The fate of one labelled request."""

    label: str
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    timeout_s: float
    outcome: Outcome
    ttft_s: float | None


class NodeStats(Spec):
    launched: int
    terminated: int
    max_alive: int
    first_ready_latency_s: float | None
    """Pending pod first seen -> first new node with allocatable GPUs."""
    mean_ready_latency_s: float | None


class SimEvent(Spec):
    t_s: float
    kind: str
    detail: str


class PolicyResult(Spec):
    """Everything measured for one policy (variant) of a scenario."""

    name: str
    description: str
    policy: str
    """Policy kind (``dcgm-duty-cycle``, ``queue-depth``, ``gpuscale``, ``oracle``, ``fixed``)."""
    provisioner: str
    consolidation: str
    scheduler: str
    arrived: int
    completed: int
    dropped_timeout: int
    dropped_rejected: int
    lost_in_flight: int
    retried: int
    still_queued: int
    """Waiting or in progress when the run ended, within their timeout."""
    ttft_attainment: float
    itl_attainment: float
    slo_attainment: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    tpot_mean_s: float | None
    ttft_p99_met: bool
    itl_p99_met: bool
    gpu_hours: float
    cost_usd: float
    serving_gpu_minutes: float
    idle_gpu_minutes: IdleGpuMinutes
    evictions: int
    eviction_reload_gpu_minutes: float
    """GPU-minutes evicted replicas spent placed again and reloading."""
    scale_events: int
    replicas_max: dict[str, int]
    replicas_mean: dict[str, float]
    nodes: NodeStats
    tracked: list[TrackedRequest]
    events: list[SimEvent]
    series: TimeSeries
    gpu_hours_vs_oracle: float | None = None
    score: float = 0.0
    dropped: int = 0
    """Timed out + rejected (filled in)."""
    unanswered: int = 0
    """Dropped + lost in flight (filled in)."""

    @model_validator(mode="before")
    @classmethod
    def _sums(cls, data: Any) -> Any:
        if isinstance(data, dict):
            dropped = int(data.get("dropped_timeout", 0)) + int(data.get("dropped_rejected", 0))
            data = {**data, "dropped": dropped, "unanswered": dropped + int(data.get("lost_in_flight", 0))}
        return data

    def tracked_request(self, label: str) -> TrackedRequest:
        for r in self.tracked:
            if r.label == label:
                return r
        raise KeyError(label)


class SloTargets(Spec):
    ttft_p99_s: float
    itl_p99_s: float
    request_timeout_s: float


class ScenarioResult(Spec):
    """One scenario run with every policy compared."""

    scenario: str
    description: str
    stack: str
    model: str
    seed: int
    duration_s: float
    parameters: dict[str, float | int | str | bool]
    slo: SloTargets
    score_formula: str = SCORE_FORMULA
    score_explanation: str = SCORE_EXPLANATION
    reference: Literal["oracle", "cheapest"]
    reference_gpu_hours: float
    results: list[PolicyResult] = Field(min_length=1)
    findings: list[str]
    """Plain-language statements of what the numbers show (computed, not written by hand)."""

    def result(self, name: str) -> PolicyResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"no policy {name!r}; ran {', '.join(r.name for r in self.results)}")


def percentile(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def score(result: PolicyResult, reference_gpu_hours: float) -> float:
    """``SCORE_FORMULA``."""
    unanswered = result.unanswered / result.arrived if result.arrived else 0.0
    excess = max(0.0, result.gpu_hours / reference_gpu_hours - 1.0) if reference_gpu_hours > 0 else 0.0
    return round(100.0 * result.slo_attainment - 100.0 * unanswered - 20.0 * excess, 2)
