"""``stack``: the stack's own workload (or its trace) under every autoscaling policy; ``trace``: a trace file."""

from __future__ import annotations

from pathlib import Path

from gpuscale import sizing as sizing_mod
from gpuscale.sim.metrics import ScenarioResult
from gpuscale.sim.scenarios.base import (
    Scenario,
    ScenarioDef,
    ScenarioError,
    ScenarioParams,
    autoscaler_variants,
    comparison_lines,
    make_setup,
    register,
    synthetic,
)
from gpuscale.sim.traffic import TraceTraffic, plateau_profile, trace_granularity_s, trace_span_s
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec


class StackParams(ScenarioParams):
    pass


class TraceParams(ScenarioParams):
    trace: TraceTraffic | None = None
    """The trace to replay (required)."""


def build_stack(spec: PlatformSpec, model: ModelDeployment, p: ScenarioParams) -> Scenario:
    w = model.workload
    if w.trace is not None:
        return _trace(spec, model, TraceTraffic(path=w.trace.path, compress=w.trace.compress), p, "stack")
    d = p.duration_s or 4 * 3600.0
    ms = sizing_mod.size_model(spec, model)
    profile = plateau_profile(w.base_rps, w.peak_rps, d, rise_at=0.2, peak_from=0.3, peak_until=0.7, back_at=0.8)
    setup = make_setup(spec, model, ms, d, spot_rate_per_node_hour=p.spot_interruptions_per_node_hour)
    return Scenario(
        name="stack",
        description=(
            f"The stack's own workload for {model.name} ({model.serving.mode}): {w.base_rps:g} req/s base, ramp to "
            f"{w.peak_rps:g} req/s, peak, ramp down; bursts x{w.burst.multiplier:g} for {w.burst.duration_s:g} s, "
            f"{w.burst.per_hour:g}/h."
        ),
        setup=setup, traffic=synthetic(model, profile, bursts=True), variants=autoscaler_variants(spec, model, setup),
        parameters={"base_rps": w.base_rps, "peak_rps": w.peak_rps, "bursts_per_hour": w.burst.per_hour,
                    "burst_multiplier": w.burst.multiplier},
    )


def build_trace(spec: PlatformSpec, model: ModelDeployment, p: ScenarioParams) -> Scenario:
    assert isinstance(p, TraceParams)
    if p.trace is None:
        raise ScenarioError("scenario trace needs a trace file (--trace FILE)")
    return _trace(spec, model, p.trace, p, "trace")


def _trace(spec: PlatformSpec, model: ModelDeployment, trace: TraceTraffic, p: ScenarioParams, name: str) -> Scenario:
    d = p.duration_s or max(trace_span_s(trace), 60.0)
    ms = sizing_mod.size_model(spec, model)
    grid = trace_granularity_s(trace)
    setup = make_setup(spec, model, ms, d, spot_rate_per_node_hour=p.spot_interruptions_per_node_hour)
    replay = trace.replay if grid is not None else "exact"
    return Scenario(
        name=name,
        description=(
            f"Replay of {Path(trace.path).name} compressed x{trace.compress:g} ({d:.0f} s) on {model.name}"
            + (f"; arrivals recorded in {grid:g} s buckets, replayed {replay}" if grid is not None else "") + "."
        ),
        setup=setup, traffic=trace, variants=autoscaler_variants(spec, model, setup),
        parameters={"trace": Path(trace.path).name, "compress": trace.compress, "replay": replay,
                    "granularity_s": grid if grid is not None else 0.0},
    )


def findings(sc: Scenario, res: ScenarioResult) -> list[str]:
    return comparison_lines(res)


register(ScenarioDef(
    name="stack", summary="the stack's own workload (or its trace) under every policy", params=StackParams,
    build=build_stack, findings=findings, plan_section="simulation", plan_order=1,
))
register(ScenarioDef(
    name="trace", summary="a trace file (--trace) under every policy", params=TraceParams, build=build_trace,
    findings=findings,
))
