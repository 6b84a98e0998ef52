"""``headroom``: the stack's traffic with no headroom, with warm replicas, and with warm nodes (a CapacityBuffer, or
placeholder pods that also pull the image, evicted at once as gpuscale emits them or after the node-time preemption
delay): what each costs and what it saves.

Three ways to meet a scale-up: nothing kept (a replica waits for a node, the image, the weights and the engine); warm
replicas (the autoscaler's target lowered so running replicas absorb the burst: sizing's default when bursts end
before a cold start); warm nodes (the target left at ``sizing.PREFILL_TARGET_UTILISATION`` and N replicas' worth of
spare GPU nodes, ``gpuscale.headroom``, so a scale-up skips the node's wait). The spare nodes' idle GPUs are charged
like any other GPU of the pool (the GPU ledger counts empty GPUs of the model's nodes).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from gpuscale import headroom as headroom_mod
from gpuscale import sizing as sizing_mod
from gpuscale.sim.inputs import HeadroomSim
from gpuscale.sim.metrics import PolicyResult, ScenarioResult
from gpuscale.sim.policies import GpuscalePolicy
from gpuscale.sim.scenarios.base import (
    Scenario,
    ScenarioDef,
    ScenarioParams,
    base_replicas,
    ceiling_variant,
    comparison_lines,
    fmt_s,
    make_setup,
    register,
    synthetic,
    variant,
)
from gpuscale.sim.traffic import plateau_profile
from gpuscale.spec.headroom import HeadroomSpec
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec

NO_HEADROOM, WARM_REPLICAS, WARM_NODES, WARM_NODES_IMAGE = "no-headroom", "warm-replicas", "warm-nodes", "warm-nodes+image"
PLACEHOLDERS_DELAYED = "placeholders+delay"
"""Placeholder pods whose eviction waits the serving pods' node-time preemption delay (what gpuscale does not emit)."""


class HeadroomParams(ScenarioParams):
    spare_replicas: int | None = Field(default=None, ge=1, le=64)
    """Replicas' worth of spare nodes per role; None: sized (``gpuscale.headroom``) at the undiscounted target, at least
    one so the comparison exists."""


def lean(model: ModelDeployment) -> ModelDeployment:
    """The model with every role's target at ``PREFILL_TARGET_UTILISATION``: headroom left to spare nodes, not replicas.
    Its own ``headroom`` section is dropped: the scenario sizes the spare nodes whatever the stack emits (and its cost
    cap, a refusal of what would be emitted, does not apply to a comparison)."""
    scaling = model.autoscaling
    update: dict[str, Any] = {r: scaling.role(r).model_copy(update={"target_utilisation": sizing_mod.PREFILL_TARGET_UTILISATION})
                              for r in model.serving.roles}
    return model.model_copy(update={"autoscaling": scaling.model_copy(update=update), "headroom": HeadroomSpec()})


def build(spec: PlatformSpec, model: ModelDeployment, p: ScenarioParams) -> Scenario:
    assert isinstance(p, HeadroomParams)
    d = p.duration_s or 2 * 3600.0
    w = model.workload
    ms = sizing_mod.size_model(spec, model)
    lm = lean(model)
    lms = sizing_mod.size_model(spec, lm)
    sized = {r.role: sizing_mod.role_headroom(spec, lm, lms, r) for r in lms.roles}
    spare = {role: p.spare_replicas if p.spare_replicas is not None else max(1, h.replicas) for role, h in sized.items()}
    pods = sum(spare.values()) * lms.shape.pods
    profile = plateau_profile(w.base_rps, w.peak_rps, d, rise_at=0.15, peak_from=0.25, peak_until=0.75, back_at=0.85)
    setup = make_setup(spec, model, ms, d, spot_rate_per_node_hour=p.spot_interruptions_per_node_hour)
    lean_sizing = {r.role: r for r in lms.roles}
    lean_initial = {r.role: base_replicas(r) for r in lms.roles}
    lean_target = sizing_mod.PREFILL_TARGET_UTILISATION
    warm_targets = ", ".join(f"{r.role} {r.target_utilisation:g}" for r in ms.roles)
    spare_text = ", ".join(f"{role} {n}" for role, n in spare.items())
    nodes = math.ceil(pods * lms.shape.gpus_per_pod / setup.gpus_per_node)
    common = {"sizing": lean_sizing, "initial_replicas": lean_initial}
    # the rule the emitted wiring follows (kai_wiring): a model with placeholder headroom waives the delay
    emitted_delay = headroom_mod.serving_preemption_delay_s("placeholder-pods", ms.preemption_delay_s)
    variants = [
        variant(NO_HEADROOM, f"gpuscale's autoscaler at target {lean_target:g}: a scale-up waits for its node",
                GpuscalePolicy(), spec, model, **common),
        variant(WARM_REPLICAS, f"gpuscale's autoscaler as sized for the stack (target {warm_targets}): running "
                f"replicas carry the burst", GpuscalePolicy(), spec, model),
        variant(WARM_NODES, f"target {lean_target:g} + a CapacityBuffer of {pods} virtual pod(s) ({spare_text} "
                f"replicas, {nodes} node(s)): a scale-up binds at once, then pulls the image",
                GpuscalePolicy(), spec, model, headroom=HeadroomSim(pods=pods, resync_s=headroom_mod.BUFFER_RESYNC_S),
                **common),
        variant(WARM_NODES_IMAGE, f"target {lean_target:g} + placeholder pods of the same size, which pull the vLLM "
                f"image on the spare nodes and are preempted at once (serving preemption delay {emitted_delay} s, as "
                f"gpuscale emits it for placeholder headroom)",
                GpuscalePolicy(), spec, model,
                headroom=HeadroomSim(pods=pods, resync_s=headroom_mod.BUFFER_RESYNC_S, prepull=True,
                                     preemption_delay_s=emitted_delay), **common),
        variant(PLACEHOLDERS_DELAYED, f"the same placeholders, but the serving pods keep the node-time preemption delay "
                f"({ms.preemption_delay_s} s): a replica evicts a placeholder only after pending that long",
                GpuscalePolicy(), spec, model,
                headroom=HeadroomSim(pods=pods, resync_s=headroom_mod.BUFFER_RESYNC_S, prepull=True,
                                     preemption_delay_s=ms.preemption_delay_s), **common),
        ceiling_variant(spec, model, setup),
    ]
    return Scenario(
        name="headroom",
        description=(
            f"The stack's traffic for {model.name} ({model.serving.mode}): {w.base_rps:g} req/s, a ramp to "
            f"{w.peak_rps:g} req/s, peak, back; bursts x{w.burst.multiplier:g} for {w.burst.duration_s:g} s, "
            f"{w.burst.per_hour:g}/h. No headroom, warm replicas, and warm nodes ({spare_text} replicas' worth) kept by "
            f"a CapacityBuffer or by placeholder pods."
        ),
        setup=setup, traffic=synthetic(model, profile, bursts=True), variants=variants,
        parameters={
            "base_rps": w.base_rps, "peak_rps": w.peak_rps, "burst_multiplier": w.burst.multiplier,
            "burst_duration_s": w.burst.duration_s, "bursts_per_hour": w.burst.per_hour, "spare_pods": pods,
            "spare_nodes": nodes, "node_wait_s": next(iter(sized.values())).node_wait_s,
            "cold_start_s": round(ms.cold_start.total_s, 1), "lean_target": lean_target,
            "usd_per_gpu_hour": setup.usd_per_gpu_hour,
        },
    )


def _line(r: PolicyResult) -> str:
    n = r.nodes
    return (f"{r.name}: {r.misses.total:,} missed, {n.scale_ups} scale-up(s) ready after {fmt_s(n.scale_up_ready_mean_s)} "
            f"on average (p90 {fmt_s(n.scale_up_ready_p90_s)}), {r.gpu_hours:,.1f} GPU-h, ${r.cost_usd:,.0f}")


def findings(sc: Scenario, res: ScenarioResult) -> list[str]:
    by = {r.name: r for r in res.results}
    out = [_line(r) for r in res.policies]
    base = by.get(NO_HEADROOM)
    if base is not None:
        for name in (WARM_REPLICAS, WARM_NODES, WARM_NODES_IMAGE, PLACEHOLDERS_DELAYED):
            r = by.get(name)
            if r is None:
                continue
            saved, extra = base.misses.total - r.misses.total, r.cost_usd - base.cost_usd
            per = f", ${1000 * extra / saved:,.2f} per 1,000 requests saved" if saved > 0 and extra > 0 else ""
            out.append(f"{name} vs {NO_HEADROOM}: {saved:+,} requests on time, ${extra:+,.0f}{per}")
    return out + comparison_lines(res)


register(ScenarioDef(
    name="headroom", summary="no headroom vs warm replicas vs warm nodes (CapacityBuffer, placeholder pods)",
    params=HeadroomParams, build=build, findings=findings, plan_section="layer1", plan_order=5,
))
