"""``tune`` end to end on a tiny stack and short synthetic traces: a known optimum, and limits that cannot carry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpuscale.sim.traffic import TraceTraffic
from gpuscale.tune.evaluate import TraceBench, part_of
from gpuscale.tune.limits import LimitsVerdict, check_limits
from gpuscale.tune.tuner import decisions, is_fixed_allocation, tune
from tests.sim.conftest import spec_of
from tests.tune.conftest import steady, write_trace

SPAN_S = 300.0


def test_tune_finds_the_two_warm_replicas_a_steady_load_needs(tmp_path: Path) -> None:
    # 7 requests/s of 2,000-token prompts (one output token): 14k tok/s, more than one L40S replica prefills (11.3k)
    # and well within two. From t = 0 on, any schedule that meets the goal holds two replicas: 2 GPUs x the run
    spec = spec_of("tiny-aggregated")
    trace = TraceTraffic(path=write_trace(tmp_path / "steady.csv", steady(7.0, SPAN_S), 2000, 1))
    out = tune(spec, "small-8b", trace, max_evals=24)  # the warm minimum is the last coordinate searched
    assert out.limits.carries
    assert not out.goal.met(out.before)  # the stack as written starts with one replica and waits a cold start
    assert out.after is not None and out.goal.met(out.after)
    assert out.after.replicas_max == {"aggregated": 2}
    assert out.after.gpu_hours == pytest.approx(2 * out.after.end_s / 3600, rel=0.05)
    assert out.tuned is not None and out.search is not None
    tuned = out.tuned.models[0].autoscaling
    assert tuned.aggregated.min_replicas == out.search.best.roles["aggregated"].min_replicas == 2
    assert tuned.tuned_on is None  # only the CLI names the command line


def test_limits_that_cannot_carry_the_trace_name_what_to_raise(tmp_path: Path) -> None:
    spec = spec_of("tiny-aggregated")  # three 1-GPU replicas at most, a 4-GPU pool and queue
    trace = TraceTraffic(path=write_trace(tmp_path / "heavy.csv", steady(30.0, 120.0), 2000, 1))
    bench = TraceBench(spec, "small-8b", trace)
    verdict = check_limits(bench, spec, bench.run_ceiling(spec))
    assert not verdict.carries and verdict.needed is not None and verdict.reached is not None
    assert verdict.reached.slo_attainment_servable >= spec.models[0].slo.goodput_target
    need = verdict.needed["aggregated"]
    assert need > 3
    text = verdict.message("small-8b")
    assert "no autoscaling setting can do better" in text
    assert f"topology.gpu_pools[0].gpu_limit from 4 to {need} GPUs" in text
    assert f"models[0].autoscaling.aggregated.max_replicas from 3 to {need}" in text
    assert f"gpu_quota from 4 to {need} GPUs" in text


def test_when_no_replica_count_meets_the_target_the_message_says_so(tmp_path: Path) -> None:
    spec = spec_of("tiny-aggregated")
    trace = TraceTraffic(path=write_trace(tmp_path / "t.csv", steady(30.0, 60.0), 2000, 1))
    bench = TraceBench(spec, "small-8b", trace)
    ceiling = bench.run_ceiling(spec)
    verdict = LimitsVerdict(False, ceiling, 0.99, {"aggregated": 3}, None, ceiling)
    text = verdict.message("small-8b")
    assert "not a matter of replicas" in text and "change the SLO, the parallelism or the serving mode" in text


def test_the_same_seed_gives_the_same_tuning(tmp_path: Path) -> None:
    # a bucketed trace (10 requests every 2 s): spread replay draws the arrival times from the seed
    times = np.repeat(np.arange(0.0, 60.0, 2.0), 10)
    trace = TraceTraffic(path=write_trace(tmp_path / "buckets.csv", times, 1500, 20))
    spec = spec_of("tiny-aggregated")
    a, b = (tune(spec, "small-8b", trace, seed=3, max_evals=3) for _ in range(2))
    assert a.search is not None and b.search is not None and a.after is not None and b.after is not None
    assert a.search.best == b.search.best and a.search.history == b.search.history
    assert a.after.model_dump() == b.after.model_dump()


def test_progress_reports_each_step_and_simulation_without_changing_the_result(tmp_path: Path) -> None:
    trace = TraceTraffic(path=write_trace(tmp_path / "steady.csv", steady(7.0, 120.0), 2000, 1))
    spec = spec_of("tiny-aggregated")
    phases: list[str] = []
    done: list[tuple[int, int]] = []
    beats: list[float] = []
    watched = tune(spec, "small-8b", trace, max_evals=3, phase=phases.append,
                   progress=lambda d, t: done.append((d, t)), heartbeat=beats.append)
    quiet = tune(spec, "small-8b", trace, max_evals=3)
    assert phases[:3] == ["reading and replaying the trace", "simulating the ceiling on 840 requests",
                          "simulating the duty-cycle HPA"] and phases[-1].startswith("searching")
    assert done == [(1, 3), (2, 3), (3, 3)]
    assert beats and all(0.0 <= f <= 1.0 for f in beats)  # the ceiling and duty-cycle runs report as they go
    assert watched.after is not None and quiet.after is not None
    assert watched.after.model_dump() == quiet.after.model_dump() and watched.ceiling.model_dump() == quiet.ceiling.model_dump()


def test_part_of_scores_the_held_out_requests_after_the_traffic_before_them() -> None:
    from gpuscale.sim.traffic import Arrivals

    t = np.arange(0.0, 100.0, 1.0)
    a = Arrivals(t, np.full(100, 10), np.full(100, 1))
    scored, run, warm, w = part_of(a, 60.0, 100.0, 20.0)
    assert len(scored) == 40 and scored.arrival_s[0] == 0.0  # the part on its own clock
    # the run replays the 20 s of the trace before the part (40..59), then the part, 20 s later
    assert (warm, w) == (20, 20.0) and len(run) == 60 and run.arrival_s[0] == 0.0 and run.arrival_s[20] == 20.0
    # a part at the start has no past: its own first 20 s are replayed first (traffic.with_warmup)
    scored, run, warm, w = part_of(a, 0.0, 50.0, 20.0)
    assert len(scored) == 50 and (warm, w) == (20, 20.0) and len(run) == 70
    scored, run, warm, w = part_of(a, 0.0, 50.0, 0.0)
    assert len(run) == 50 and (warm, w) == (0, 0.0)


def test_holdout_fits_on_the_first_part_and_scores_both_policies_on_the_rest(tmp_path: Path) -> None:
    # 2 requests/s for the first half, 7 for the second: the search never sees the second half's load
    times = np.concatenate([steady(2.0, 150.0), 150.0 + steady(7.0, 150.0)])
    trace = TraceTraffic(path=write_trace(tmp_path / "step.csv", times, 2000, 1))
    spec = spec_of("tiny-aggregated")
    out = tune(spec, "small-8b", trace, max_evals=4, holdout=0.5, warmup_s=30.0)
    h = out.held_out
    assert h is not None and out.after is not None
    assert h.fraction == 0.5 and h.start_s == pytest.approx(150.0, abs=1.0)
    fit, held = out.profile.requests, h.after.arrived
    assert fit == 300 and held == 1050  # the fit part is the first half's requests; the held-out part the second's
    assert h.before.arrived == h.ceiling.arrived == h.duty.arrived == held
    assert out.search is not None  # ceiling, duty, the search; then the held-out ceiling, duty and both policies
    assert out.simulations == 2 + out.search.evaluations + 4
    assert decisions(h.after) == h.after.scale_events and is_fixed_allocation(h.after) == (h.after.scale_events == 0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        tune(spec, "small-8b", trace, max_evals=1, holdout=1.0)


def test_the_limits_tune_recommends_carry_the_trace(tmp_path: Path) -> None:
    from gpuscale.tune.limits import raises_for, with_raised_limits

    spec = spec_of("tiny-aggregated")  # three 1-GPU replicas at most, a 4-GPU pool and queue
    trace = TraceTraffic(path=write_trace(tmp_path / "heavy.csv", steady(30.0, 120.0), 2000, 1))
    bench = TraceBench(spec, "small-8b", trace)
    verdict = check_limits(bench, spec, bench.run_ceiling(spec))
    assert not verdict.carries and verdict.needed is not None
    raised = with_raised_limits(spec, "small-8b", verdict.needed)
    need = verdict.needed["aggregated"]
    assert raised.topology.gpu_pools[0].gpu_limit == need and raised.models[0].autoscaling.aggregated.max_replicas == need
    assert raises_for(raised, "small-8b", verdict.needed) == []  # nothing left to raise
    again = TraceBench(raised, "small-8b", trace)
    assert check_limits(again, raised, again.run_ceiling(raised)).carries


def test_raised_quotas_that_pass_the_pools_total_raise_the_models_pool_too() -> None:
    """prod's 70B at 15 replicas of 4 GPUs: its chat queue's quota 40 -> 60 lifts the inference queue to its children's
    sum, and the top-level quotas pass the pools' 80 GPUs together; the model's pool is raised by the excess, so the
    raised stack is one the cross-layer checks accept (before, it was refused and the goal-table cell failed)."""
    from gpuscale import feasibility
    from gpuscale.stackfile import load_stack_file
    from gpuscale.tune.limits import raises_for, with_raised_limits
    from tests.conftest import stack_path

    prod = load_stack_file(stack_path("prod"))
    model = next(m for m in prod.models if m.slo.criticality == "critical").name
    needed = {"prefill": 8, "decode": 7}
    lines = [r.line for r in raises_for(prod, model, needed)]
    raised = with_raised_limits(prod, model, needed)
    feasibility.checked_sizing(raised)  # refused before: top-level quotas above the pools' limits
    top = sum(q.gpu_quota for q in raised.teams)
    assert top <= sum(p.gpu_limit for p in raised.topology.gpu_pools)
    assert any(ln.startswith("topology.gpu_pools[0].gpu_limit from 64 to") for ln in lines), lines
