"""Run a scenario against its policies: same arrivals and latency draws for every policy, scored together.

``Runner(scenario, seed=..., policies=[...]).run()`` returns a ``ScenarioResult``; nothing is read or written
before ``run()`` (a trace file is read there), and two runs with one seed are identical.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuscale.sim import metrics as M
from gpuscale.sim import traffic
from gpuscale.sim.scenarios import Scenario, ScenarioError, build_scenario, findings
from gpuscale.sim.simulation import Simulation, Variant
from gpuscale.spec.platform import PlatformSpec

Progress = Callable[[str, float], None]
"""Called with (policy name, fraction of its run done)."""


class Runner:
    """A scenario, a seed and the policies to compare."""

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
        self.variants: list[Variant] = [v for v in scenario.variants if not policies or v.name in policies]

    def run(self, progress: Progress | None = None) -> M.ScenarioResult:
        sc = self.scenario
        arrivals = traffic.generate(sc.traffic, self.seed, sc.setup.duration_s)
        raw: list[M.PolicyResult] = []
        for v in self.variants:
            cb = (lambda f, name=v.name: progress(name, f)) if progress is not None else None
            raw.append(Simulation(sc.setup, v, arrivals, self.seed).run(cb))
        oracle = next((r for r in raw if r.policy == "oracle"), None)
        if oracle is not None:
            reference, ref_h = "oracle", oracle.gpu_hours
        else:
            reference, ref_h = "cheapest", min(r.gpu_hours for r in raw)
        results = [
            r.model_copy(update={
                "gpu_hours_vs_oracle": round(r.gpu_hours / oracle.gpu_hours, 4) if oracle is not None and oracle.gpu_hours > 0 else None,
                "score": M.score(r, ref_h),
            })
            for r in raw
        ]
        s = sc.setup
        return M.ScenarioResult(
            scenario=sc.name, description=sc.description, stack=s.stack, model=s.model, seed=self.seed,
            duration_s=s.duration_s, parameters=sc.parameters,
            slo=M.SloTargets(ttft_p99_s=s.ttft_slo_s, itl_p99_s=s.itl_slo_s, request_timeout_s=s.request_timeout_s),
            reference=reference, reference_gpu_hours=round(ref_h, 4), results=results, findings=findings(sc, results),
        )


def simulate(
    spec: PlatformSpec, scenario: str = "stack", *, model: str | None = None, seed: int = 0,
    duration_s: float | None = None, policies: list[str] | None = None, trace: traffic.TraceTraffic | None = None,
    progress: Progress | None = None,
) -> M.ScenarioResult:
    """Build a scenario from the spec and run it: the one call the CLI and the plan document need."""
    sc = build_scenario(scenario, spec, model=model, duration_s=duration_s, trace=trace)
    return Runner(sc, seed=seed, policies=policies).run(progress)
