"""Results of a simulation: frozen models the CLI prints and the plan document renders (``model_dump(mode="json")``).

Per policy: every arrived request decided (completed, timed out, rejected or lost in flight: the run drains after the
last arrival); SLO attainment per request (TTFT <= the TTFT target and mean inter-token gap <= the ITL target) over all
requests and over the servable ones; misses by cause; TTFT p50/p99 and ITL p50/p99 (token-weighted); GPU-hours of the
nodes the model holds up to the end of the drain, their cost, GPU idle minutes by cause; the lower bound on GPU-hours
at the policy's attainment; a composite score (``SCORE_FORMULA``).
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
    "slo_attainment: share of all arrived requests answered with TTFT <= the TTFT target and mean inter-token gap <= "
    "the ITL target (every request is decided: the run drains after the last arrival); unanswered_fraction: (timed out "
    "+ rejected + lost in flight) / arrived, so an unanswered request costs twice a slow one; reference_gpu_hours: the "
    "fewest GPU-hours among the compared policies (the ceiling excluded); each 5% of GPU-hours above it costs 1 point. "
    "Higher is better. How far each policy sits from what is possible is the lower bound column: the fewest GPU-hours "
    "any schedule could spend for the policy's own attainment."
)

Outcome = Literal["completed", "timed_out", "rejected", "lost", "refused", "unfinished"]


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
    missed: list[int]
    """Requests arriving in the interval that missed their SLO (any cause)."""


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
    """Pending pod first seen -> first new node with allocatable GPUs (nodes launched for a headroom buffer, which no
    pod waited for, are not counted)."""
    mean_ready_latency_s: float | None
    scale_ups: int = 0
    """Replicas placed after t = 0 that became ready (scale-ups, and replacements of evicted replicas)."""
    scale_up_ready_mean_s: float | None = None
    """Mean seconds from such a replica's creation (the autoscaler's decision) to serving: a scale-up's first answer."""
    scale_up_ready_p90_s: float | None = None


class SimEvent(Spec):
    t_s: float
    kind: str
    detail: str


class MissBreakdown(Spec):
    """Requests that missed their SLO, each counted once under its cause (``states.MissCause``)."""

    rejected: int
    """Longer than the model's context or a replica's KV."""
    infeasible: int
    """Would miss TTFT or ITL even alone on an idle replica."""
    queueing: int
    """Ready replicas were there but too few or too loaded."""
    cold_start: int
    """Arrived while no replica was ready or while asked-for replicas were still starting."""
    eviction: int
    """Its replica was evicted (consolidation) or its node reclaimed (spot) under it."""
    lost_in_flight: int
    """Aborted in flight by a drain cut short or the end of the run."""
    total: int = 0

    @model_validator(mode="before")
    @classmethod
    def _total(cls, data: Any) -> Any:
        if isinstance(data, dict):
            keys = ("rejected", "infeasible", "queueing", "cold_start", "eviction", "lost_in_flight")
            data = {**data, "total": sum(int(data.get(k, 0)) for k in keys)}
        return data


class PolicyResult(Spec):
    """Everything measured for one policy (variant) of a scenario."""

    name: str
    description: str
    policy: str
    """Policy kind (``dcgm-duty-cycle``, ``queue-depth``, ``gpuscale``, ``fixed``)."""
    bound: str | None = None
    """``ceiling`` for the reference run with every replica ready all the time."""
    provisioner: str
    consolidation: str
    scheduler: str
    arrived: int
    completed: int
    dropped_timeout: int
    dropped_rejected: int
    lost_in_flight: int
    retried: int
    servable: int
    refused: int = 0
    """Answered 503 with ``Retry-After`` by the front door (hold limit ran out, or its queue was at the bound)."""
    no_endpoint: int = 0
    """Of ``lost_in_flight``: refused a connection at zero replicas with nothing to hold them (no front door)."""
    first_answer_s: float | None = None
    """From the first arrival to the first first-token of the run (the first answer of the day when the run starts
    idle); ``None`` when nothing was answered."""
    retry_after_s: float | None = None
    """The ``Retry-After`` the front door sent with its 503s (``None``: no front door, or none refused)."""
    """Requests within the context and on time alone on an idle replica: the most any policy can serve on time."""
    ttft_attainment: float
    itl_attainment: float
    slo_attainment: float
    """On time (TTFT and ITL) over every arrived request."""
    slo_attainment_servable: float
    """On time over the servable requests: tells a policy that fails a trace from a stack that cannot serve it."""
    misses: MissBreakdown
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    itl_p99_s: float | None
    tpot_mean_s: float | None
    ttft_p99_met: bool
    itl_p99_met: bool
    end_s: float
    """When the last request was decided (the drain's end); GPU time is charged up to here."""
    gpu_hours: float
    cost_usd: float
    serving_gpu_minutes: float
    idle_gpu_minutes: IdleGpuMinutes
    evictions: int
    eviction_reload_gpu_minutes: float
    """GPU-minutes evicted replicas spent placed again and reloading."""
    interruptions: int
    """Spot interruption notices."""
    preemptions: int
    """vLLM preemptions (KV blocks ran out; the request is recomputed)."""
    prefix_hit_rate: float | None
    """Prompt tokens served from the prefix cache / prompt tokens admitted; None without prefix ids."""
    scale_events: int
    replicas_max: dict[str, int]
    replicas_mean: dict[str, float]
    nodes: NodeStats
    tracked: list[TrackedRequest]
    events: list[SimEvent]
    series: TimeSeries
    lower_bound_gpu_hours: float | None = None
    """The fewest GPU-hours any schedule could spend for this policy's attainment (``bounds``); filled by the runner.
    ``None`` when the bound has no finite value for it (``lower_bound_note`` says why)."""
    lower_bound_note: str | None = None
    """Why ``lower_bound_gpu_hours`` is missing (else ``None``)."""
    score: float = 0.0
    dropped: int = 0
    """Timed out + rejected + refused (filled in)."""
    unanswered: int = 0
    """Dropped + lost in flight (filled in)."""

    @model_validator(mode="before")
    @classmethod
    def _sums(cls, data: Any) -> Any:
        if isinstance(data, dict):
            dropped = int(data.get("dropped_timeout", 0)) + int(data.get("dropped_rejected", 0)) + int(data.get("refused", 0))
            data = {**data, "dropped": dropped, "unanswered": dropped + int(data.get("lost_in_flight", 0))}
        return data

    @property
    def on_time(self) -> int:
        return self.arrived - self.misses.total

    @property
    def gpu_hours_vs_lower_bound(self) -> float | None:
        """GPU-hours over the lower bound; ``None`` when the bound is missing or 0 (no ratio to report)."""
        lb = self.lower_bound_gpu_hours
        return round(self.gpu_hours / lb, 4) if lb else None

    def tracked_request(self, label: str) -> TrackedRequest:
        for r in self.tracked:
            if r.label == label:
                return r
        raise KeyError(label)


class TrafficInfo(Spec):
    """How the arrivals were made: what a reader needs to reproduce them."""

    kind: Literal["synthetic", "trace"]
    requests: int
    granularity_s: float | None = None
    """A trace's arrival grid (seconds, after compression) when its timestamps are bucketed."""
    replay: Literal["batch", "spread", "exact"] = "exact"
    """Bucketed traces: each bucket at once (batch) or spread uniformly within it (seeded); else exact."""
    prefix_ids: bool = False
    """Requests carry prefix block ids (prefix caching and cache-aware routing apply)."""
    warmup_s: float = 0.0
    """Seconds of the same traffic replayed before the scored window (not scored): runs enter it warm. 0: cold start."""
    warmup_requests: int = 0
    """Requests of that warm-up (not in ``requests``)."""


class LowerBoundPoint(Spec):
    attainment: float
    gpu_hours: float


class SloTargets(Spec):
    ttft_p99_s: float
    itl_p99_s: float
    request_timeout_s: float


class ScenarioResult(Spec):
    """One scenario run with every policy compared, the ceiling and the lower bound."""

    scenario: str
    description: str
    stack: str
    model: str
    seed: int
    duration_s: float
    """Arrivals span [0, duration_s]; each run then drains (its own ``end_s``)."""
    parameters: dict[str, float | int | str | bool]
    traffic: TrafficInfo
    slo: SloTargets
    score_formula: str = SCORE_FORMULA
    score_explanation: str = SCORE_EXPLANATION
    reference_gpu_hours: float
    """The score's GPU-hour reference: the fewest GPU-hours among the compared policies."""
    lower_bound: list[LowerBoundPoint]
    """GPU-hours no schedule can beat for a given attainment (a curve; ``bounds.LowerBound``)."""
    results: list[PolicyResult] = Field(min_length=1)
    findings: list[str]
    """Plain-language statements of what the numbers show (computed from the results, never written by hand)."""

    def result(self, name: str) -> PolicyResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"no policy {name!r}; ran {', '.join(r.name for r in self.results)}")

    @property
    def ceiling(self) -> PolicyResult | None:
        return next((r for r in self.results if r.bound == "ceiling"), None)

    @property
    def best_fixed(self) -> PolicyResult | None:
        """The best fixed allocation in hindsight (``best_fixed``), when it was searched."""
        return next((r for r in self.results if r.bound == "best-fixed"), None)

    @property
    def policies(self) -> list[PolicyResult]:
        """The compared policies, without the references (the ceiling, the best fixed allocation)."""
        return [r for r in self.results if r.bound is None]


def percentile(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def score(result: PolicyResult, reference_gpu_hours: float) -> float:
    """``SCORE_FORMULA``."""
    unanswered = result.unanswered / result.arrived if result.arrived else 0.0
    excess = max(0.0, result.gpu_hours / reference_gpu_hours - 1.0) if reference_gpu_hours > 0 else 0.0
    return round(100.0 * result.slo_attainment - 100.0 * unanswered - 20.0 * excess, 2)
