"""The autoscaling parameters ``gpuscale tune`` searches, read from and applied to a spec.

Per role: the load signal's target (derived from the SLO, or a stated utilisation), burst mode, the SLO guard (KEDA), the warm minimum, the maximum and the
scale-down stabilisation window; per model: the predictive warm-up windows; per pool: ``consolidate_after``. Applying
a point validates the whole spec again, so a point the spec refuses (a minimum above the maximum) is never simulated.
"""

from __future__ import annotations

import math
from typing import Any

from gpuscale.guardrails import consolidation
from gpuscale.sizing import ModelSizing, size_model
from gpuscale.spec.base import Spec, duration_seconds
from gpuscale.spec.model import ModelDeployment, Role, WakeSchedule
from gpuscale.spec.platform import PlatformSpec


class RoleParams(Spec):
    """One role's searched values (all explicit: what ``gpuscale tune`` writes)."""

    target_utilisation: float | None
    """None: the load signal's target is derived from the SLO (``sizing.derived_target``; nothing is written)."""
    burst_mode: bool
    slo_guard: bool
    min_replicas: int
    max_replicas: int
    scale_down_stabilization_s: int
    warm_schedule: list[WakeSchedule] = []


class TuneParams(Spec):
    """A point of the search: every role's values and the pool's ``consolidate_after``."""

    roles: dict[str, RoleParams]
    consolidate_after: str

    def key(self) -> str:
        """A stable identity (the evaluation cache key)."""
        return self.model_dump_json()

    def replace_role(self, role: str, **changes: Any) -> TuneParams:
        roles = dict(self.roles)
        roles[role] = roles[role].model_copy(update=changes)
        return self.model_copy(update={"roles": roles})


def model_of(spec: PlatformSpec, name: str) -> ModelDeployment:
    return next(m for m in spec.models if m.name == name)


def current_params(spec: PlatformSpec, model_name: str) -> TuneParams:
    """The values the stack runs with now: what it states, else what sizing derives."""
    model = model_of(spec, model_name)
    ms: ModelSizing = size_model(spec, model)
    roles: dict[str, RoleParams] = {}
    for rs in ms.roles:
        stated = model.autoscaling.role(rs.role)
        roles[rs.role] = RoleParams(
            target_utilisation=None if rs.derived_target else rs.target_utilisation, burst_mode=rs.burst_mode,
            slo_guard=any(s.purpose == "guard" for s in rs.signals),
            min_replicas=rs.min_replicas, max_replicas=rs.max_replicas,
            scale_down_stabilization_s=rs.scale_down_stabilization_s, warm_schedule=list(stated.warm_schedule),
        )
    pool = spec.topology.pool(model.node_pool)
    return TuneParams(roles=roles, consolidate_after=pool.consolidate_after)


def apply(spec: PlatformSpec, model_name: str, params: TuneParams, *, tuned_on: str | None = None) -> PlatformSpec:
    """The spec with ``params`` written into the model's autoscaling and its pool (validated again)."""
    raw = spec.model_dump(mode="json", exclude_unset=True, by_alias=True)
    full = spec.model_dump(mode="json")
    models = raw["models"]
    i = [m.name for m in spec.models].index(model_name)
    model = spec.models[i]
    auto = dict(models[i].get("autoscaling", {}))
    keda = model.autoscaling.backend == "keda"
    for role, p in params.roles.items():
        entry = dict(auto.get(role, {}))
        entry.update(
            target_utilisation=p.target_utilisation, burst_mode=p.burst_mode, min_replicas=p.min_replicas,
            max_replicas=p.max_replicas, scale_down_stabilization_s=p.scale_down_stabilization_s,
        )
        if p.target_utilisation is None:  # derived from the SLO: no stated utilisation
            del entry["target_utilisation"]
        if keda:
            entry["slo_guard"] = p.slo_guard
            entry["warm_schedule"] = [w.model_dump(mode="json") for w in p.warm_schedule]
        auto[role] = entry
    if tuned_on is not None:
        auto["tuned_on"] = tuned_on
    models[i] = {**models[i], "autoscaling": auto}
    pools = raw["topology"]["gpu_pools"]
    j = [p.name for p in spec.topology.gpu_pools].index(model.node_pool)
    pools[j] = {**pools[j], "consolidate_after": params.consolidate_after}
    # trace paths were resolved when the stack was read: keep them as they are
    for k, m in enumerate(spec.models):
        if m.workload.trace is not None:
            models[k]["workload"]["trace"] = full["models"][k]["workload"]["trace"]
    return PlatformSpec.model_validate(raw)


def consolidate_after_candidates(spec: PlatformSpec, model_name: str, cold_start_s: float) -> list[str]:
    """``consolidate_after`` values the search may try: the current one, then the rule's floor (``max(1h, cold
    start)``, ``gpuscale.guardrails.consolidation``) and twice it; a pool that acknowledges short consolidation may
    also try the cold start itself (rounded up to 5 minutes) and 30 minutes, never below the cold start."""
    pool = spec.topology.pool(model_of(spec, model_name).node_pool)
    current = pool.consolidate_after
    floor = consolidation.floor_s(cold_start_s)
    options = [_minutes(floor), _minutes(2 * floor)]
    if pool.acknowledge_underutilized_consolidation_evicts_inference:
        options = [_minutes(max(300.0, -(-cold_start_s // 300) * 300)), "30m", *options]
    out = [current]
    for o in options:
        if o not in out and duration_seconds(o) >= cold_start_s:
            out.append(o)
    return out


def _minutes(seconds: float) -> str:
    """A Karpenter duration of whole minutes (``1h``, ``2h``, ``75m``) at least ``seconds`` long."""
    minutes = math.ceil(seconds / 60)
    return f"{minutes // 60}h" if minutes % 60 == 0 else f"{minutes}m"


def role_names(params: TuneParams) -> list[Role]:
    return [r for r in ("aggregated", "prefill", "decode") if r in params.roles]
