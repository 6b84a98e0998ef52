"""``gang-7-of-8``: an 8-pod replica is scaled up while only 7 GPUs are free, spread over shared nodes."""

from __future__ import annotations

from gpuscale import sizing as sizing_mod
from gpuscale.sim.inputs import InitialNode, RoleSetup
from gpuscale.sim.metrics import ScenarioResult
from gpuscale.sim.placement import DEFAULT, KAI
from gpuscale.sim.policies import FixedPolicy
from gpuscale.sim.replica import build_replica_model
from gpuscale.sim.scenarios.base import (
    Scenario,
    ScenarioDef,
    ScenarioParams,
    first_ready_s,
    fmt_s,
    make_setup,
    misses_text,
    register,
    synthetic,
    variant,
)
from gpuscale.sim.traffic import RatePoint
from gpuscale.spec.catalogue import CATALOGUE, GpuInstanceType
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec


class GangParams(ScenarioParams):
    pass


def _gang_instance(spec: PlatformSpec, model: ModelDeployment) -> GpuInstanceType:
    pool = spec.topology.pool(model.node_pool)
    big = max(pool.instances, key=lambda it: (it.gpus_per_node, -it.on_demand_usd_per_hour))
    return big if big.gpus_per_node >= 4 else CATALOGUE["p5.48xlarge"]


def largest_model(spec: PlatformSpec) -> ModelDeployment:
    """The trap bites the largest replica."""
    return max(spec.models, key=lambda x: x.architecture.params_b)


def build(spec: PlatformSpec, model: ModelDeployment, p: ScenarioParams) -> Scenario:
    d = p.duration_s or 900.0
    inst = _gang_instance(spec, model)
    per_node = inst.gpus_per_node
    replica = build_replica_model(model, inst, min(4, per_node), 8 // min(4, per_node))
    free = [3, 2, 2] if per_node >= 3 else [1] * 7
    ms = sizing_mod.size_model(spec, model)
    base = make_setup(spec, model, ms, d, initial=lambda r: 0, spot_rate_per_node_hour=p.spot_interruptions_per_node_hour)
    role = base.roles[0].sizing.model_copy(update={"role": "aggregated"})
    setup = base.model_copy(update={
        "replica": replica, "pods_per_replica": 8, "gpus_per_pod": 1, "instance_type": inst.name,
        "gpus_per_node": per_node, "usd_per_gpu_hour": inst.usd_per_gpu_hour, "network_gbps": inst.network_gbps,
        "pool_gpu_limit": max(base.pool_gpu_limit, (len(free) + 2) * per_node),
        "extra_nodes": [InitialNode(foreign_gpus=per_node - f) for f in free],
        "roles": [RoleSetup(role="aggregated", initial_replicas=0, sizing=role)],
        "mode": "aggregated", "prefill_routing": "least-load", "decode_routing": "least-load",
    })
    profile = [RatePoint(t_s=0, rps=min(1.0, model.workload.base_rps))]
    fixed = FixedPolicy(replicas=1)
    variants = [
        variant("default-scheduler", "kube-scheduler binds pods one by one as GPUs free up", fixed, spec, model, scheduler=DEFAULT),
        variant("kai-gang", "KAI PodGroup minMember 8: all pods or none", fixed, spec, model, scheduler=KAI),
    ]
    return Scenario(
        name="gang-7-of-8",
        description=(
            f"A {model.name} replica of 8 GPUs (8 single-GPU worker pods, TP{replica.tensor_parallel_size} x "
            f"PP{replica.pipeline_parallel_size} over {inst.name} nodes) is scaled up while {sum(free)} GPUs are free "
            f"on {len(free)} nodes other tenants share; requests arrive from t = 0. Compared: pod-by-pod binding and a "
            "KAI gang."
        ),
        setup=setup, traffic=synthetic(model, profile, bursts=False), variants=variants,
        parameters={"replica_gpus": 8, "pods_per_replica": 8, "free_gpus_per_node": ",".join(map(str, free)),
                    "instance_type": inst.name, "model": model.name},
    )


def findings(sc: Scenario, res: ScenarioResult) -> list[str]:
    out = []
    for r in res.results:
        out.append(
            f"{r.name}: {r.idle_gpu_minutes.gang_wait:.1f} GPU-minutes bound while waiting for the gang; replica serving "
            f"at {fmt_s(first_ready_s(r))}; {r.completed:,} of {r.arrived:,} completed, {r.slo_attainment:.1%} on time "
            f"(misses: {misses_text(r)}); {r.gpu_hours:.1f} GPU-h on {r.nodes.max_alive} nodes"
        )
    if len(res.results) == 2:
        a, b = res.results
        ra, rb = first_ready_s(a), first_ready_s(b)
        cheaper = a if a.gpu_hours < b.gpu_hours else b
        other = b if cheaper is a else a
        line = f"{cheaper.name} uses {other.gpu_hours - cheaper.gpu_hours:.1f} fewer GPU-hours than {other.name}"
        if ra is not None and rb is not None and abs(ra - rb) < 1.0:
            line += f"; both serve at {ra:.0f} s ({a.slo_attainment:.1%} and {b.slo_attainment:.1%} on time)"
        elif ra is not None and rb is not None:
            first, second = (a, b) if ra < rb else (b, a)
            line += (
                f"; {first.name} serves {abs(rb - ra):.0f} s earlier and has {first.slo_attainment:.1%} vs "
                f"{second.slo_attainment:.1%} on time"
            )
        out.append(line)
    return out


register(ScenarioDef(
    name="gang-7-of-8", summary="an 8-pod replica while 7 GPUs are free on shared nodes", params=GangParams,
    build=build, findings=findings, plan_section="layer2", plan_order=3, pick_model=largest_model,
    columns=("policy", "gang_wait", "first_ready", "attainment", "gpu_hours"),
))
