"""``2am-huge-prompt``: one 1M-token prompt reaches an empty GPU pool (the model's long-context variant if needed)."""

from __future__ import annotations

import math

from pydantic import Field

from gpuscale import sizing as sizing_mod
from gpuscale.sim import nodes as N
from gpuscale.sim.metrics import ScenarioResult
from gpuscale.sim.policies import GpuscalePolicy
from gpuscale.sim.replica import replica_model_from_sizing
from gpuscale.sim.scenarios.base import Scenario, ScenarioDef, ScenarioParams, fmt_s, make_setup, register, variant
from gpuscale.sim.traffic import HugePrompt, RatePoint, SyntheticTraffic
from gpuscale.spec.model import ModelDeployment, ParallelismSpec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.workload import TokenDistribution


class TwoAmParams(ScenarioParams):
    prompt_tokens: int = Field(default=1_000_000, gt=0)
    output_tokens: int = Field(default=256, gt=0)
    arrival_s: float = Field(default=120.0, ge=0)


def long_context_variant(
    spec: PlatformSpec, model: ModelDeployment, tokens: int, output: int,
) -> tuple[ModelDeployment, sizing_mod.ModelSizing]:
    """The model re-sized so one ``tokens``-token prompt fits, or the model itself when it already does."""
    ms = sizing_mod.size_model(spec, model)
    if tokens + output <= min(model.architecture.max_context_tokens, ms.kv_capacity_tokens):
        return model, ms
    arch = model.architecture.model_copy(update={"max_context_tokens": tokens + output})
    longer = model.model_copy(update={"architecture": arch, "parallelism": ParallelismSpec()})
    return longer, sizing_mod.size_model(spec, longer)


def build(spec: PlatformSpec, model: ModelDeployment, p: ScenarioParams) -> Scenario:
    assert isinstance(p, TwoAmParams)
    tokens, output = p.prompt_tokens, p.output_tokens
    try:
        big, ms = long_context_variant(spec, model, tokens, output)
    except sizing_mod.SizingError:
        ms0 = sizing_mod.size_model(spec, model)
        tokens = min(tokens, ms0.kv_capacity_tokens, model.architecture.max_context_tokens) - output
        big, ms = model, ms0
    replica = replica_model_from_sizing(big, ms)
    warm_ttft = replica.idle_prefill_s(tokens)
    # the client of a huge prompt waits its prefill on top of the usual timeout: with less, no policy could answer
    timeout = math.ceil(model.slo.request_timeout_s + warm_ttft)
    d = p.duration_s or p.arrival_s + 60.0
    setup = make_setup(spec, big, ms, d, initial=lambda r: 0, spot_rate_per_node_hour=p.spot_interruptions_per_node_hour)
    traffic = SyntheticTraffic(
        profile=[RatePoint(t_s=0, rps=0)],
        prompt_tokens=TokenDistribution(mean=1, p99=1), output_tokens=TokenDistribution(mean=1, p99=1),
        huge_prompts=[HugePrompt(at_s=p.arrival_s, prompt_tokens=tokens, output_tokens=output, timeout_s=timeout)],
    )
    cold = GpuscalePolicy(min_replicas=0, count_gateway_queue=True, activation_threshold=0.0)
    prov = spec.topology.provisioning
    shape = ms.shape
    variants = [
        variant("cluster-autoscaler", "scale from zero; Cluster Autoscaler node group", cold, spec, big,
                provisioner=N.cluster_autoscaler(prov), consolidation=N.cluster_autoscaler_scale_down()),
        variant("karpenter", "scale from zero; Karpenter", cold, spec, big, provisioner=N.karpenter(prov)),
        variant("karpenter+warm-pool", "Karpenter plus one warm replica (min_replicas 1)",
                GpuscalePolicy(min_replicas=1), spec, big, provisioner=N.karpenter(prov),
                initial_replicas={r.role: 1 for r in setup.roles}),
    ]
    return Scenario(
        name="2am-huge-prompt",
        description=(
            f"2 a.m., the GPU pool is empty. One {tokens:,}-token prompt arrives at t={p.arrival_s:.0f} s; its client "
            f"waits {timeout} s for the first token (the {model.slo.request_timeout_s:g} s timeout plus the prompt's own "
            f"{warm_ttft:.0f} s prefill on a warm replica). Compared: Cluster Autoscaler from zero, Karpenter from zero, "
            "Karpenter with one warm replica."
        ),
        setup=setup, traffic=traffic, variants=variants,
        parameters={
            "prompt_tokens": tokens, "output_tokens": output, "arrival_s": p.arrival_s, "client_timeout_s": timeout,
            "warm_prefill_s": round(warm_ttft, 1), "long_context_variant": big is not model,
            "tensor_parallel_size": shape.tensor_parallel_size, "pipeline_parallel_size": shape.pipeline_parallel_size,
            "replica_gpus": shape.gpus, "instance_type": shape.instance_type,
        },
    )


def findings(sc: Scenario, res: ScenarioResult) -> list[str]:
    out: list[str] = []
    for r in res.results:
        if not r.tracked:
            continue
        t = r.tracked[0]
        lat = r.nodes.first_ready_latency_s
        node = f"first node ready {fmt_s(lat)} after the pod went Pending" if lat is not None else "no new node"
        fate = t.outcome.replace("_", " ")
        out.append(
            f"{r.name}: {node}; the {t.prompt_tokens:,}-token request {fate}"
            + (f" (TTFT {t.ttft_s:.0f} s of {t.timeout_s:.0f} s allowed)" if t.ttft_s is not None
               else f" (client timeout {t.timeout_s:.0f} s)")
        )
    answered = [r.name for r in res.results if r.tracked and r.tracked[0].outcome == "completed"]
    out.append("answered by: " + (", ".join(answered) if answered else "none of the variants"))
    return out


register(ScenarioDef(
    name="2am-huge-prompt", summary="one 1M-token prompt on an empty pool", params=TwoAmParams, build=build,
    findings=findings, plan_section="cold-start", plan_order=4, columns=("policy", "tracked", "first_node", "gpu_hours"),
))
