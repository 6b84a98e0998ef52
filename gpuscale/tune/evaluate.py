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

import numpy as np

from gpuscale import sizing as sizing_mod
from gpuscale.sim import best_fixed, traffic
from gpuscale.sim.inputs import SimSetup, Variant
from gpuscale.sim.metrics import PolicyResult
from gpuscale.sim.placement import KAI
from gpuscale.sim.policies import DutyCyclePolicy, FixedPolicy, GpuscalePolicy, QueueDepthPolicy
from gpuscale.sim.runner import lower_bound_of, node_hold_s, servable_of, warm_setup, with_lower_bound
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


def part_of(
    arrivals: traffic.Arrivals, start_s: float, end_s: float, warmup_s: float, *, to_the_end: bool = False,
) -> tuple[traffic.Arrivals, traffic.Arrivals, int, float]:
    """The requests arriving in ``[start_s, end_s)`` (``to_the_end``: ``[start_s, end_s]``, the trace's last part, whose
    last request arrives at its end) on their own clock (scored), and the run that replays them after
    a warm-up: the ``warmup_s`` of traffic that preceded them in the trace (the policy enters the part in the state the
    trace led to), or, for a part at the trace's start, the part's own first ``warmup_s`` (``traffic.with_warmup``).
    Returns (scored, run arrivals, warm-up requests, warm-up seconds)."""
    t = arrivals.arrival_s
    lo, hi = int(np.searchsorted(t, start_s, side="left")), int(np.searchsorted(t, end_s, side="right" if to_the_end else "left"))

    def cut(a: int, b: int, shift: float) -> traffic.Arrivals:
        pre = None if arrivals.prefixes is None else arrivals.prefixes[a:b]
        return traffic.Arrivals(t[a:b] - shift, arrivals.prompt_tokens[a:b], arrivals.output_tokens[a:b], prefixes=pre)

    scored = cut(lo, hi, start_s)
    if start_s <= 0.0 or warmup_s <= 0.0:
        w = max(min(warmup_s, end_s - start_s), 0.0)
        run, warm = traffic.with_warmup(scored, w)
        return scored, run, warm, w
    w = min(warmup_s, start_s)
    first = int(np.searchsorted(t, start_s - w, side="left"))
    return scored, cut(first, hi, start_s - w), lo - first, w


class TraceBench:
    """The trace replayed on one model of a stack; ``run_*`` simulate one policy each."""

    def __init__(
        self, spec: PlatformSpec, model_name: str, trace: TraceTraffic, seed: int = 0, heartbeat: Progress | None = None,
        *, warmup_s: float = 0.0, part: tuple[float, float] | None = None,
    ) -> None:
        """``heartbeat`` is told the fraction done of every simulation that has no progress of its own (a long trace's
        runs take minutes; the CLI prints a line every few seconds from it). ``part``: score only the requests arriving
        in ``[start, end)`` replayed seconds (``--holdout``); ``warmup_s``: replay that much of the traffic before it
        first, unscored (``part_of``)."""
        sc = build_scenario("trace", spec, model=model_name, trace=trace)
        self.heartbeat = heartbeat
        self.spec = spec
        self.model_name = model_name
        self.trace = trace
        self.seed = seed
        whole = traffic.generate(sc.traffic, seed, sc.setup.duration_s)
        start, end = part if part is not None else (0.0, sc.setup.duration_s)
        self.part = (start, end)
        self.arrivals, self.run_arrivals, warm, self.warmup_s = part_of(
            whole, start, end, warmup_s, to_the_end=end >= sc.setup.duration_s)
        self.warmup = (warm, self.warmup_s)
        self.duration_s = end - start
        self.setup = sc.setup.model_copy(update={"duration_s": self.duration_s})
        self.servable = servable_of(self.setup, self.run_arrivals)
        self.bound = lower_bound_of(self.setup, self.arrivals)
        self.runs = 0

    @property
    def scored_servable(self) -> int:
        """Servable requests of the scored part (the warm-up's excluded)."""
        return int(self.servable[self.warmup[0]:].sum())

    @staticmethod
    def span_s(spec: PlatformSpec, model_name: str, trace: TraceTraffic) -> float:
        """The replayed trace's duration (what ``part`` splits)."""
        return build_scenario("trace", spec, model=model_name, trace=trace).setup.duration_s

    def setup_of(self, spec: PlatformSpec) -> SimSetup:
        model = model_of(spec, self.model_name)
        ms = sizing_mod.size_model(spec, model)
        return make_setup(spec, model, ms, self.duration_s, clock_rate=self.trace.compress)

    def _run(self, setup: SimSetup, v: Variant, progress: Progress | None = None) -> PolicyResult:
        self.runs += 1
        run_setup = warm_setup(setup, self.warmup_s)
        sim = Simulation(run_setup, v, self.run_arrivals, self.seed, self.servable, warmup=self.warmup)
        r = sim.run(progress or self.heartbeat)
        return with_lower_bound(r, self.bound, node_hold_s(setup, v, r))

    def run_gpuscale(self, spec: PlatformSpec, name: str = "gpuscale", progress: Progress | None = None) -> PolicyResult:
        model = model_of(spec, self.model_name)
        v = variant(name, "what gpuscale emits for this stack", GpuscalePolicy(), spec, model)
        return self._run(self.setup_of(spec), v, progress)

    def run_duty_cycle(self, spec: PlatformSpec) -> PolicyResult:
        model = model_of(spec, self.model_name)
        v = variant("dcgm-duty-cycle", "HPA on DCGM_FI_DEV_GPU_UTIL, target 80%", DutyCyclePolicy(), spec, model)
        return self._run(self.setup_of(spec), v)

    def run_queue_depth(self, spec: PlatformSpec) -> PolicyResult:
        model = model_of(spec, self.model_name)
        v = variant("queue-depth", "HPA on queue depth 5 and KV 0.8", QueueDepthPolicy(), spec, model)
        return self._run(self.setup_of(spec), v)

    def run_best_fixed(self, spec: PlatformSpec, ceiling: PolicyResult) -> best_fixed.BestFixed:
        """The best fixed allocations in hindsight on this part, within the spec's warm minimum and from one replica
        per role (``best_fixed.search_both``, runs of ``run_fixed``)."""
        minimum: dict[str, int] = {r.role: r.sizing.min_replicas for r in self.setup_of(spec).roles}
        return best_fixed.search_both(lambda c: self.run_fixed(spec, c), self.ceiling_counts(spec), ceiling, minimum)

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
