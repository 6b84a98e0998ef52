"""``tune``: fit one model's autoscaling to a trace by simulation, within the stack's limits.

1. Replay the trace once (``TraceBench``); run the ceiling and the duty-cycle HPA: they set the goal (``Goal``).
2. If the ceiling misses the SLO's goodput target, the limits cannot carry the trace: say what to raise
   (``limits.check_limits``) and stop.
3. Search the parameters (``search``) from the stack's own values; each point is the stack with those values, validated
   like a stack file and simulated.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from gpuscale import feasibility
from gpuscale.problems import Problems
from gpuscale.sim.metrics import PolicyResult
from gpuscale.sim.traffic import TraceTraffic
from gpuscale.sizing import SizingError, size_model
from gpuscale.spec.platform import PlatformSpec
from gpuscale.tune import trace_stats
from gpuscale.tune.evaluate import Goal, TraceBench
from gpuscale.tune.limits import LimitsVerdict, check_limits
from gpuscale.tune.params import TuneParams, apply, consolidate_after_candidates, current_params, model_of
from gpuscale.tune.search import Score, SearchResult, coordinates, search

DEFAULT_MAX_EVALS = 60
"""Simulations the search may run (one pass over every coordinate of a disaggregated model is about 50)."""


@dataclass
class HeldOut:
    """The tuned and the untuned policy scored on the part of the trace the search never saw (``--holdout``)."""

    fraction: float
    start_s: float
    """Where the held-out part starts (replayed seconds); the fit part is everything before it."""
    goal: Goal
    ceiling: PolicyResult
    duty: PolicyResult
    before: PolicyResult
    after: PolicyResult


def decisions(r: PolicyResult) -> int:
    """Scaling decisions a run made in its scored window (every change of a role's desired replicas)."""
    return r.scale_events


def is_fixed_allocation(r: PolicyResult) -> bool:
    """A run that made no scaling decision: whatever its settings say, it was a fixed allocation."""
    return decisions(r) == 0


@dataclass
class TuneOutcome:
    model: str
    goal: Goal
    ceiling: PolicyResult
    duty: PolicyResult
    limits: LimitsVerdict
    before: PolicyResult
    after: PolicyResult | None
    """None when the limits cannot carry the trace (nothing was searched)."""
    search: SearchResult | None
    tuned: PlatformSpec | None
    start: TuneParams
    profile: trace_stats.TraceProfile
    elapsed_s: float
    simulations: int
    held_out: HeldOut | None = None
    """With ``holdout``: both policies on the held-out part (``before``/``after`` above are on the fit part)."""


def _floors(spec: PlatformSpec, model_name: str, start: TuneParams) -> dict[str, int]:
    """Lowest warm minimum per role the spec accepts: 1 for a critical SLO or backend hpa; 0 only for a role that has a
    wake schedule (at zero nothing else wakes it)."""
    model = model_of(spec, model_name)
    out: dict[str, int] = {}
    for role in start.roles:
        stated = model.autoscaling.role(role)  # type: ignore[arg-type]
        zero_ok = (
            model.slo.criticality != "critical" and model.autoscaling.backend == "keda" and stated.wake_schedule is not None
        )
        out[role] = 0 if zero_ok else 1
    return out


def _warm_options(
    spec: PlatformSpec, model_name: str, start: TuneParams, prof: trace_stats.TraceProfile,
) -> dict[str, Sequence[object]]:
    """Per role: no warm-up, or the windows the daily profile asks for (only when the trace shows a daily pattern)."""
    if prof.hourly_rps is None or model_of(spec, model_name).autoscaling.backend != "keda":
        return {}
    ms = size_model(spec, model_of(spec, model_name))
    out: dict[str, Sequence[object]] = {}
    for rs in ms.roles:
        windows = trace_stats.daily_warm_windows(
            prof.hourly_rps, rs.replicas_per_rps, max(rs.replicas_at_base, rs.min_replicas), ms.cold_start.total_s,
        )
        windows = [w.model_copy(update={"replicas": min(w.replicas, start.roles[rs.role].max_replicas)}) for w in windows]
        if windows:
            out[rs.role] = [list(start.roles[rs.role].warm_schedule), windows]
    return out


def _split(spec: PlatformSpec, model_name: str, trace: TraceTraffic, holdout: float | None) -> float | None:
    """Where the held-out part starts (replayed seconds), None without ``holdout``."""
    if holdout is None:
        return None
    if not 0.0 < holdout < 1.0:
        raise ValueError(f"holdout {holdout:g}: the held-out share must be between 0 and 1")
    return TraceBench.span_s(spec, model_name, trace) * (1.0 - holdout)


def held_out(test: TraceBench, spec: PlatformSpec, tuned: PlatformSpec, fraction: float, start_s: float) -> HeldOut:
    """The ceiling, the duty-cycle HPA and both policies on the held-out ``test`` bench."""
    ceiling, duty = test.run_ceiling(spec), test.run_duty_cycle(spec)
    return HeldOut(fraction, start_s, Goal.of(ceiling, duty), ceiling, duty, test.run_gpuscale(spec, "before"),
                   test.run_gpuscale(tuned, "after"))


def tune(
    spec: PlatformSpec, model_name: str, trace: TraceTraffic, *, seed: int = 0, max_evals: int = DEFAULT_MAX_EVALS,
    tuned_on: str | None = None, progress: Callable[[int, int], None] | None = None, search_when_limited: bool = False,
    bench: TraceBench | None = None, ceiling: PolicyResult | None = None, duty: PolicyResult | None = None,
    phase: Callable[[str], None] | None = None, heartbeat: Callable[[float], None] | None = None,
    holdout: float | None = None, warmup_s: float = 0.0,
) -> TuneOutcome:
    """Tune ``model_name`` of ``spec`` on ``trace``. ``search_when_limited`` searches even when the limits cannot carry
    the trace (the goal benchmark reports both); the CLI refuses instead. ``bench``, ``ceiling`` and ``duty`` reuse runs
    the caller already has (same spec, trace and seed). ``phase`` is told each step before the search (each takes one
    trace replay), ``progress`` each simulation of the search, ``heartbeat`` the fraction done of the simulation running
    (for a bench built here). ``holdout``: the share of the trace (its end) the search never sees; the result is
    scored on it too (``held_out``), each part warm-started with the ``warmup_s`` of traffic before it."""
    say = phase or (lambda _: None)
    t0 = time.monotonic()
    split = _split(spec, model_name, trace, holdout)
    if bench is None:
        say("reading and replaying the trace" + (" (the part before the held-out share)" if split is not None else ""))
        bench = TraceBench(spec, model_name, trace, seed, heartbeat=heartbeat, warmup_s=warmup_s,
                           part=(0.0, split) if split is not None else None)
    prof = trace_stats.profile(bench.arrivals, trace.compress)
    if ceiling is None:
        say(f"simulating the ceiling on {len(bench.arrivals):,} requests")
        ceiling = bench.run_ceiling(spec)
    if duty is None:
        say("simulating the duty-cycle HPA")
        duty = bench.run_duty_cycle(spec)
    goal = Goal.of(ceiling, duty)
    limits = check_limits(bench, spec, ceiling)
    start = current_params(spec, model_name)
    gpus = bench.setup.replica.gpus
    results: dict[str, PolicyResult] = {}

    def evaluate(p: TuneParams) -> Score | None:
        try:
            candidate = apply(spec, model_name, p)
            feasibility.checked_sizing(candidate)
        except (ValidationError, SizingError, Problems):
            return None
        r = bench.run_gpuscale(candidate)
        results[p.key()] = r
        raised = sum(max(p.roles[k].min_replicas - start.roles[k].min_replicas, 0) for k in p.roles)
        return Score(goal.met(r), r.slo_attainment_servable, r.gpu_hours, raised * gpus * bench.duration_s / 3600.0)

    if not limits.carries and not search_when_limited:
        say("simulating the stack as written")
        before = bench.run_gpuscale(spec, "before")
        return TuneOutcome(model_name, goal, ceiling, duty, limits, before, None, None, None, start, prof,
                           time.monotonic() - t0, bench.runs)
    model = model_of(spec, model_name)
    coords = coordinates(
        start, keda=model.autoscaling.backend == "keda",
        consolidate_after=consolidate_after_candidates(spec, model_name, size_model(spec, model).cold_start.total_s),
        warm_options=_warm_options(spec, model_name, start, prof), min_floor=_floors(spec, model_name, start),
    )
    say(f"searching (at most {max_evals} simulations)")
    found = search(start, evaluate, coords, max_evals=max_evals, progress=progress)
    tuned = apply(spec, model_name, found.best, tuned_on=tuned_on)
    held: HeldOut | None = None
    runs = bench.runs
    if holdout is not None and split is not None:
        say(f"scoring both on the held-out {holdout:.0%} of the trace")
        test = TraceBench(spec, model_name, trace, seed, heartbeat=heartbeat, warmup_s=warmup_s,
                          part=(split, bench.span_s(spec, model_name, trace)))
        held = held_out(test, spec, tuned, holdout, split)
        runs += test.runs
    return TuneOutcome(
        model_name, goal, ceiling, duty, limits, results[start.key()], results[found.best.key()], found, tuned, start,
        prof, time.monotonic() - t0, runs, held,
    )
