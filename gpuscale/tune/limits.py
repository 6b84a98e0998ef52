"""Can the stack's limits carry the trace? If not, what to raise and by how much.

The ceiling (every role at the most replicas the stack's limits allow, ready all the time) is the best any autoscaler
can do within them. When it misses the SLO's goodput target on the trace, no tuning helps: the limits do. The check
raises the ceiling's replica counts (all roles in proportion, 1.5x to 8x) on a pool with no GPU limit until the
goodput target is met, then names every limit below that count: the NodePool's ``gpu_limit``, the leaf queue's quota
(or the tightest limit on its path, for a preemptible queue) and an explicit ``max_replicas``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuscale import sizing as sizing_mod
from gpuscale.sim.metrics import PolicyResult
from gpuscale.spec.platform import PlatformSpec
from gpuscale.tune.evaluate import TraceBench
from gpuscale.tune.params import model_of

RAISE_FACTORS = (1.5, 2.0, 3.0, 4.0, 6.0, 8.0)


@dataclass(frozen=True)
class LimitsVerdict:
    carries: bool
    ceiling: PolicyResult
    goodput_target: float
    counts: dict[str, int]
    """The ceiling's replicas per role."""
    needed: dict[str, int] | None = None
    """Replicas per role that meet the goodput target (None: none tried did)."""
    reached: PolicyResult | None = None
    """The run at ``needed`` (or at the largest count tried)."""
    raises: tuple[str, ...] = ()
    """One line per limit to raise: the stack-file path, from, to."""

    def message(self, model: str) -> str:
        c = self.ceiling
        have = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        head = (
            f"{model}: even with every replica the stack's limits allow ready all the time ({have}), "
            f"{c.slo_attainment_servable:.1%} of the trace's servable requests are on time, below the goodput target "
            f"{self.goodput_target:.0%}; no autoscaling setting can do better, the limits must rise."
        )
        if self.needed is None or self.reached is None:
            tried = self.reached
            return head + (
                f" At {RAISE_FACTORS[-1]:g} times those replicas the attainment is still "
                f"{tried.slo_attainment_servable:.1%}" if tried is not None else ""
            ) + (
                ": the misses are not a matter of replicas (each request is served too slowly even with capacity to "
                "spare, e.g. ITL under chunked prefill); change the SLO, the parallelism or the serving mode."
            )
        want = ", ".join(f"{k} {v}" for k, v in self.needed.items())
        return head + (
            f" With {want} replicas the ceiling reaches {self.reached.slo_attainment_servable:.1%}. Raise: "
            + "; ".join(self.raises) + "."
        )


def check_limits(bench: TraceBench, spec: PlatformSpec, ceiling: PolicyResult) -> LimitsVerdict:
    model = model_of(spec, bench.model_name)
    target = model.slo.goodput_target
    counts = bench.ceiling_counts(spec)
    if ceiling.slo_attainment_servable >= target:
        return LimitsVerdict(True, ceiling, target, counts)
    last: PolicyResult | None = None
    for f in RAISE_FACTORS:
        raised = {k: max(v + 1, math.ceil(v * f)) for k, v in counts.items()}
        last = bench.run_fixed(spec, raised)
        if last.slo_attainment_servable >= target:
            return LimitsVerdict(False, ceiling, target, counts, raised, last, tuple(_raises(spec, bench.model_name, raised)))
    return LimitsVerdict(False, ceiling, target, counts, None, last)


def _raises(spec: PlatformSpec, model_name: str, needed: dict[str, int]) -> list[str]:
    """What to raise so the model's roles can run ``needed`` replicas while every other model keeps its warm minimum:
    each GPU bound (``sizing.gpu_bounds``: queue quotas and limits, pool limits) the sum would exceed."""
    model = model_of(spec, model_name)
    i = [m.name for m in spec.models].index(model_name)
    sized = {ms.model: ms for ms in sizing_mod.size_platform(spec).models}
    gpus_of: dict[sizing_mod.RoleKey, int] = {}
    for name, ms in sized.items():
        for r in ms.roles:
            n = needed.get(r.role, r.min_replicas) if name == model_name else r.min_replicas
            gpus_of[(name, r.role)] = n * ms.shape.gpus
    pools = [p.name for p in spec.topology.gpu_pools]
    out: list[str] = []
    for bound in sizing_mod.gpu_bounds(spec):
        if not any(m == model_name for m, _ in bound.roles):
            continue
        used = sizing_mod.bound_usage(bound, gpus_of)
        if used <= bound.gpus:
            continue
        if bound.kind == "pool_gpu_limit":
            out.append(f"topology.gpu_pools[{pools.index(bound.name)}].gpu_limit from {bound.gpus:g} to {used} GPUs")
        else:
            out.append(f"the {bound.name} queue's {bound.kind} from {bound.gpus:g} to {used} GPUs")
    for role, n in needed.items():
        stated = model.autoscaling.role(role).max_replicas  # type: ignore[arg-type]
        if stated is not None and stated < n:
            out.append(f"models[{i}].autoscaling.{role}.max_replicas from {stated} to {n}")
    if not out:
        out.append(f"the maximum of each role to {', '.join(f'{k} {v}' for k, v in needed.items())} replicas")
    return out
