"""One trace, one seed, many policies: the simulations ``gpuscale tune`` and the goal benchmark compare.

``TraceBench`` replays the trace once (same arrivals and servable mask for every run), computes the lower bound once,
and runs any spec's gpuscale policy, the duty-cycle HPA or the ceiling against it. Every run is the simulator's own
(``gpuscale.sim.simulation.Simulation``) with the variant the ``trace`` scenario builds, so a tuned result is what
``gpuscale simulate --trace`` prints for the tuned stack.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from gpuscale import sizing as sizing_mod
from gpuscale.sim import traffic
from gpuscale.sim.inputs import SimSetup, Variant
from gpuscale.sim.metrics import PolicyResult
from gpuscale.sim.placement import KAI
from gpuscale.sim.policies import DutyCyclePolicy, FixedPolicy, GpuscalePolicy
from gpuscale.sim.runner import lower_bound_of, node_hold_s, servable_of, with_lower_bound
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.scenarios.base import ceiling_counts, ceiling_variant, make_setup, variant
from gpuscale.sim.simulation import Simulation
from gpuscale.sim.traffic import TraceTraffic
from gpuscale.spec.platform import PlatformSpec
from gpuscale.tune.params import model_of

Progress = Callable[[float], None]


@dataclass(frozen=True)
class Goal:
    """What a tuned policy must reach on this trace (the issue's goal, per trace and compression)."""

    ceiling_servable: float
    """The ceiling's attainment over servable requests."""
    duty_servable: float
    """The duty-cycle HPA's."""
    slack: float
    """Points of servable attainment a policy may sit below the ceiling: at most one point, and at most a tenth of the
    duty-cycle HPA's gap to the ceiling (misses above the ceiling's, at most a tenth of the duty-cycle HPA's)."""

    @classmethod
    def of(cls, ceiling: PolicyResult, duty: PolicyResult) -> Goal:
        gap = max(ceiling.slo_attainment_servable - duty.slo_attainment_servable, 0.0)
        return cls(ceiling.slo_attainment_servable, duty.slo_attainment_servable, min(0.01, 0.1 * gap))

    def met(self, r: PolicyResult) -> bool:
        return r.slo_attainment_servable >= self.ceiling_servable - self.slack - 1e-9


class TraceBench:
    """The trace replayed on one model of a stack; ``run_*`` simulate one policy each."""

    def __init__(
        self, spec: PlatformSpec, model_name: str, trace: TraceTraffic, seed: int = 0, heartbeat: Progress | None = None,
    ) -> None:
        """``heartbeat`` is told the fraction done of every simulation that has no progress of its own (a long trace's
        runs take minutes; the CLI prints a line every few seconds from it)."""
        sc = build_scenario("trace", spec, model=model_name, trace=trace)
        self.heartbeat = heartbeat
        self.spec = spec
        self.model_name = model_name
        self.trace = trace
        self.seed = seed
        self.duration_s = sc.setup.duration_s
        self.arrivals = traffic.generate(sc.traffic, seed, self.duration_s)
        self.servable = servable_of(sc.setup, self.arrivals)
        self.bound = lower_bound_of(sc.setup, self.arrivals)
        self.setup = sc.setup
        self.runs = 0

    def setup_of(self, spec: PlatformSpec) -> SimSetup:
        model = model_of(spec, self.model_name)
        ms = sizing_mod.size_model(spec, model)
        return make_setup(spec, model, ms, self.duration_s, clock_rate=self.trace.compress)

    def _run(self, setup: SimSetup, v: Variant, progress: Progress | None = None) -> PolicyResult:
        self.runs += 1
        r = Simulation(setup, v, self.arrivals, self.seed, self.servable).run(progress or self.heartbeat)
        return with_lower_bound(r, self.bound, node_hold_s(setup, v, r))

    def run_gpuscale(self, spec: PlatformSpec, name: str = "gpuscale", progress: Progress | None = None) -> PolicyResult:
        model = model_of(spec, self.model_name)
        v = variant(name, "what gpuscale emits for this stack", GpuscalePolicy(), spec, model)
        return self._run(self.setup_of(spec), v, progress)

    def run_duty_cycle(self, spec: PlatformSpec) -> PolicyResult:
        model = model_of(spec, self.model_name)
        v = variant("dcgm-duty-cycle", "HPA on DCGM_FI_DEV_GPU_UTIL, target 80%", DutyCyclePolicy(), spec, model)
        return self._run(self.setup_of(spec), v)

    def run_ceiling(self, spec: PlatformSpec) -> PolicyResult:
        model = model_of(spec, self.model_name)
        setup = self.setup_of(spec)
        return self._run(setup, ceiling_variant(spec, model, setup))

    def run_fixed(self, spec: PlatformSpec, counts: dict[str, int]) -> PolicyResult:
        """Every role at ``counts`` on warm nodes, the pool's GPU limit lifted (what raising the limits would give)."""
        model = model_of(spec, self.model_name)
        setup = self.setup_of(spec)
        gpus = sum(counts.values()) * setup.replica.gpus
        setup = setup.model_copy(update={"pool_gpu_limit": max(setup.pool_gpu_limit, gpus)})
        from gpuscale.sim import nodes as N

        v = variant(
            "raised", f"every role at {counts} ready all the time", FixedPolicy(per_role=counts), spec, model,
            initial_replicas=counts, consolidation=N.ConsolidationSpec(policy="none", consolidate_after_s=0.0),
            bound="ceiling", scheduler=KAI,
        )
        return self._run(setup, v)

    def ceiling_counts(self, spec: PlatformSpec) -> dict[str, int]:
        return ceiling_counts(self.setup_of(spec))


def score(r: PolicyResult, reference_gpu_hours: float) -> float:
    from gpuscale.sim.metrics import score as sim_score

    return sim_score(r, reference_gpu_hours)


def gpu_hours_vs_bound(r: PolicyResult) -> float:
    lb = r.lower_bound_gpu_hours
    return r.gpu_hours / lb if lb else math.inf
