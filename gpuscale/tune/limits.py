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
from typing import Any

from gpuscale import sizing as sizing_mod
from gpuscale.sim.metrics import PolicyResult
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.teams import UNLIMITED
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


@dataclass(frozen=True)
class Raise:
    """One limit below what the trace needs: a queue's quota or limit, a pool's GPU limit, or a stated maximum."""

    kind: str
    """``gpu_quota``, ``gpu_limit``, ``pool_gpu_limit`` or ``max_replicas``."""
    name: str
    """The queue, the pool, or the role."""
    path: str
    """How ``message`` names it (a stack-file path where it has one)."""
    before: float
    after: int

    @property
    def line(self) -> str:
        unit = "" if self.kind == "max_replicas" else " GPUs"
        return f"{self.path} from {self.before:g} to {self.after}{unit}"


def raises_for(spec: PlatformSpec, model_name: str, needed: dict[str, int]) -> list[Raise]:
    """What to raise so the model's roles can run ``needed`` replicas while every other model keeps its warm minimum:
    each GPU bound (``sizing.gpu_bounds``: queue quotas and limits, pool limits) the sum would exceed, and each stated
    ``max_replicas`` below it."""
    model = model_of(spec, model_name)
    i = [m.name for m in spec.models].index(model_name)
    sized = {ms.model: ms for ms in sizing_mod.size_platform(spec).models}
    gpus_of: dict[sizing_mod.RoleKey, int] = {}
    for name, ms in sized.items():
        for r in ms.roles:
            n = needed.get(r.role, r.min_replicas) if name == model_name else r.min_replicas
            gpus_of[(name, r.role)] = n * ms.shape.gpus
    pools = [p.name for p in spec.topology.gpu_pools]
    out: list[Raise] = []
    for bound in sizing_mod.gpu_bounds(spec):
        if not any(m == model_name for m, _ in bound.roles):
            continue
        used = sizing_mod.bound_usage(bound, gpus_of)
        if used <= bound.gpus:
            continue
        if bound.kind == "pool_gpu_limit":
            out.append(Raise(bound.kind, bound.name, f"topology.gpu_pools[{pools.index(bound.name)}].gpu_limit", bound.gpus, used))
        else:
            out.append(Raise(bound.kind, bound.name, f"the {bound.name} queue's {bound.kind}", bound.gpus, used))
    out += _pool_for_quotas(spec, model.node_pool, out)
    for role, n in needed.items():
        stated = model.autoscaling.role(role).max_replicas  # type: ignore[arg-type]
        if stated is not None and stated < n:
            out.append(Raise("max_replicas", role, f"models[{i}].autoscaling.{role}.max_replicas", stated, n))
    return out


def _pool_for_quotas(spec: PlatformSpec, pool: str, todo: list[Raise]) -> list[Raise]:
    """The model's pool raised so the top-level quotas after ``todo`` still fit every pool's limit together (a quota
    the nodes can never provide is refused, ``feasibility._quotas``): raising a leaf's quota raises its parents' to
    their children's sum, which may pass the pools' total even when the model's own pool had room. A raise of that pool
    already in ``todo`` is taken out of it and returned merged."""
    raw = _with_queue_raises(spec, todo)
    quota = sum(float(q.get("gpu_quota", 0.0)) for q in raw)
    limits = {p.name: p.gpu_limit for p in spec.topology.gpu_pools}
    for r in todo:
        if r.kind == "pool_gpu_limit":
            limits[r.name] = max(limits[r.name], r.after)
    excess = math.ceil(quota - sum(limits.values()))
    if excess <= 0:
        return []
    j = [p.name for p in spec.topology.gpu_pools].index(pool)
    current = next((r for r in todo if r.kind == "pool_gpu_limit" and r.name == pool), None)
    if current is not None:
        todo.remove(current)
    before = spec.topology.gpu_pools[j].gpu_limit
    return [Raise("pool_gpu_limit", pool, f"topology.gpu_pools[{j}].gpu_limit", before, limits[pool] + excess)]


def _with_queue_raises(spec: PlatformSpec, todo: list[Raise]) -> list[dict[str, Any]]:
    """The stack's team tree (as written) with ``todo``'s quota and limit raises applied, children first: a parent's
    quota holds its children's, and a limit is never below the quota."""
    teams: list[dict[str, Any]] = spec.model_dump(mode="json", exclude_unset=True, by_alias=True)["teams"]

    def walk(queues: list[dict[str, Any]]) -> None:
        for q in queues:
            walk(q.get("children", []))  # children first: a parent's quota holds its children's
            for r in todo:
                if r.name == q["name"] and r.kind in ("gpu_quota", "gpu_limit"):
                    q[r.kind] = max(float(q.get(r.kind, 0.0)), float(r.after))
            children = sum(float(c.get("gpu_quota", 0.0)) for c in q.get("children", []))
            if children > float(q.get("gpu_quota", 0.0)):
                q["gpu_quota"] = children
            limit = float(q.get("gpu_limit", UNLIMITED))
            if limit != UNLIMITED and limit < float(q.get("gpu_quota", 0.0)):
                q["gpu_limit"] = q["gpu_quota"]  # a limit is never below the quota

    walk(teams)
    return teams


def _raises(spec: PlatformSpec, model_name: str, needed: dict[str, int]) -> list[str]:
    out = [r.line for r in raises_for(spec, model_name, needed)]
    return out or [f"the maximum of each role to {', '.join(f'{k} {v}' for k, v in needed.items())} replicas"]


def with_raised_limits(spec: PlatformSpec, model_name: str, needed: dict[str, int]) -> PlatformSpec:
    """The spec with every limit ``raises_for`` names raised to what ``needed`` takes (what ``tune``'s message tells
    the user to do), and each role's maximum at least ``needed``; validated again."""
    raw = spec.model_dump(mode="json", exclude_unset=True, by_alias=True)
    full = spec.model_dump(mode="json")
    todo = raises_for(spec, model_name, needed)
    raw["teams"] = _with_queue_raises(spec, todo)
    pools = raw["topology"]["gpu_pools"]
    for r in todo:
        if r.kind == "pool_gpu_limit":
            j = [p.name for p in spec.topology.gpu_pools].index(r.name)
            pools[j]["gpu_limit"] = r.after
    i = [m.name for m in spec.models].index(model_name)
    auto = raw["models"][i].setdefault("autoscaling", {})
    for role, n in needed.items():
        entry = auto.setdefault(role, {})
        entry["max_replicas"] = max(int(entry.get("max_replicas", 0)), n)
    for k, m in enumerate(spec.models):  # trace paths were resolved when the stack was read
        if m.workload.trace is not None:
            raw["models"][k]["workload"]["trace"] = full["models"][k]["workload"]["trace"]
    return PlatformSpec.model_validate(raw)
