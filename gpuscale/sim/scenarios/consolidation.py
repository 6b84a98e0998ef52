"""``consolidation-24x7``: a day of diurnal traffic under three node-removal settings."""

from __future__ import annotations

import math

from gpuscale import sizing as sizing_mod
from gpuscale.sim import nodes as N
from gpuscale.sim.metrics import ScenarioResult
from gpuscale.sim.policies import GpuscalePolicy
from gpuscale.sim.scenarios.base import Scenario, ScenarioDef, ScenarioParams, make_setup, register, synthetic, variant
from gpuscale.sim.traffic import diurnal_profile
from gpuscale.spec.catalogue import CATALOGUE
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec

DAY_S = 86_400.0


class ConsolidationParams(ScenarioParams):
    pass


def build(spec: PlatformSpec, model: ModelDeployment, p: ScenarioParams) -> Scenario:
    d = p.duration_s or DAY_S
    ms = sizing_mod.size_model(spec, model)
    w = model.workload
    profile = diurnal_profile(w.base_rps, w.peak_rps, d, w.peak_hours_per_day)
    pool = spec.topology.pool(model.node_pool)
    after = max(pool.consolidate_after_s, 3600.0)
    # the middle ground: still never evicts a serving pod, but gives empty nodes back after a quarter hour
    # (or twice the cold start, if longer), so a dip shorter than that keeps its nodes
    short = max(900.0, math.ceil(2 * ms.cold_start.total_s / 300.0) * 300.0)
    variants = [
        variant("when-empty-1h", f"WhenEmpty, consolidateAfter {after / 3600:g}h (gpuscale's default)", GpuscalePolicy(),
                spec, model, consolidation=N.when_empty(after)),
        variant(f"when-empty-{short / 60:g}m", f"WhenEmpty, consolidateAfter {short / 60:g}m (>= 2x the cold start)",
                GpuscalePolicy(), spec, model, consolidation=N.when_empty(short)),
        variant("when-empty-or-underutilized", "WhenEmptyOrUnderutilized, consolidateAfter 0s (Karpenter's default)",
                GpuscalePolicy(), spec, model, consolidation=N.when_empty_or_underutilized(0.0)),
    ]
    return Scenario(
        name="consolidation-24x7",
        description=(
            f"A 24x7 service over one day{' compressed into ' + format(d / 3600, 'g') + ' h' if d != DAY_S else ''}: "
            f"base {w.base_rps:g} req/s, {w.peak_hours_per_day:g} h at {w.peak_rps:g} req/s, bursts as specified, "
            "gpuscale's autoscaler. Compared: WhenEmpty after 1 h, WhenEmpty after a shorter quiet period, and "
            "WhenEmptyOrUnderutilized (repacks half-empty nodes by evicting replicas)."
        ),
        setup=make_setup(spec, model, ms, d, spot_rate_per_node_hour=p.spot_interruptions_per_node_hour),
        traffic=synthetic(model, profile, bursts=True), variants=variants,
        parameters={"day_s": d, "per_day_factor": round(DAY_S / d, 6), "base_rps": w.base_rps, "peak_rps": w.peak_rps,
                    "peak_hours": w.peak_hours_per_day,
                    "replicas_per_node": CATALOGUE[ms.shape.instance_type].gpus_per_node // ms.shape.gpus},
    )


def findings(sc: Scenario, res: ScenarioResult) -> list[str]:
    f = float(sc.parameters.get("per_day_factor", 1.0))
    out = []
    for r in res.results:
        out.append(
            f"{r.name}: {r.lost_in_flight * f:.0f} requests lost in flight per day, {r.evictions * f:.1f} evictions per "
            f"day, {r.eviction_reload_gpu_minutes * f / 60:.1f} GPU-hours of reloads per day "
            f"(${r.eviction_reload_gpu_minutes * f / 60 * sc.setup.usd_per_gpu_hour:,.0f}), {r.unanswered * f:.0f} "
            f"unanswered and {r.misses.total * f:,.0f} missed requests per day, {r.gpu_hours * f:,.0f} GPU-h per day"
        )
    cheap = min(res.results, key=lambda r: r.gpu_hours)
    safe = [r for r in res.results if r.evictions == 0]
    if safe and cheap.evictions:
        best_safe = min(safe, key=lambda r: r.gpu_hours)
        out.append(
            f"{cheap.name} spends {(1 - cheap.gpu_hours / best_safe.gpu_hours):.0%} fewer GPU-hours than {best_safe.name}, "
            f"the cheapest setting that never evicts, at the price of {cheap.evictions * f:.0f} evictions and "
            f"{cheap.lost_in_flight * f:.0f} requests lost in flight per day"
        )
    return out


register(ScenarioDef(
    name="consolidation-24x7", summary="a diurnal day under WhenEmpty vs WhenEmptyOrUnderutilized",
    params=ConsolidationParams, build=build, findings=findings, plan_section="layer1", plan_order=2,
    columns=("policy", "evictions_day", "lost_day", "unanswered_day", "gpu_hours_day", "cost_day", "attainment"),
))
