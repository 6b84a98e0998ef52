"""Named scenarios: the user's four failures, the stack's own workload, and trace replay.

Each builder reads the stack's spec and sizing (the same numbers the infrastructure is sized with) and returns a
``Scenario``: the model and cluster set-up, the traffic, and the variants compared.

* ``peak-hour`` - a morning ramp from base to peak load. The duty-cycle HPA reads ~100% at base already, so the
  ramp does not move its metric: it grows by ceil(1.25 x ready) per cold start while TTFT climbs; a replica added
  by hand lowers TTFT and the metric stays at 100%; the queue-depth policies scale with the backlog.
* ``2am-huge-prompt`` - one 1M-token prompt on an empty GPU pool (the model's long-context variant when its own
  context is shorter). Cluster Autoscaler's node arrives in ~3 min and the request times out; Karpenter alone
  still pays image + weights + engine; Karpenter plus a warm replica answers it.
* ``gang-7-of-8`` - a replica of 8 single-GPU pods over 2+ nodes while 7 GPUs are free on 3 fragmented nodes:
  the default scheduler binds 7 and holds them until a new node arrives; KAI's gang binds none until all 8 fit.
* ``consolidation-24x7`` - a day of diurnal traffic under ``WhenEmptyOrUnderutilized`` (evicts to repack) vs
  ``WhenEmpty`` + 1h: requests lost per day and what the reloads cost.
* ``stack`` - the stack's workload (base, ramp, peak, bursts; or its trace), every autoscaling policy.
* ``trace`` - a trace file replayed with a time-compression factor, every autoscaling policy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from gpuscale import sizing as sizing_mod
from gpuscale.sim import nodes as N
from gpuscale.sim.gang import DEFAULT, KAI
from gpuscale.sim.metrics import PolicyResult
from gpuscale.sim.policies import DutyCyclePolicy, FixedPolicy, GpuscalePolicy, OraclePolicy, QueueDepthPolicy
from gpuscale.sim.replica import build_replica_model, replica_model_from_sizing
from gpuscale.sim.simulation import InitialNode, RoleSetup, SimSetup, Variant
from gpuscale.sim.traffic import (
    HugePrompt,
    RatePoint,
    SyntheticTraffic,
    TraceTraffic,
    TrafficSpec,
    diurnal_profile,
    plateau_profile,
    trace_span_s,
)
from gpuscale.spec.base import Spec
from gpuscale.spec.catalogue import CATALOGUE, GpuInstanceType
from gpuscale.spec.model import ModelDeployment, ParallelismSpec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.workload import TokenDistribution

SCENARIOS: tuple[str, ...] = ("peak-hour", "2am-huge-prompt", "gang-7-of-8", "consolidation-24x7", "stack")
"""Preset names; ``trace`` is built from a file instead."""
HUGE_PROMPT_TOKENS = 1_000_000
DAY_S = 86_400.0


class ScenarioError(ValueError):
    """A scenario that cannot be built as asked; the message lists the valid choices."""


class Scenario(Spec):
    """A set-up, its traffic and the variants to compare."""

    name: str
    description: str
    setup: SimSetup
    traffic: TrafficSpec
    variants: list[Variant] = Field(min_length=1)
    parameters: dict[str, float | int | str | bool]
    """What a reader needs to reproduce the run (rates, sizes, factors)."""

    def variant_names(self) -> list[str]:
        return [v.name for v in self.variants]


# ---------------------------------------------------------------------------- helpers


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


def _roles(ms: sizing_mod.ModelSizing, initial: Callable[[sizing_mod.RoleSizing], int]) -> list[RoleSetup]:
    return [RoleSetup(role=r.role, initial_replicas=initial(r), sizing=r) for r in ms.roles]


def base_replicas(r: sizing_mod.RoleSizing) -> int:
    return max(r.replicas_at_base, r.min_replicas)


def make_setup(
    spec: PlatformSpec, model: ModelDeployment, ms: sizing_mod.ModelSizing, duration_s: float, *,
    initial: Callable[[sizing_mod.RoleSizing], int] = base_replicas,
) -> SimSetup:
    """The set-up of a model as the stack sizes it."""
    inst = CATALOGUE[ms.shape.instance_type]
    pool = spec.topology.pool(model.node_pool)
    return SimSetup(
        stack=spec.environment.name, model=model.name, mode=model.serving.mode,
        replica=replica_model_from_sizing(model, ms),
        pods_per_replica=ms.shape.pods, gpus_per_pod=ms.shape.gpus_per_pod,
        instance_type=inst.name, gpus_per_node=inst.gpus_per_node, usd_per_gpu_hour=inst.usd_per_gpu_hour,
        pool_gpu_limit=pool.gpu_limit,
        ttft_slo_s=model.slo.ttft_p99_s, itl_slo_s=model.slo.itl_p99_s, request_timeout_s=model.slo.request_timeout_s,
        roles=_roles(ms, initial), startup=N.startup_of(ms.cold_start), backend=model.autoscaling.backend,
        duration_s=duration_s, series_s=series_interval(duration_s),
    )


def _variant(
    name: str, description: str, policy: object, spec: PlatformSpec, model: ModelDeployment, **kw: object,
) -> Variant:
    pool = spec.topology.pool(model.node_pool)
    fields: dict[str, object] = {
        "name": name, "description": description, "policy": policy,
        "provisioner": N.provisioner_of(spec.topology.provisioning), "consolidation": N.consolidation_of(pool),
        "scheduler": KAI,
    }
    fields.update(kw)
    return Variant.model_validate(fields)


def autoscaler_variants(spec: PlatformSpec, model: ModelDeployment, *, manual_add_at_s: float | None = None) -> list[Variant]:
    """The four layer-3 policies with the stack's layer 1 and 2 (the oracle also removes empty nodes at once)."""
    out = [_variant("dcgm-duty-cycle", "HPA on DCGM_FI_DEV_GPU_UTIL, target 80%", DutyCyclePolicy(), spec, model)]
    if manual_add_at_s is not None:
        out.append(_variant(
            "dcgm-duty-cycle+manual", f"the same HPA, an operator adds one replica at {manual_add_at_s / 60:.0f} min",
            DutyCyclePolicy(manual_add_at_s=manual_add_at_s), spec, model,
        ))
    out += [
        _variant("queue-depth", "HPA/KEDA on queue depth (5/replica) and KV use (0.8), Kubernetes default behaviour",
                 QueueDepthPolicy(), spec, model),
        _variant("gpuscale", "what gpuscale emits: sized thresholds, warm minimum, stabilisation > cold start",
                 GpuscalePolicy(), spec, model),
        _variant("oracle", "perfect foresight, asks one cold start ahead; removes empty nodes at once",
                 OraclePolicy(), spec, model, consolidation=N.when_empty(0.0)),
    ]
    return out


def _synthetic(model: ModelDeployment, profile: list[RatePoint], *, bursts: bool, huge: list[HugePrompt] | None = None) -> SyntheticTraffic:
    w = model.workload
    ctx = model.architecture.max_context_tokens
    max_out = max(1, min(int(w.output_tokens.p99 * 4), ctx // 2))
    return SyntheticTraffic(
        profile=profile, burst=w.burst if bursts else SyntheticTraffic.model_fields["burst"].default,
        prompt_tokens=w.prompt_tokens, output_tokens=w.output_tokens,
        max_prompt_tokens=max(1, ctx - max_out), max_output_tokens=max_out, huge_prompts=huge or [],
    )


# ---------------------------------------------------------------------------- presets


def as_aggregated(model: ModelDeployment) -> ModelDeployment:
    """The model served as one aggregated vLLM deployment behind one autoscaler (the user's set-up)."""
    if model.serving.mode == "aggregated":
        return model
    serving = model.serving.model_copy(update={"mode": "aggregated"})
    scaling = model.autoscaling.model_copy(update={"aggregated": model.autoscaling.prefill})
    return model.model_copy(update={"serving": serving, "autoscaling": scaling})


def peak_hour(spec: PlatformSpec, model: ModelDeployment, duration_s: float | None) -> Scenario:
    d = duration_s or 3600.0
    disaggregated = model.serving.mode == "disaggregated"
    model = as_aggregated(model)
    ms = sizing_mod.size_model(spec, model)
    w = model.workload
    rise, peak_from = 120.0 / d, 240.0 / d
    profile = plateau_profile(w.base_rps, w.peak_rps, d, rise_at=rise, peak_from=peak_from, peak_until=2.0, back_at=3.0)
    manual_at = 600
    return Scenario(
        name="peak-hour",
        description=(
            f"The peak hour starts: {w.base_rps:g} -> {w.peak_rps:g} req/s within 2 min, then holds, on one aggregated "
            f"vLLM deployment behind one autoscaler{' (the user set-up; the stack serves it disaggregated)' if disaggregated else ''}. The duty-cycle "
            "HPA sits at ~100% and barely scales while TTFT climbs; a replica added by hand lowers TTFT and the metric "
            "does not move; the queue-depth policies scale with the backlog."
        ),
        setup=make_setup(spec, model, ms, d),
        traffic=_synthetic(model, profile, bursts=False),
        variants=autoscaler_variants(spec, model, manual_add_at_s=manual_at),
        parameters={
            "base_rps": w.base_rps, "peak_rps": w.peak_rps, "ramp_start_s": round(rise * d), "peak_from_s": round(peak_from * d),
            "manual_add_at_s": manual_at, "duty_cycle_target": DutyCyclePolicy().target,
            "queue_depth_target": QueueDepthPolicy().queue_target, "serving_mode": "aggregated",
            "stack_serving_mode": "disaggregated" if disaggregated else "aggregated",
            "cold_start_s": round(ms.cold_start.total_s, 1), "replicas_at_peak": ms.roles[0].replicas_at_peak,
        },
    )


def long_context_variant(spec: PlatformSpec, model: ModelDeployment, tokens: int, output: int) -> tuple[ModelDeployment, sizing_mod.ModelSizing]:
    """The model re-sized so one ``tokens``-token prompt fits, or the model itself when it already does."""
    ms = sizing_mod.size_model(spec, model)
    if tokens + output <= min(model.architecture.max_context_tokens, ms.kv_capacity_tokens):
        return model, ms
    arch = model.architecture.model_copy(update={"max_context_tokens": tokens + output})
    variant = model.model_copy(update={"architecture": arch, "parallelism": ParallelismSpec()})
    return variant, sizing_mod.size_model(spec, variant)


def two_am(spec: PlatformSpec, model: ModelDeployment, duration_s: float | None, tokens: int = HUGE_PROMPT_TOKENS) -> Scenario:
    output = 256
    try:
        big, ms = long_context_variant(spec, model, tokens, output)
    except sizing_mod.SizingError:
        ms0 = sizing_mod.size_model(spec, model)
        tokens = min(tokens, ms0.kv_capacity_tokens, model.architecture.max_context_tokens) - output
        big, ms = model, ms0
    replica = replica_model_from_sizing(big, ms)
    warm_ttft = replica.prefill_s(tokens) + replica.step_base_s
    # the client of a huge prompt waits its prefill on top of the usual timeout: with less, no policy could answer
    timeout = math.ceil(model.slo.request_timeout_s + warm_ttft)
    arrive = 120.0
    d = duration_s or arrive + timeout + 600.0
    setup = make_setup(spec, big, ms, d, initial=lambda r: 0)
    traffic = SyntheticTraffic(
        profile=[RatePoint(t_s=0, rps=0)],
        prompt_tokens=TokenDistribution(mean=1, p99=1), output_tokens=TokenDistribution(mean=1, p99=1),
        huge_prompts=[HugePrompt(at_s=arrive, prompt_tokens=tokens, output_tokens=output, timeout_s=timeout)],
    )
    cold = GpuscalePolicy(min_replicas=0, count_gateway_queue=True, activation_threshold=0.0)
    prov = spec.topology.provisioning
    shape = ms.shape
    variants = [
        _variant("cluster-autoscaler", "scale from zero; Cluster Autoscaler node group", cold, spec, big,
                 provisioner=N.cluster_autoscaler(prov), consolidation=N.cluster_autoscaler_scale_down()),
        _variant("karpenter", "scale from zero; Karpenter", cold, spec, big, provisioner=N.karpenter(prov)),
        _variant("karpenter+warm-pool", "Karpenter plus one warm replica (min_replicas 1)",
                 GpuscalePolicy(min_replicas=1), spec, big, provisioner=N.karpenter(prov), initial_replicas=1),
    ]
    return Scenario(
        name="2am-huge-prompt",
        description=(
            f"2 a.m., the GPU pool is empty. One {tokens:,}-token prompt arrives at t={arrive:.0f} s; its client waits "
            f"{timeout} s for the first token (the {model.slo.request_timeout_s:g} s timeout plus the prompt's own "
            f"{warm_ttft:.0f} s prefill). Cluster Autoscaler's node arrives in ~3 min and the request times out; "
            "Karpenter plus a warm replica answers it."
        ),
        setup=setup, traffic=traffic, variants=variants,
        parameters={
            "prompt_tokens": tokens, "output_tokens": output, "arrival_s": arrive, "client_timeout_s": timeout,
            "warm_prefill_s": round(warm_ttft, 1), "long_context_variant": big is not model,
            "tensor_parallel_size": shape.tensor_parallel_size, "pipeline_parallel_size": shape.pipeline_parallel_size,
            "replica_gpus": shape.gpus, "instance_type": shape.instance_type,
        },
    )


def _gang_instance(spec: PlatformSpec, model: ModelDeployment) -> GpuInstanceType:
    pool = spec.topology.pool(model.node_pool)
    big = max(pool.instances, key=lambda it: (it.gpus_per_node, -it.on_demand_usd_per_hour))
    return big if big.gpus_per_node >= 4 else CATALOGUE["p5.48xlarge"]


def gang_seven_of_eight(spec: PlatformSpec, model: ModelDeployment, duration_s: float | None) -> Scenario:
    d = duration_s or 900.0
    largest = model
    inst = _gang_instance(spec, largest)
    per_node = inst.gpus_per_node
    replica = build_replica_model(largest, inst, min(4, per_node), 8 // min(4, per_node))
    free = [3, 2, 2] if per_node >= 3 else [1] * 7
    ms = sizing_mod.size_model(spec, largest)
    base = make_setup(spec, largest, ms, d, initial=lambda r: 0)
    role = base.roles[0].sizing.model_copy(update={"role": "aggregated"})
    setup = base.model_copy(update={
        "replica": replica, "pods_per_replica": 8, "gpus_per_pod": 1, "instance_type": inst.name,
        "gpus_per_node": per_node, "usd_per_gpu_hour": inst.usd_per_gpu_hour,
        "pool_gpu_limit": max(base.pool_gpu_limit, (len(free) + 2) * per_node),
        "extra_nodes": [InitialNode(foreign_gpus=per_node - f) for f in free],
        "roles": [RoleSetup(role="aggregated", initial_replicas=0, sizing=role)],
        "mode": "aggregated",
    })
    profile = [RatePoint(t_s=0, rps=min(1.0, largest.workload.base_rps))]
    fixed = FixedPolicy(replicas=1)
    variants = [
        _variant("default-scheduler", "kube-scheduler binds pods one by one as GPUs free up", fixed, spec, largest, scheduler=DEFAULT),
        _variant("kai-gang", "KAI PodGroup minMember 8: all pods or none", fixed, spec, largest, scheduler=KAI),
    ]
    return Scenario(
        name="gang-7-of-8",
        description=(
            f"A {largest.name} replica of 8 GPUs (8 single-GPU worker pods, TP{replica.tensor_parallel_size} x "
            f"PP{replica.pipeline_parallel_size} over 2+ {inst.name} nodes) is scaled up while {sum(free)} GPUs are free "
            f"on {len(free)} nodes other tenants share. Without gang scheduling {sum(free)} GPUs sit bound and idle "
            "until a new node arrives; with the gang none are held."
        ),
        setup=setup, traffic=_synthetic(largest, profile, bursts=False), variants=variants,
        parameters={"replica_gpus": 8, "pods_per_replica": 8, "free_gpus_per_node": ",".join(map(str, free)),
                    "instance_type": inst.name, "model": largest.name},
    )


def consolidation_day(spec: PlatformSpec, model: ModelDeployment, duration_s: float | None) -> Scenario:
    d = duration_s or DAY_S
    ms = sizing_mod.size_model(spec, model)
    w = model.workload
    profile = diurnal_profile(w.base_rps, w.peak_rps, d, w.peak_hours_per_day)
    pool = spec.topology.pool(model.node_pool)
    after = max(pool.consolidate_after_s, 3600.0)
    # the middle ground: still never evicts a serving pod, but gives empty nodes back after a quarter hour
    # (or twice the cold start, if longer), so a dip shorter than that keeps its nodes
    short = max(900.0, math.ceil(2 * ms.cold_start.total_s / 300.0) * 300.0)
    variants = [
        _variant("when-empty-1h", f"WhenEmpty, consolidateAfter {after / 3600:g}h (gpuscale's default)", GpuscalePolicy(),
                 spec, model, consolidation=N.when_empty(after)),
        _variant(f"when-empty-{short / 60:g}m", f"WhenEmpty, consolidateAfter {short / 60:g}m (>= 2x the cold start)",
                 GpuscalePolicy(), spec, model, consolidation=N.when_empty(short)),
        _variant("when-empty-or-underutilized", "WhenEmptyOrUnderutilized, consolidateAfter 0s (Karpenter's default)",
                 GpuscalePolicy(), spec, model, consolidation=N.when_empty_or_underutilized(0.0)),
    ]
    return Scenario(
        name="consolidation-24x7",
        description=(
            f"A 24x7 service over one day{' compressed into ' + format(d / 3600, 'g') + ' h' if d != DAY_S else ''}: "
            f"base {w.base_rps:g} req/s, {w.peak_hours_per_day:g} h at {w.peak_rps:g} req/s, bursts as specified. "
            "WhenEmptyOrUnderutilized repacks half-empty nodes by evicting replicas (their in-flight requests are lost, "
            "the model reloads); WhenEmpty + 1h never touches a serving pod."
        ),
        setup=make_setup(spec, model, ms, d), traffic=_synthetic(model, profile, bursts=True), variants=variants,
        parameters={"day_s": d, "per_day_factor": round(DAY_S / d, 6), "base_rps": w.base_rps, "peak_rps": w.peak_rps,
                    "peak_hours": w.peak_hours_per_day, "replicas_per_node": ms.shape.gpus and CATALOGUE[ms.shape.instance_type].gpus_per_node // ms.shape.gpus},
    )


def stack_workload(spec: PlatformSpec, model: ModelDeployment, duration_s: float | None) -> Scenario:
    w = model.workload
    if w.trace is not None:
        return trace_replay(spec, model, TraceTraffic(path=w.trace.path, compress=w.trace.compress), duration_s, name="stack")
    d = duration_s or 4 * 3600.0
    ms = sizing_mod.size_model(spec, model)
    profile = plateau_profile(w.base_rps, w.peak_rps, d, rise_at=0.2, peak_from=0.3, peak_until=0.7, back_at=0.8)
    return Scenario(
        name="stack",
        description=(
            f"The stack's own workload for {model.name}: {w.base_rps:g} req/s base, ramp to {w.peak_rps:g} req/s, "
            f"peak, ramp down; bursts x{w.burst.multiplier:g} for {w.burst.duration_s:g} s, {w.burst.per_hour:g}/h."
        ),
        setup=make_setup(spec, model, ms, d), traffic=_synthetic(model, profile, bursts=True),
        variants=autoscaler_variants(spec, model),
        parameters={"base_rps": w.base_rps, "peak_rps": w.peak_rps, "bursts_per_hour": w.burst.per_hour,
                    "burst_multiplier": w.burst.multiplier},
    )


def trace_replay(
    spec: PlatformSpec, model: ModelDeployment, trace: TraceTraffic, duration_s: float | None, *, name: str = "trace",
) -> Scenario:
    d = duration_s or max(trace_span_s(trace), 60.0)
    ms = sizing_mod.size_model(spec, model)
    return Scenario(
        name=name,
        description=f"Replay of {Path(trace.path).name} compressed x{trace.compress:g} ({d:.0f} s) on {model.name}.",
        setup=make_setup(spec, model, ms, d), traffic=trace, variants=autoscaler_variants(spec, model),
        parameters={"trace": Path(trace.path).name, "compress": trace.compress},
    )


_BUILDERS: dict[str, Callable[[PlatformSpec, ModelDeployment, float | None], Scenario]] = {
    "peak-hour": peak_hour,
    "2am-huge-prompt": two_am,
    "gang-7-of-8": gang_seven_of_eight,
    "consolidation-24x7": consolidation_day,
    "stack": stack_workload,
}


def build_scenario(
    name: str, spec: PlatformSpec, *, model: str | None = None, duration_s: float | None = None,
    trace: TraceTraffic | None = None,
) -> Scenario:
    """Build a preset (or, with ``trace``, a replay). Raises ``ScenarioError`` listing the valid names."""
    m = pick_model(spec, model)
    if trace is not None:
        return trace_replay(spec, m, trace, duration_s)
    builder = _BUILDERS.get(name)
    if builder is None:
        raise ScenarioError(f"unknown scenario {name!r}; choose one of: {', '.join(SCENARIOS)}")
    if model is None and name == "gang-7-of-8":  # the trap bites the largest replica
        m = max(spec.models, key=lambda x: x.architecture.params_b)
    return builder(spec, m, duration_s)


# ---------------------------------------------------------------------------- findings


def _fmt_s(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f} s"


def findings(scenario: Scenario, results: list[PolicyResult]) -> list[str]:
    """Plain statements of what the numbers show, per scenario."""
    by = {r.name: r for r in results}
    out: list[str] = []
    if scenario.name == "peak-hour":
        out += _peak_findings(scenario, by)
    elif scenario.name == "2am-huge-prompt":
        for r in results:
            if not r.tracked:
                continue
            t = r.tracked[0]
            node = f"first node ready {_fmt_s(r.nodes.first_ready_latency_s)} after the pod went Pending" if r.nodes.first_ready_latency_s else "no new node"
            out.append(f"{r.name}: {node}; the {t.prompt_tokens:,}-token request {t.outcome.replace('_', ' ')}"
                       + (f" (TTFT {t.ttft_s:.0f} s)" if t.ttft_s is not None else f" (client timeout {t.timeout_s:.0f} s)"))
    elif scenario.name == "gang-7-of-8":
        for r in results:
            ready = next((e.t_s for e in r.events if e.kind == "ready"), None)
            out.append(f"{r.name}: {r.idle_gpu_minutes.gang_wait:.1f} GPU-minutes bound while waiting for the gang; "
                       f"replica serving at {_fmt_s(ready)}")
    elif scenario.name == "consolidation-24x7":
        f = float(scenario.parameters.get("per_day_factor", 1.0))
        for r in results:
            out.append(
                f"{r.name}: {r.lost_in_flight * f:.0f} requests lost in flight per day, {r.evictions * f:.1f} evictions per "
                f"day, {r.eviction_reload_gpu_minutes * f / 60:.1f} GPU-hours of reloads per day "
                f"(${r.eviction_reload_gpu_minutes * f / 60 * scenario.setup.usd_per_gpu_hour:,.0f}), {r.unanswered * f:.0f} "
                f"unanswered requests per day"
            )
    else:
        for r in results:
            ratio = f", {r.gpu_hours_vs_oracle:.2f}x the oracle's GPU-hours" if r.gpu_hours_vs_oracle is not None else ""
            out.append(f"{r.name}: {r.unanswered} unanswered of {r.arrived}, SLO attainment {r.slo_attainment:.1%}{ratio}")
    return out


def _window_mean(r: PolicyResult, role: str, key: str, lo: float, hi: float) -> float | None:
    series = next(s for s in r.series.roles if s.role == role)
    vals = [v for t, v in zip(r.series.t_s, getattr(series, key), strict=True) if lo <= t < hi and v is not None]
    return sum(vals) / len(vals) if vals else None


def _ttft_window(r: PolicyResult, lo: float, hi: float) -> float | None:
    vals = [v for t, v in zip(r.series.t_s, r.series.ttft_p50_s, strict=True) if lo <= t < hi and v is not None]
    return sum(vals) / len(vals) if vals else None


def replicas_reached_at(r: PolicyResult, role: str, n: int, after_s: float = 0.0) -> float | None:
    """First sample time at or after ``after_s`` when ``role`` had ``n`` ready replicas."""
    series = next(s for s in r.series.roles if s.role == role)
    return next((t for t, x in zip(r.series.t_s, series.ready, strict=True) if t >= after_s and x >= n), None)


def unanswered_between(r: PolicyResult, lo: float, hi: float) -> int:
    """Requests arriving in [lo, hi) that were dropped or lost (series resolution)."""
    return sum(u for t, u in zip(r.series.t_s, r.series.unanswered, strict=True) if lo <= t < hi)


def _peak_findings(scenario: Scenario, by: dict[str, PolicyResult]) -> list[str]:
    out: list[str] = []
    first = scenario.setup.roles[0].role
    d = scenario.setup.duration_s
    p = scenario.parameters
    surge, after = float(p["ramp_start_s"]), float(p["peak_from_s"]) + float(p["cold_start_s"])
    need = int(p["replicas_at_peak"])
    until = min(after + 900.0, d)
    duty = by.get("dcgm-duty-cycle")
    if duty is not None:
        util = _window_mean(duty, first, "duty_cycle", float(p["peak_from_s"]), d)
        reach = replicas_reached_at(duty, first, need, surge)
        out.append(
            f"dcgm-duty-cycle: the duty cycle averages {util or 0:.0%} over the peak; {need} ready replicas (the sized peak) "
            f"only {'after ' + format((reach - surge) / 60, '.1f') + ' min' if reach is not None else 'never'}; TTFT p99 "
            f"{_fmt_s(duty.ttft_p99_s)}"
        )
    manual = by.get("dcgm-duty-cycle+manual")
    if duty is not None and manual is not None:
        at = float(p["manual_add_at_s"])
        lo, hi = at + float(p["cold_start_s"]), min(at + float(p["cold_start_s"]) + 600.0, d)
        t0, t1 = _ttft_window(duty, lo, hi), _ttft_window(manual, lo, hi)
        u0, u1 = _window_mean(duty, first, "duty_cycle", lo, hi), _window_mean(manual, first, "duty_cycle", lo, hi)
        if None not in (t0, t1, u0, u1):
            out.append(
                f"a replica added by hand at {at / 60:.0f} min: median TTFT {t0:.1f} s -> {t1:.1f} s over the next 10 min "
                f"while the duty cycle reads {u0:.0%} -> {u1:.0%}"
            )
    for name in ("queue-depth", "gpuscale", "oracle"):
        r = by.get(name)
        if r is not None:
            reach = replicas_reached_at(r, first, need, surge)
            out.append(
                f"{name}: {need} ready replicas {'after ' + format((reach - surge) / 60, '.1f') + ' min' if reach is not None else 'never'}"
                f", up to {r.replicas_max[first]}; TTFT p99 {_fmt_s(r.ttft_p99_s)}"
            )
    parts = [f"{r.name} {unanswered_between(r, after, until)}" for r in by.values()]
    out.append(f"unanswered after the first cold start ({after / 60:.0f}-{until / 60:.0f} min): " + ", ".join(parts))
    out.append("unanswered over the whole run: " + ", ".join(f"{r.name} {r.unanswered}" for r in by.values()))
    return out
