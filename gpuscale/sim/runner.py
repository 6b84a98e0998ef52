"""Run a scenario against its variants: the same arrivals and latency draws for every one, then bounds and scores.

``Runner(scenario, seed=..., policies=[...]).run()`` returns a ``ScenarioResult``; nothing is read or written before
``run()`` (a trace file is read there), and two runs with one seed are identical.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gpuscale.sim import metrics as M
from gpuscale.sim import traffic
from gpuscale.sim.bounds import LowerBound
from gpuscale.sim.inputs import SimSetup, Variant
from gpuscale.sim.replica import servable_mask
from gpuscale.sim.scenarios import Scenario, ScenarioError, build_scenario, findings
from gpuscale.sim.simulation import Simulation
from gpuscale.spec.platform import PlatformSpec

Progress = Callable[[str, float], None]
"""Called with (policy name, fraction of its run done)."""


def servable_of(s: SimSetup, arrivals: traffic.Arrivals) -> np.ndarray:
    return servable_mask(
        s.replica, arrivals.prompt_tokens, arrivals.output_tokens, s.ttft_slo_s, s.itl_slo_s,
        disaggregated=s.mode == "disaggregated", transfer_bytes_per_s=s.kv_link_bytes_per_s,
    )


def lower_bound_of(s: SimSetup, arrivals: traffic.Arrivals) -> LowerBound:
    fits = s.replica.fits(arrivals.prompt_tokens, arrivals.output_tokens)
    shared = any(n.foreign_gpus > 0 for n in s.extra_nodes)  # free GPUs of a shared node are not the model's cost
    return LowerBound(
        arrivals, fits, s.replica, ttft_slo_s=s.ttft_slo_s, itl_slo_s=s.itl_slo_s,
        disaggregated=s.mode == "disaggregated", gpus_per_replica=s.replica.gpus, shortest_load_s=s.startup.best_load_s,
        gpus_per_node=None if shared else s.gpus_per_node, horizon_s=s.duration_s,
    )


def node_hold_s(s: SimSetup, v: Variant, r: M.PolicyResult) -> float:
    """How long a node this run used stays charged at least (the lower bound's hold term): ``consolidateAfter`` under
    ``WhenEmpty``, forever when nothing removes nodes; 0 when nodes in use can go another way (underutilised
    consolidation, spot interruptions, shared nodes)."""
    if r.interruptions or any(n.foreign_gpus > 0 for n in s.extra_nodes):
        return 0.0
    c = v.consolidation
    if c.policy == "none":
        return float("inf")
    return c.consolidate_after_s if c.policy == "WhenEmpty" else 0.0


def traffic_info(sc: Scenario, arrivals: traffic.Arrivals) -> M.TrafficInfo:
    spec = sc.traffic
    if isinstance(spec, traffic.TraceTraffic):
        grid = traffic.trace_granularity_s(spec)
        return M.TrafficInfo(
            kind="trace", requests=len(arrivals), granularity_s=None if grid is None else round(grid / spec.compress, 6),
            replay=spec.replay if grid is not None else "exact", prefix_ids=arrivals.prefixes is not None,
        )
    return M.TrafficInfo(kind="synthetic", requests=len(arrivals), prefix_ids=arrivals.prefixes is not None)


class Runner:
    """A scenario, a seed and the variants to compare (the ceiling always runs: it is the attainment reference)."""

    def __init__(self, scenario: Scenario, *, seed: int = 0, policies: list[str] | None = None) -> None:
        known = scenario.variant_names()
        if policies:
            unknown = [p for p in policies if p not in known]
            if unknown:
                raise ScenarioError(
                    f"unknown polic{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)} for scenario "
                    f"{scenario.name}; choose from: {', '.join(known)}"
                )
        self.scenario = scenario
        self.seed = seed
        self.variants: list[Variant] = [
            v for v in scenario.variants if not policies or v.name in policies or v.bound is not None
        ]

    def run(self, progress: Progress | None = None) -> M.ScenarioResult:
        sc = self.scenario
        s = sc.setup
        arrivals = traffic.generate(sc.traffic, self.seed, s.duration_s)
        servable = servable_of(s, arrivals)
        raw: list[M.PolicyResult] = []
        for v in self.variants:
            cb = (lambda f, name=v.name: progress(name, f)) if progress is not None else None
            raw.append(Simulation(s, v, arrivals, self.seed, servable).run(cb))
        bound = lower_bound_of(s, arrivals)
        compared = [r.gpu_hours for r in raw if r.bound is None] or [r.gpu_hours for r in raw]
        ref = min(compared)
        results = []
        for v, r in zip(self.variants, raw, strict=True):
            lb = round(bound.gpu_hours(r.slo_attainment, node_hold_s(s, v, r)), 4)
            r = r.model_copy(update={"lower_bound_gpu_hours": lb})
            results.append(r.model_copy(update={"score": M.score(r, ref)}))
        result = M.ScenarioResult(
            scenario=sc.name, description=sc.description, stack=s.stack, model=s.model, seed=self.seed,
            duration_s=s.duration_s, parameters=sc.parameters, traffic=traffic_info(sc, arrivals),
            slo=M.SloTargets(ttft_p99_s=s.ttft_slo_s, itl_p99_s=s.itl_slo_s, request_timeout_s=s.request_timeout_s),
            reference_gpu_hours=round(ref, 4), lower_bound=[M.LowerBoundPoint(attainment=a, gpu_hours=g) for a, g in bound.curve()],
            results=results, findings=[],
        )
        return result.model_copy(update={"findings": findings(sc, result)})


def simulate(
    spec: PlatformSpec, scenario: str = "stack", *, model: str | None = None, seed: int = 0,
    duration_s: float | None = None, policies: list[str] | None = None, trace: traffic.TraceTraffic | None = None,
    progress: Progress | None = None,
) -> M.ScenarioResult:
    """Build a scenario from the spec and run it: the one call the CLI and the plan document need."""
    sc = build_scenario(scenario, spec, model=model, duration_s=duration_s, trace=trace)
    return Runner(sc, seed=seed, policies=policies).run(progress)
