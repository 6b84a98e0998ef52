"""Run a scenario against its variants: the same arrivals and latency draws for every one, then bounds and scores.

``Runner(scenario, seed=..., policies=[...]).run()`` returns a ``ScenarioResult``; nothing is read or written before
``run()`` (a trace file is read there), and two runs with one seed are identical.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta

import numpy as np

from gpuscale.sim import best_fixed as BF
from gpuscale.sim import metrics as M
from gpuscale.sim import traffic
from gpuscale.sim.bounds import LowerBound
from gpuscale.sim.inputs import SimSetup, Variant
from gpuscale.sim.policies import FixedPolicy
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


LOWER_BOUND_INFINITE = (
    "the lower bound's relaxation finds no schedule reaching this attainment (more requests on time than its blocks "
    "admit), so there is no finite bound to compare with"
)
"""``PolicyResult.lower_bound_note`` when ``LowerBound.gpu_hours`` is infinite."""


def with_lower_bound(r: M.PolicyResult, bound: LowerBound, hold_s: float) -> M.PolicyResult:
    """``r`` with the lower bound at its own attainment: counted from its exact number of requests on time (the rounded
    ``slo_attainment`` can round up to a count the run did not reach, which made the bound infinite); an infinite bound
    is stored as ``None`` with the reason, never as a number."""
    lb = bound.gpu_hours(r.on_time / r.arrived if r.arrived else 0.0, hold_s)
    if math.isinf(lb):
        return r.model_copy(update={"lower_bound_gpu_hours": None, "lower_bound_note": LOWER_BOUND_INFINITE})
    return r.model_copy(update={"lower_bound_gpu_hours": round(lb, 4)})


def traffic_info(sc: Scenario, arrivals: traffic.Arrivals, warmup: tuple[int, float] = (0, 0.0)) -> M.TrafficInfo:
    spec = sc.traffic
    warm = {"warmup_s": warmup[1], "warmup_requests": warmup[0]}
    if isinstance(spec, traffic.TraceTraffic):
        grid = traffic.trace_granularity_s(spec)
        return M.TrafficInfo(
            kind="trace", requests=len(arrivals), granularity_s=None if grid is None else round(grid / spec.compress, 6),
            replay=spec.replay if grid is not None else "exact", prefix_ids=arrivals.prefixes is not None, **warm,
        )
    return M.TrafficInfo(kind="synthetic", requests=len(arrivals), prefix_ids=arrivals.prefixes is not None, **warm)


def warm_setup(s: SimSetup, warmup_s: float) -> SimSetup:
    """The set-up of a run with ``warmup_s`` replayed first: arrivals for that much longer, and the clock started that
    much earlier, so wall-clock schedules line up with the scored window as they would without the warm-up."""
    if warmup_s <= 0:
        return s
    return s.model_copy(update={
        "duration_s": s.duration_s + warmup_s, "clock_start": s.clock_start - timedelta(seconds=warmup_s * s.clock_rate),
    })


class Runner:
    """A scenario, a seed and the variants to compare (the ceiling always runs: it is the attainment reference)."""

    def __init__(
        self, scenario: Scenario, *, seed: int = 0, policies: list[str] | None = None, warmup_s: float = 0.0,
        best_fixed: bool = False,
    ) -> None:
        """``warmup_s``: replay that many seconds of the same traffic first, not scored (``traffic.with_warmup``).
        ``best_fixed``: also search the best fixed allocation in hindsight (``best_fixed``; several more runs)."""
        known = scenario.variant_names()
        if policies:
            unknown = [p for p in policies if p not in known]
            if unknown:
                raise ScenarioError(
                    f"unknown polic{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)} for scenario "
                    f"{scenario.name}; choose from: {', '.join(known)}"
                )
        if not (math.isfinite(warmup_s) and 0 <= warmup_s <= scenario.setup.duration_s):
            raise ScenarioError(
                f"warm-up of {warmup_s:g} s: use from 0 to the run's duration ({scenario.setup.duration_s:g} s; the "
                "warm-up replays the start of the same traffic)"
            )
        self.scenario = scenario
        self.seed = seed
        self.warmup_s = warmup_s
        self.best_fixed = best_fixed
        self.variants: list[Variant] = [
            v for v in scenario.variants if not policies or v.name in policies or v.bound is not None
        ]

    def run(self, progress: Progress | None = None) -> M.ScenarioResult:
        sc = self.scenario
        s = sc.setup
        scored = traffic.generate(sc.traffic, self.seed, s.duration_s)
        arrivals, warm = traffic.with_warmup(scored, self.warmup_s)
        run_setup = warm_setup(s, self.warmup_s)
        servable = servable_of(s, arrivals)
        window = (warm, self.warmup_s)

        def simulate(v: Variant) -> M.PolicyResult:
            cb = (lambda f, name=v.name: progress(name, f)) if progress is not None else None
            return Simulation(run_setup, v, arrivals, self.seed, servable, warmup=window).run(cb)

        variants = list(self.variants)
        raw = [simulate(v) for v in variants]
        if self.best_fixed:
            for v, r in self._best_fixed(s, variants, raw, simulate):
                variants.append(v)
                raw.append(r)
        bound = lower_bound_of(s, scored)
        compared = [r.gpu_hours for r in raw if r.bound is None] or [r.gpu_hours for r in raw]
        ref = min(compared)
        results = []
        for v, r in zip(variants, raw, strict=True):
            r = with_lower_bound(r, bound, node_hold_s(s, v, r))
            results.append(r.model_copy(update={"score": M.score(r, ref)}))
        result = M.ScenarioResult(
            scenario=sc.name, description=sc.description, stack=s.stack, model=s.model, seed=self.seed,
            duration_s=s.duration_s, parameters=sc.parameters, traffic=traffic_info(sc, scored, window),
            slo=M.SloTargets(ttft_p99_s=s.ttft_slo_s, itl_p99_s=s.itl_slo_s, request_timeout_s=s.request_timeout_s),
            reference_gpu_hours=round(ref, 4), lower_bound=[M.LowerBoundPoint(attainment=a, gpu_hours=g) for a, g in bound.curve()],
            results=results, findings=[],
        )
        return result.model_copy(update={"findings": findings(sc, result)})

    @staticmethod
    def _best_fixed(
        s: SimSetup, variants: list[Variant], raw: list[M.PolicyResult], simulate: Callable[[Variant], M.PolicyResult],
    ) -> list[tuple[Variant, M.PolicyResult]]:
        """The best fixed allocations in hindsight: the ceiling's variant (warm nodes, nothing removed) at the cheapest
        constant counts meeting the goal (``best_fixed.search_both``): ``best-fixed`` within the spec's warm minimum
        and maximum, and ``best-fixed-unconstrained`` from one replica per role when that is a different allocation
        (below a warm minimum). Nothing without a ceiling to measure the goal by."""
        at = next((i for i, v in enumerate(variants) if v.bound is not None), None)
        if at is None or not isinstance(variants[at].policy, FixedPolicy):
            return []
        ceiling, ceiling_result = variants[at], raw[at]
        top = dict(ceiling.initial_replicas or {})

        def of(counts: dict[str, int], name: str = BF.BEST_FIXED, what: str = "") -> Variant:
            # the within-limits reference keeps its wording of before it kept the warm minimum (plans quote it)
            label = ", ".join(f"{k} {v}" for k, v in counts.items())
            return ceiling.model_copy(update={
                "name": name, "policy": FixedPolicy(per_role=counts), "initial_replicas": counts, "bound": None,
                "description": f"reference: the cheapest constant allocation {what}meeting the attainment goal on "
                               f"this run ({label}), found in hindsight",
            })

        found = BF.search_both(lambda c: simulate(of(c)), top, ceiling_result, {r.role: r.sizing.min_replicas for r in s.roles})
        runs = f"; {found.runs} search run{'s' if found.runs != 1 else ''}"
        v = of(found.counts)
        out = [(v, found.result.model_copy(update={
            "name": BF.BEST_FIXED, "bound": BF.BEST_FIXED, "description": v.description + runs}))]
        if not found.same:
            name = BF.BEST_FIXED_UNCONSTRAINED
            u = of(found.unconstrained_counts, name, "from one replica per role, below the spec's warm minimum, ")
            out.append((u, found.unconstrained.model_copy(update={"name": name, "bound": name, "description": u.description})))
        return out

def simulate(
    spec: PlatformSpec, scenario: str = "stack", *, model: str | None = None, seed: int = 0,
    duration_s: float | None = None, policies: list[str] | None = None, trace: traffic.TraceTraffic | None = None,
    progress: Progress | None = None, warmup_s: float = 0.0, best_fixed: bool = True,
) -> M.ScenarioResult:
    """Build a scenario from the spec and run it: the one call the CLI and the plan document need (with the best fixed
    allocation in hindsight unless ``best_fixed`` is False)."""
    sc = build_scenario(scenario, spec, model=model, duration_s=duration_s, trace=trace)
    return Runner(sc, seed=seed, policies=policies, warmup_s=warmup_s, best_fixed=best_fixed).run(progress)
