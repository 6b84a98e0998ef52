"""``peak-hour``: a morning ramp from base to peak load on one aggregated deployment behind one autoscaler."""

from __future__ import annotations

from pydantic import Field

from gpuscale import sizing as sizing_mod
from gpuscale.sim.metrics import ScenarioResult
from gpuscale.sim.policies import DutyCyclePolicy, QueueDepthPolicy
from gpuscale.sim.scenarios.base import (
    Scenario,
    ScenarioDef,
    ScenarioParams,
    as_aggregated,
    autoscaler_variants,
    comparison_lines,
    fmt_s,
    make_setup,
    missed_between,
    register,
    replicas_reached_at,
    synthetic,
    ttft_window,
    window_mean,
)
from gpuscale.sim.traffic import plateau_profile
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec


class PeakHourParams(ScenarioParams):
    manual_add_at_s: float = Field(default=600.0, ge=0)
    """When the operator adds one replica by hand (the duty-cycle HPA's second variant)."""
    ramp_start_s: float = Field(default=120.0, ge=0)
    ramp_s: float = Field(default=120.0, gt=0)
    """Base to peak within this long."""


def build(spec: PlatformSpec, model: ModelDeployment, p: ScenarioParams) -> Scenario:
    assert isinstance(p, PeakHourParams)
    d = p.duration_s or 3600.0
    disaggregated = model.serving.mode == "disaggregated"
    model = as_aggregated(model)
    ms = sizing_mod.size_model(spec, model)
    w = model.workload
    rise, peak_from = p.ramp_start_s / d, (p.ramp_start_s + p.ramp_s) / d
    profile = plateau_profile(w.base_rps, w.peak_rps, d, rise_at=rise, peak_from=peak_from, peak_until=2.0, back_at=3.0)
    setup = make_setup(spec, model, ms, d, spot_rate_per_node_hour=p.spot_interruptions_per_node_hour)
    return Scenario(
        name="peak-hour",
        description=(
            f"The peak hour starts: {w.base_rps:g} -> {w.peak_rps:g} req/s within {p.ramp_s / 60:g} min at "
            f"{p.ramp_start_s / 60:g} min, then holds, on one aggregated vLLM deployment behind one autoscaler"
            f"{' (the user set-up; the stack serves it disaggregated)' if disaggregated else ''}. The duty-cycle HPA runs "
            f"twice, the second time with one replica added by hand at {p.manual_add_at_s / 60:g} min."
        ),
        setup=setup, traffic=synthetic(model, profile, bursts=False),
        variants=autoscaler_variants(spec, model, setup, manual_add_at_s=p.manual_add_at_s),
        parameters={
            "base_rps": w.base_rps, "peak_rps": w.peak_rps, "ramp_start_s": round(rise * d), "peak_from_s": round(peak_from * d),
            "manual_add_at_s": p.manual_add_at_s, "duty_cycle_target": DutyCyclePolicy().target,
            "queue_depth_target": QueueDepthPolicy().queue_target, "serving_mode": "aggregated",
            "stack_serving_mode": "disaggregated" if disaggregated else "aggregated",
            "cold_start_s": round(ms.cold_start.total_s, 1), "replicas_at_peak": ms.roles[0].replicas_at_peak,
        },
    )


def findings(sc: Scenario, res: ScenarioResult) -> list[str]:
    out: list[str] = []
    first = sc.setup.roles[0].role
    d = sc.setup.duration_s
    p = sc.parameters
    surge, peak_from = float(p["ramp_start_s"]), float(p["peak_from_s"])
    after = peak_from + float(p["cold_start_s"])
    need = int(p["replicas_at_peak"])
    until = min(after + 900.0, d)
    for r in res.policies:
        util = window_mean(r, first, "duty_cycle", peak_from, d)
        reach = replicas_reached_at(r, first, need, surge)
        out.append(
            f"{r.name}: duty cycle {util or 0:.0%} over the peak; {need} ready replicas (the sized peak) "
            f"{'after ' + format((reach - surge) / 60, '.1f') + ' min' if reach is not None else 'never'}, up to "
            f"{r.replicas_max[first]}; TTFT p99 {fmt_s(r.ttft_p99_s)}"
        )
    by = {r.name: r for r in res.results}
    duty, manual = by.get("dcgm-duty-cycle"), by.get("dcgm-duty-cycle+manual")
    if duty is not None and manual is not None:
        at = float(p["manual_add_at_s"])
        lo, hi = at + float(p["cold_start_s"]), min(at + float(p["cold_start_s"]) + 600.0, d)
        t0, t1 = ttft_window(duty, lo, hi), ttft_window(manual, lo, hi)
        u0, u1 = window_mean(duty, first, "duty_cycle", lo, hi), window_mean(manual, first, "duty_cycle", lo, hi)
        if t0 is not None and t1 is not None and u0 is not None and u1 is not None:
            verb = "lowers" if t1 < 0.95 * t0 else "raises" if t1 > 1.05 * t0 else "does not change"
            out.append(
                f"the replica added by hand at {at / 60:.0f} min {verb} the median TTFT over the next 10 min "
                f"({t0:.1f} s -> {t1:.1f} s) while the duty cycle reads {u0:.0%} -> {u1:.0%}"
            )
    parts = [f"{r.name} {missed_between(r, after, until):,}" for r in res.results]
    out.append(f"missed after the first cold start ({after / 60:.0f}-{until / 60:.0f} min): " + ", ".join(parts))
    return out + comparison_lines(res)


register(ScenarioDef(
    name="peak-hour", summary="base -> peak load within 2 min on one aggregated autoscaler", params=PeakHourParams,
    build=build, findings=findings,
))
