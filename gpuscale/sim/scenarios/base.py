"""What every scenario shares: the ``Scenario`` it builds, the registry entry that names it, and the set-up helpers.

A scenario module defines one ``ScenarioDef`` (name, typed parameters, builder, findings, where the plan quotes it)
and calls ``register``; ``gpuscale.sim.scenarios`` imports every module of the package, so adding a scenario is one
module plus its test. Nothing else names scenarios: the CLI, the Makefile and the plan read the registry.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from gpuscale import reservation_shares
from gpuscale import sizing as sizing_mod
from gpuscale.problems import Refusal
from gpuscale.sim import nodes as N
from gpuscale.sim.inputs import RoleSetup, SimSetup, Variant
from gpuscale.sim.metrics import PolicyResult, ScenarioResult
from gpuscale.sim.placement import KAI
from gpuscale.sim.policies import DutyCyclePolicy, FixedPolicy, GpuscalePolicy, QueueDepthPolicy
from gpuscale.sim.replica import replica_model_from_sizing
from gpuscale.sim.traffic import RatePoint, SyntheticTraffic, TrafficSpec
from gpuscale.spec.base import Spec
from gpuscale.spec.catalogue import CATALOGUE
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec

PlanSection = Literal["layer1", "layer2", "cold-start", "simulation"]
"""Where the plan document quotes a scenario (``templates/``); None: not in the plan."""
CEILING = "ceiling"
"""Name of the reference variant with every replica ready all the time."""


class ScenarioError(Refusal):
    """A scenario that cannot be built as asked; the message lists the valid choices."""


class Scenario(Spec):
    """A set-up, its traffic and the variants to compare."""

    name: str
    description: str
    """The set-up in plain words; never a claim about the outcome (``findings`` state those from the results)."""
    setup: SimSetup
    traffic: TrafficSpec
    variants: list[Variant] = Field(min_length=1)
    parameters: dict[str, float | int | str | bool]
    """What a reader needs to reproduce the run (rates, sizes, factors)."""

    def variant_names(self) -> list[str]:
        return [v.name for v in self.variants]


class ScenarioParams(Spec):
    """Base of each scenario's typed parameters."""

    duration_s: float | None = Field(default=None, gt=0)
    """Simulated arrival span; None: the scenario's default."""
    spot_interruptions_per_node_hour: float | None = Field(default=None, ge=0)
    """Spot interruption rate of the pool's nodes; None: ``nodes.SPOT_INTERRUPTIONS_PER_NODE_HOUR`` when the pool may
    use spot, else none."""


Builder = Callable[[PlatformSpec, ModelDeployment, ScenarioParams], Scenario]
Findings = Callable[[Scenario, ScenarioResult], list[str]]


@dataclass(frozen=True)
class ScenarioDef:
    """One registered scenario."""

    name: str
    summary: str
    params: type[ScenarioParams]
    build: Builder
    findings: Findings
    plan_section: PlanSection | None = None
    """Where the plan quotes it (``None``: not in the plan)."""
    plan_order: int = 0
    """Order of simulation in ``make plan``."""
    pick_model: Callable[[PlatformSpec], ModelDeployment] | None = None
    """The model it runs when none is named (default: the first)."""
    plan_models: Callable[[PlatformSpec], list[ModelDeployment]] | None = None
    """The models the plan runs it for, one result each (default: one run, of ``pick_model``'s or the primary model)."""
    columns: tuple[str, ...] = ("policy", "attainment", "misses", "ttft", "itl_p99", "gpu_hours", "lower_bound", "score")
    """Columns the plan's table shows (``gpuscale.plan.evidence.COLUMNS``)."""


REGISTRY: dict[str, ScenarioDef] = {}


def register(definition: ScenarioDef) -> ScenarioDef:
    if definition.name in REGISTRY:
        raise ValueError(f"scenario {definition.name!r} registered twice")
    REGISTRY[definition.name] = definition
    return definition


# ---------------------------------------------------------------------------- set-up helpers


def pick_model(spec: PlatformSpec, name: str | None) -> ModelDeployment:
    names = [m.name for m in spec.models]
    if name is None:
        return spec.models[0]
    for m in spec.models:
        if m.name == name:
            return m
    raise ScenarioError(f"unknown model {name!r}; this stack serves: {', '.join(names)}")


def series_interval(duration_s: float) -> float:
    """At most ~600 samples per series, in whole scrape intervals."""
    return max(15.0, math.ceil(duration_s / 600.0 / 15.0) * 15.0)


def base_replicas(r: sizing_mod.RoleSizing) -> int:
    return max(r.replicas_at_base, r.min_replicas)


def make_setup(
    spec: PlatformSpec, model: ModelDeployment, ms: sizing_mod.ModelSizing, duration_s: float, *,
    initial: Callable[[sizing_mod.RoleSizing], int] = base_replicas, spot_rate_per_node_hour: float | None = None,
    clock_rate: float = 1.0,
) -> SimSetup:
    """The set-up of a model as the stack sizes it."""
    from gpuscale.manifests.router import DECODE_POLICY, PREFILL_POLICY  # the router gpuscale emits for P/D

    inst = CATALOGUE[ms.shape.instance_type]
    pool = spec.topology.pool(model.node_pool)
    spot = "spot" in pool.capacity_types
    rate = spot_rate_per_node_hour if spot_rate_per_node_hour is not None else (N.SPOT_INTERRUPTIONS_PER_NODE_HOUR if spot else 0.0)
    disagg = model.serving.mode == "disaggregated"
    share = reservation_shares.share_of(spec, model, ms)  # a reservation the pool's models share is billed once
    return SimSetup(
        stack=spec.environment.name, model=model.name, mode=model.serving.mode,
        replica=replica_model_from_sizing(model, ms),
        pods_per_replica=ms.shape.pods, gpus_per_pod=ms.shape.gpus_per_pod,
        instance_type=inst.name, gpus_per_node=inst.gpus_per_node, usd_per_gpu_hour=inst.usd_per_gpu_hour,
        network_gbps=inst.network_gbps or 1.0, pool_gpu_limit=pool.gpu_limit,
        reserved_instances=share.instances if share else 0, reserved_usd_per_hour=share.usd_per_hour if share else 0.0,
        # capped at its reservations only where every one of them states its instance count
        reserved_only=share is not None and set(pool.capacity_types) == {"reserved"}
        and all(r.instance_count is not None for r in pool.reservations),
        ttft_slo_s=model.slo.ttft_p99_s, itl_slo_s=model.slo.itl_p99_s, request_timeout_s=model.slo.request_timeout_s,
        roles=[RoleSetup(role=r.role, initial_replicas=initial(r), sizing=r) for r in ms.roles],
        startup=N.startup_of(ms.cold_start),
        spot=N.SpotSpec(interruptions_per_node_hour=rate) if rate > 0 else None,
        prefill_routing="cache-aware" if disagg and PREFILL_POLICY == "cache_aware" else "least-load",
        decode_routing="power-of-two" if disagg and DECODE_POLICY == "power_of_two" else "least-load",
        backend=model.autoscaling.backend, duration_s=duration_s, series_s=series_interval(duration_s),
        clock_rate=clock_rate,
    )


def variant(name: str, description: str, policy: object, spec: PlatformSpec, model: ModelDeployment, **kw: object) -> Variant:
    pool = spec.topology.pool(model.node_pool)
    fields: dict[str, object] = {
        "name": name, "description": description, "policy": policy,
        "provisioner": N.provisioner_of(spec.topology.provisioning), "consolidation": N.consolidation_of(pool),
        "scheduler": KAI,
    }
    fields.update(kw)
    return Variant.model_validate(fields)


def ceiling_counts(setup: SimSetup) -> dict[str, int]:
    """Every role at its maximum, scaled down together when the NodePool's GPU limit cannot hold them all."""
    gpus = setup.replica.gpus
    want: dict[str, int] = {r.role: r.sizing.max_replicas for r in setup.roles}
    total = sum(want.values()) * gpus
    if total <= setup.pool_gpu_limit:
        return want
    scale = setup.pool_gpu_limit / total
    return {k: max(1, math.floor(v * scale)) for k, v in want.items()}


def ceiling_variant(spec: PlatformSpec, model: ModelDeployment, setup: SimSetup) -> Variant:
    counts = ceiling_counts(setup)
    label = ", ".join(f"{k} {v}" for k, v in counts.items())
    return variant(
        CEILING, f"reference: every role at its maximum ({label}) ready all the time on warm nodes",
        FixedPolicy(per_role=counts), spec, model, initial_replicas=counts, consolidation=N.ConsolidationSpec(
            policy="none", consolidate_after_s=0.0), bound=CEILING,
    )


def autoscaler_variants(
    spec: PlatformSpec, model: ModelDeployment, setup: SimSetup, *, manual_add_at_s: float | None = None,
) -> list[Variant]:
    """The layer-3 policies with the stack's layer 1 and 2, then the ceiling."""
    out = [variant("dcgm-duty-cycle", "HPA on DCGM_FI_DEV_GPU_UTIL, target 80%", DutyCyclePolicy(), spec, model)]
    if manual_add_at_s is not None:
        out.append(variant(
            "dcgm-duty-cycle+manual", f"the same HPA, an operator adds one replica at {manual_add_at_s / 60:.0f} min",
            DutyCyclePolicy(manual_add_at_s=manual_add_at_s), spec, model,
        ))
    out += [
        variant("queue-depth", "HPA/KEDA on queue depth (5/replica) and KV use (0.8), Kubernetes default behaviour",
                QueueDepthPolicy(), spec, model),
        variant("gpuscale", "what gpuscale emits: sized thresholds, warm minimum, stabilisation > cold start",
                GpuscalePolicy(), spec, model),
        ceiling_variant(spec, model, setup),
    ]
    return out


def synthetic(model: ModelDeployment, profile: list[RatePoint], *, bursts: bool) -> SyntheticTraffic:
    w = model.workload
    ctx = model.architecture.max_context_tokens
    max_out = max(1, min(int(w.output_tokens.p99 * 4), ctx // 2))
    return SyntheticTraffic(
        profile=profile, burst=w.burst if bursts else SyntheticTraffic.model_fields["burst"].default,
        prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens,
        max_prompt_tokens=max(1, ctx - max_out), max_output_tokens=max_out,
    )


def as_aggregated(model: ModelDeployment) -> ModelDeployment:
    """The model served as one aggregated vLLM deployment behind one autoscaler (the user's set-up)."""
    if model.serving.mode == "aggregated":
        return model
    serving = model.serving.model_copy(update={"mode": "aggregated"})
    scaling = model.autoscaling.model_copy(update={"aggregated": model.autoscaling.prefill})
    return model.model_copy(update={"serving": serving, "autoscaling": scaling})


# ---------------------------------------------------------------------------- findings from numbers


def fmt_s(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f} s"


def misses_text(r: PolicyResult) -> str:
    m = r.misses
    parts = [f"{v:,} {k.replace('_', ' ')}" for k, v in m.model_dump().items() if k != "total" and v]
    return ", ".join(parts) if parts else "none"


def policy_line(r: PolicyResult) -> str:
    lb = r.gpu_hours_vs_lower_bound
    return (
        f"{r.name}: {r.slo_attainment:.1%} on time ({r.slo_attainment_servable:.1%} of servable), misses: {misses_text(r)}; "
        f"{r.gpu_hours:,.1f} GPU-h" + (f", {lb:.2f}x the lower bound at that attainment" if lb else "")
    )


def comparison_lines(result: ScenarioResult) -> list[str]:
    """Statements every scenario gets: the best and the cheapest policy, and how far each sits from the bounds."""
    pols = result.policies
    out = [policy_line(r) for r in result.results]
    if len(pols) >= 2:
        best = max(pols, key=lambda r: (r.slo_attainment, -r.gpu_hours))
        cheap = min(pols, key=lambda r: (r.gpu_hours, -r.slo_attainment))
        top = max(pols, key=lambda r: r.score)
        out.append(
            f"highest attainment: {best.name} ({best.slo_attainment:.1%}); fewest GPU-hours: {cheap.name} "
            f"({cheap.gpu_hours:,.1f}); highest score: {top.name} ({top.score:.1f})"
        )
    ceil = result.ceiling
    if ceil is not None and pols:
        gap = ceil.slo_attainment - max(r.slo_attainment for r in pols)
        out.append(
            f"the ceiling (every replica ready all the time) reaches {ceil.slo_attainment:.1%} on time with "
            f"{ceil.gpu_hours:,.1f} GPU-h; the best policy is {gap * 100:.1f} points below it"
        )
    return out


def missed_between(r: PolicyResult, lo: float, hi: float) -> int:
    """Requests arriving in [lo, hi) that missed their SLO (series resolution)."""
    return sum(u for t, u in zip(r.series.t_s, r.series.missed, strict=True) if lo <= t < hi)


def replicas_reached_at(r: PolicyResult, role: str, n: int, after_s: float = 0.0) -> float | None:
    """First sample time at or after ``after_s`` when ``role`` had ``n`` ready replicas."""
    series = next(s for s in r.series.roles if s.role == role)
    return next((t for t, x in zip(r.series.t_s, series.ready, strict=True) if t >= after_s and x >= n), None)


def window_mean(r: PolicyResult, role: str, key: str, lo: float, hi: float) -> float | None:
    series = next(s for s in r.series.roles if s.role == role)
    vals = [v for t, v in zip(r.series.t_s, getattr(series, key), strict=True) if lo <= t < hi and v is not None]
    return sum(vals) / len(vals) if vals else None


def ttft_window(r: PolicyResult, lo: float, hi: float) -> float | None:
    vals = [v for t, v in zip(r.series.t_s, r.series.ttft_p50_s, strict=True) if lo <= t < hi and v is not None]
    return sum(vals) / len(vals) if vals else None


def first_ready_s(r: PolicyResult) -> float | None:
    return next((e.t_s for e in r.events if e.kind == "ready"), None)
